"""Value-level transforms (TorchRL's): ``DTypeCastTransform``, ``DoubleToFloat``, ``ClipTransform``.

A cast in place changes the dtype of the entry's array: the base env's writes cast on the fly, so
it costs nothing per step. On the input side (``in_keys_inv``, by default the action and state
entries of ``dtype_in``), the policy writes ``dtype_out`` and the env reads ``dtype_in``.

Examples:
    >>> import torch
    >>> from reap.envs.transforms import DoubleToFloat, TransformedEnv
    >>> from reap_testing import CountingEnv
    >>> env = TransformedEnv(CountingEnv(dtype=torch.float64), DoubleToFloat())
    >>> env.observation_spec["observation"].dtype, env.rollout(2)["next", "observation"].dtype
    (torch.float32, torch.float32)
"""

from __future__ import annotations

from copy import copy

import numpy as np
import torch

from reap.envs.transforms.transform import Transform, apply_to_composite, keys_list, write_rows
from reap.specs import Bounded, Composite, ContinuousBox


def _cast_spec(spec, dtype):
    spec = spec.to(dtype) if spec.dtype != dtype else spec.clone()
    if isinstance(spec.space, ContinuousBox):
        spec.space.low, spec.space.high = spec.space.low.to(dtype), spec.space.high.to(dtype)
    return spec


class DTypeCastTransform(Transform):
    """Cast entries from ``dtype_in`` to ``dtype_out`` (and the inputs back), as TorchRL's.

    Args:
        dtype_in, dtype_out: the dtypes.
        in_keys, out_keys: outputs to cast; default: every observation and reward of ``dtype_in``.
        in_keys_inv, out_keys_inv: inputs the env reads as ``dtype_in``; default (when ``in_keys``
            is not given either): every action and state entry of ``dtype_in``.
    """

    invertible = True
    _array_hooks = True
    _array_inverse = True

    def __init__(self, dtype_in: torch.dtype, dtype_out: torch.dtype, in_keys=None, out_keys=None,
                 in_keys_inv=None, out_keys_inv=None):
        if in_keys is not None and in_keys_inv is None:
            in_keys_inv = []
        self.dtype_in, self.dtype_out = dtype_in, dtype_out
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)

    # TorchRL's keys: None until an env gives the entries of dtype_in
    def _keys(self, name: str, found):
        keys = self.__dict__.get(f"_{name}")
        if keys is None:
            parent = self.parent
            if parent is None:
                return None
            keys = self.__dict__[f"_{name}"] = [k for spec in found(parent) for k, v in spec.items(True, True)
                                                 if v.dtype == self.dtype_in]
        return keys

    @property
    def in_keys(self):
        return self._keys("in_keys", lambda env: (env.full_observation_spec, env.full_reward_spec))

    @in_keys.setter
    def in_keys(self, value):
        self.__dict__["_in_keys"] = keys_list(value, type(self).__name__, "in_keys")

    @property
    def out_keys(self):
        keys = self.__dict__.get("_out_keys")
        return copy(self.in_keys) if keys is None else keys

    @out_keys.setter
    def out_keys(self, value):
        self.__dict__["_out_keys"] = keys_list(value, type(self).__name__, "out_keys")

    @property
    def in_keys_inv(self):
        return self._keys("in_keys_inv", lambda env: (env.full_action_spec, env.full_state_spec))

    @in_keys_inv.setter
    def in_keys_inv(self, value):
        self.__dict__["_in_keys_inv"] = keys_list(value, type(self).__name__, "in_keys_inv")

    @property
    def out_keys_inv(self):
        keys = self.__dict__.get("_out_keys_inv")
        return copy(self.in_keys_inv) if keys is None else keys

    @out_keys_inv.setter
    def out_keys_inv(self, value):
        self.__dict__["_out_keys_inv"] = keys_list(value, type(self).__name__, "out_keys_inv")

    # ---- TorchRL's hooks -----------------------------------------------------------------------
    def _apply_transform(self, obs):
        return obs.to(self.dtype_out)

    def _inv_apply_transform(self, state):
        return state.to(self.dtype_in)

    def _reset(self, tensordict, tensordict_reset):
        from reap.envs.transforms.transform import missing_tolerance

        with missing_tolerance(self):
            return self._call(tensordict_reset)

    def forward(self, tensordict):
        in_keys, out_keys = self.in_keys, self.out_keys
        if in_keys is None:
            if self.__dict__.get("_out_keys") is not None:
                raise ValueError("in_keys wasn't provided and couldn't be retrieved, but out_keys was: the order of "
                                 "the entries cast cannot be guaranteed; pass the in_keys or no out_keys")
            for key, value in list(tensordict.items(True, True)):
                if value.dtype == self.dtype_in:
                    tensordict.set(key, self._apply_transform(value))
            return tensordict
        for in_key, out_key in zip(in_keys, out_keys, strict=True):
            tensordict.set(out_key, self._apply_transform(tensordict.get(in_key)))
        return tensordict

    def _inv_call(self, tensordict):
        if self.in_keys_inv is None:
            if self.__dict__.get("_out_keys_inv") is not None:
                raise ValueError("in_keys_inv wasn't provided and couldn't be retrieved, but out_keys_inv was; "
                                 "pass the in_keys_inv or no out_keys_inv")
            for key, value in list(tensordict.items(True, True)):
                if value.dtype == self.dtype_out:
                    tensordict.set(key, self._inv_apply_transform(value))
            return tensordict
        return super()._inv_call(tensordict)

    def _cast_entries(self, spec: Composite, pairs, what: str):
        for key, value in list(spec.items(True, True)):
            for in_key, out_key in pairs:
                if key == in_key:
                    if value.dtype != self.dtype_in:
                        raise TypeError(f"{what}[{key!r}].dtype is not {self.dtype_in}: {value.dtype}")
                    spec[out_key] = _cast_spec(value, self.dtype_out)
        return spec

    def transform_observation_spec(self, observation_spec):
        return self._cast_entries(observation_spec, list(zip(self.in_keys, self.out_keys)), "observation_spec")

    def transform_output_spec(self, output_spec):
        if self.in_keys is None:
            raise NotImplementedError(f"Calling transform_output_spec without a parent environment isn't supported "
                                      f"for {type(self).__name__}.")
        self._cast_entries(output_spec["full_reward_spec"], list(zip(self.in_keys, self.out_keys)), "reward_spec")
        output_spec["full_observation_spec"] = self.transform_observation_spec(output_spec["full_observation_spec"])
        return output_spec

    def transform_input_spec(self, input_spec):
        if self.in_keys_inv is None:
            raise NotImplementedError(f"Calling transform_input_spec without a parent environment isn't supported "
                                      f"for {type(self).__name__}.")
        action, state = input_spec["full_action_spec"], input_spec["full_state_spec"]
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv, strict=True):
            target = action if in_key in action.keys(True) else state if in_key in state.keys(True) else None
            if target is None:
                raise KeyError(f"Key {in_key} not found in state_spec and action_spec.")
            if target[in_key].dtype != self.dtype_in:
                raise TypeError(f"input_spec[{in_key!r}].dtype is not {self.dtype_in}: {target[in_key].dtype}")
            target[out_key] = _cast_spec(target[in_key], self.dtype_out)
        return input_spec

    # ---- arrays: a cast in place is the array's dtype; others copy -----------------------------
    def _attach(self, env):
        self._check_in_keys(env)
        self._copies = [(k, o) for k, o in zip(self.in_keys, self.out_keys) if k != o]
        # an input that is also an output cast in place shares its array: nothing to cast back
        self._inputs = [(k, o) for k, o in zip(self.in_keys_inv, self.out_keys_inv) if o not in self.out_keys]

    def replaced_keys(self):
        return tuple(o for _, o in self._copies)

    def replaced_inputs(self):
        return tuple(o for _, o in self._inputs)

    def reads_inputs(self):
        return tuple(k for k, _ in (*self._copies, *self._inputs))

    def on_reset(self, root, t, mask):
        for src, dst in self._copies:
            if dst in root:
                write_rows(root[dst][t], root[("in", src)][t], mask)

    def on_step(self, root, nxt, t):
        for src, dst in self._copies:
            np.copyto(nxt[dst][t], nxt[("in", src)][t], casting="unsafe")

    def on_action(self, root, t):
        for src, dst in self._inputs:
            np.copyto(root[("in", src)][t], root[dst][t], casting="unsafe")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(in_keys={self.in_keys}, out_keys={self.out_keys}, "
                f"in_keys_inv={self.in_keys_inv}, out_keys_inv={self.out_keys_inv})")


class DoubleToFloat(DTypeCastTransform):
    """``DTypeCastTransform`` from float64 to float32 (TorchRL's ``DoubleToFloat``)."""

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        super().__init__(torch.double, torch.float, in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv,
                         out_keys_inv=out_keys_inv)


class ClipTransform(Transform):
    """Clip ``in_keys`` (and ``in_keys_inv`` on the way in) to ``[low, high]`` (TorchRL's).

    Examples:
        >>> import torch
        >>> from reap.envs.transforms import ClipTransform, TransformedEnv
        >>> from reap_testing import CountingEnv
        >>> env = TransformedEnv(CountingEnv(limit=100.0), ClipTransform(in_keys=["observation"], low=0.0, high=1.5))
        >>> env.rollout(3, policy=lambda td: td.set("action", torch.ones(1)))["next", "observation"].flatten()
        tensor([1.0000, 1.5000, 1.5000])
    """

    _array_hooks = True

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None, *, low=None, high=None):
        in_keys = [] if in_keys is None else in_keys
        in_keys_inv = [] if in_keys_inv is None else in_keys_inv
        super().__init__(in_keys, copy(in_keys) if out_keys is None else out_keys, in_keys_inv,
                         copy(in_keys_inv) if out_keys_inv is None else out_keys_inv)
        if low is None and high is None:
            raise TypeError("Either one or both of `high` and `low` must be provided.")
        low, self.low_eps, low_min = self._bound(low, low, high)
        high, self.high_eps, self.high_max = self._bound(high, low, high)
        if low is not None and high is not None and low >= high:
            raise ValueError("`low` must be strictly lower than `high`.")
        self.low_min = -low_min
        self.register_buffer("low", low)
        self.register_buffer("high", high)

    @staticmethod
    def _bound(value, low, high):
        if (isinstance(value, torch.Tensor) and value.numel() > 1) or (isinstance(value, np.ndarray) and value.size > 1):
            raise TypeError(f"low and high must be scalars or None. Got low={low} and high={high}.")
        if value is None:
            return None, None, torch.finfo(torch.get_default_dtype()).max
        value = torch.as_tensor(value)
        value = value if value.dtype.is_floating_point else value.float()
        return value, torch.finfo(value.dtype).resolution, torch.finfo(value.dtype).max

    def _apply_transform(self, obs):
        if self.low is None:
            return obs.clamp_max(self.high)
        if self.high is None:
            return obs.clamp_min(self.low)
        return obs.clamp(self.low, self.high)

    _inv_apply_transform = _apply_transform

    def _reset(self, tensordict, tensordict_reset):
        from reap.envs.transforms.transform import missing_tolerance

        with missing_tolerance(self):
            return self._call(tensordict_reset)

    def _bounded(self, spec):
        high = self.high + self.high_eps if self.high is not None else self.high_max
        low = self.low - self.low_eps if self.low is not None else self.low_min
        return Bounded(low=low, high=high, shape=spec.shape, device=spec.device, dtype=spec.dtype)

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        return self._bounded(observation_spec)

    def transform_reward_spec(self, reward_spec):
        for key in self.in_keys:
            if key in self.parent.reward_keys:
                reward_spec[key] = self._bounded(reward_spec[key])
        return reward_spec

    def _attach(self, env):
        self._check_in_keys(env)

    def on_reset(self, root, t, mask):
        low, high = self._np_buffers["low"], self._np_buffers["high"]
        for src, dst in self._pairs:
            if src in root:
                if mask is None or mask.ndim == 0:
                    np.clip(root[src][t], low, high, out=root[dst][t])
                else:
                    root[dst][t][mask] = np.clip(root[src][t][mask], low, high)

    def on_step(self, root, nxt, t):
        low, high = self._np_buffers["low"], self._np_buffers["high"]
        for src, dst in self._pairs:
            if src in nxt:
                np.clip(nxt[src][t], low, high, out=nxt[dst][t])
