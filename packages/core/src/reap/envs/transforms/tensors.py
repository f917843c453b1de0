"""Transforms that reshape or combine entries (TorchRL's): ``CatTensors``, ``Stack``,
``UnsqueezeTransform``, ``SqueezeTransform``, ``PermuteTransform``, ``FlattenObservation``,
``ExpandAs``.

Each writes its output array in place from its input arrays (read as they were before it, under
``("in", key)``); when the output keeps the input's name, the input stays as a hidden array. On
the way in (``in_keys_inv``) they run through TorchRL's hooks.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import CatTensors, TransformedEnv, UnsqueezeTransform
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), UnsqueezeTransform(-2, in_keys=["observation"]))
    >>> env.append_transform(CatTensors(["observation"], "vec", dim=-2)).rollout(3)["next", "vec"].shape
    torch.Size([3, 1, 3])
"""

from __future__ import annotations

from copy import copy

import numpy as np
import torch
from tensordict import unravel_key as unravel
from tensordict.utils import expand_as_right

from reap.envs.transforms.transform import (
    Transform,
    apply_to_composite,
    apply_to_composite_inv,
    missing_tolerance,
    write_rows,
)
from reap.specs import Composite, ContinuousBox, Unbounded


def along(dim: int, start, stop) -> tuple:
    """An index selecting ``start:stop`` along the negative dimension ``dim``."""
    return (Ellipsis, slice(start, stop), *([slice(None)] * (-dim - 1)))


def sort_key(key):
    """TorchRL's order of keys: strings by name, nested keys by their joined parts."""
    return key if isinstance(key, str) else "_-|-_".join(key)


class _Writes(Transform):
    """Plumbing of the transforms here: out_keys written from in_keys on both sides."""

    def replaced_keys(self):
        return tuple(self.out_keys)

    def reads_inputs(self):
        return tuple(self.in_keys)

    def _attach(self, env):
        self._check_in_keys(env)

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self._call(tensordict_reset)

    def _write(self, arrays, t, mask):
        for src, dst in self._pairs:
            if ("in", src) in arrays:
                write_rows(arrays[dst][t], self._array(arrays[("in", src)][t], arrays[dst][t].shape), mask)

    def on_reset(self, root, t, mask):
        self._write(root, t, mask)

    def on_step(self, root, nxt, t):
        self._write(nxt, t, None)


class CatTensors(_Writes):
    """Concatenate ``in_keys`` along ``dim`` into ``out_key`` (TorchRL's ``CatTensors``).

    ``in_keys`` are sorted (``sort=True``) and removed (``del_keys=True``); without ``in_keys``,
    every observation with one dimension is taken (``dim`` must then be -1).

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import CatTensors, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), CatTensors(["observation"], "vec"))
        >>> sorted(env.observation_spec.keys())
        ['vec']
    """

    _array_hooks = True

    def __init__(self, in_keys=None, out_key="observation_vector", dim: int = -1, *, del_keys: bool = True,
                 unsqueeze_if_oor: bool = False, sort: bool = True):
        self._initialized = in_keys is not None
        if not self._initialized and dim != -1:
            raise ValueError("Lazy call to CatTensors is only supported when `dim=-1`.")
        if self._initialized and sort:
            in_keys = sorted(in_keys, key=sort_key)
        if not isinstance(out_key, (str, tuple)):
            raise TypeError(f"CatTensors requires out_key to be of type NestedKey, got {out_key!r}")
        super().__init__(in_keys=in_keys, out_keys=[out_key])
        self.dim = dim
        self._del_keys = del_keys
        self.unsqueeze_if_oor = unsqueeze_if_oor

    @property
    def keys_to_exclude(self) -> list:
        return [key for key in self.in_keys if key != self.out_keys[0]]

    def _find_in_keys(self):
        if not self._initialized:
            keys = [k for k, v in self.parent.observation_spec.items(True, True) if len(v.shape) == 1]
            self.in_keys = sorted(keys, key=sort_key)
            self._initialized = True

    def _call(self, next_tensordict):
        if not self._initialized:
            self._find_in_keys()
        values = [next_tensordict.get(key, None) for key in self.in_keys]
        if any(value is None for value in values):
            if self.missing_tolerance:
                return next_tensordict
            raise KeyError(f"CatTensor failed, as it expected input keys = {sorted(self.in_keys, key=sort_key)} but "
                           f"got a TensorDict with keys {sorted(next_tensordict.keys(True), key=sort_key)}")
        if self.unsqueeze_if_oor:
            index = self.dim if self.dim > 0 else -self.dim - 1
            values = [v if index < v.ndim else v.unsqueeze(-1 if self.dim > 0 else 0) for v in values]
        next_tensordict.set(self.out_keys[0], torch.cat(values, dim=self.dim))
        if self._del_keys:
            next_tensordict.exclude(*self.keys_to_exclude, inplace=True)
        return next_tensordict

    forward = _call

    def transform_observation_spec(self, observation_spec):
        self._find_in_keys()
        if not isinstance(observation_spec, Composite):
            if len(self.in_keys) > 1:
                raise ValueError("CatTensor cannot infer the output observation spec as there are multiple input "
                                 "keys but only one observation_spec.")
            return observation_spec
        if any(key not in observation_spec.keys(True) for key in self.in_keys):
            raise ValueError("CatTensor got a list of keys that does not match the keys in observation_spec. Make "
                             "sure the environment has an observation_spec attribute that includes all the specs "
                             "needed for CatTensor.")
        keys = [key for key in observation_spec.keys(True, True) if key in self.in_keys]
        first = observation_spec[keys[0]]
        shape = list(first.shape)
        shape[self.dim] = sum(observation_spec[k].shape[self.dim] if observation_spec[k].shape else 1 for k in keys)
        observation_spec[self.out_keys[0]] = Unbounded(shape=shape, dtype=first.dtype, device=first.device)
        if self._del_keys:
            for key in self.keys_to_exclude:
                if key in observation_spec.keys(True):
                    del observation_spec[key]
        return observation_spec

    def _attach(self, env):
        self._find_in_keys()
        super()._attach(env)
        if self.dim >= 0:
            raise ValueError(f"CatTensors: dim must be negative in an env (counted from the last dimension, so "
                             f"that it does not depend on the env's batch dims), got {self.dim}")
        root, nxt = env.root_specs(), env.next_specs()
        sizes = [(root[k] if k in root else nxt[k]).shape[self.dim] for k in self.in_keys]
        edges = np.cumsum([0, *sizes])
        slices = [along(self.dim, int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]
        self._parts = [(("in", key), index) for key, index in zip(self.in_keys, slices)]
        self._out_key = self.out_keys[0]

    def _write(self, arrays, t, mask):
        if self._parts[0][0] not in arrays:
            return
        out = arrays[self._out_key][t]
        for source, index in self._parts:
            write_rows(out[index], arrays[source][t], mask)

    def __repr__(self) -> str:
        return f"CatTensors(in_keys={self.in_keys}, out_key={self.out_keys[0]})"


class Stack(_Writes):
    """Stack ``in_keys`` along a new ``dim`` into ``out_key`` (and unbind ``in_key_inv`` back
    into ``out_keys_inv`` on the way in), as TorchRL's ``Stack``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import Stack
        >>> Stack(["a", "b"], "ab")(TensorDict(a=torch.zeros(2), b=torch.ones(2)))["ab"]
        tensor([[0., 1.],
                [0., 1.]])
    """

    _array_hooks = True

    invertible = True

    def __init__(self, in_keys, out_key, in_key_inv=None, out_keys_inv=None, dim: int = -1,
                 allow_positive_dim: bool = False, *, del_keys: bool = True):
        if not allow_positive_dim and dim >= 0:
            raise ValueError("dim should be negative to accommodate for envs of different batch_sizes. If you "
                             "need dim to be positive, set allow_positive_dim=True.")
        if (in_key_inv is None) != (out_keys_inv is None):
            raise ValueError("in_key_inv and out_keys_inv go together: give both or neither")
        super().__init__(in_keys=in_keys, out_keys=[out_key], in_keys_inv=None if in_key_inv is None else [in_key_inv],
                         out_keys_inv=out_keys_inv)
        if self.out_keys[0] in self.in_keys:
            raise ValueError(f"Stack: out_key {out_key!r} cannot be in in_keys")
        parents = {key[:-i] for key in self.in_keys if isinstance(key, tuple) for i in range(1, len(key))}
        self._maybe_del_parent_keys = sorted(parents, key=len, reverse=True)
        self.dim = dim
        self._del_keys = del_keys

    def _call(self, next_tensordict):
        values = []
        for key in self.in_keys:
            value = next_tensordict.get(key, None)
            if value is not None:
                values.append(value)
            elif not self.missing_tolerance:
                raise KeyError(f"{self}: '{key}' not found in tensordict {next_tensordict}")
        if not values:
            return next_tensordict
        next_tensordict.set(self.out_keys[0], torch.stack(values, dim=self.dim))
        if self._del_keys:
            next_tensordict.exclude(*self.in_keys, inplace=True)
            for parent in self._maybe_del_parent_keys:
                if parent in next_tensordict.keys(True) and not len(next_tensordict.get(parent).keys()):
                    next_tensordict.exclude(parent, inplace=True)
        return next_tensordict

    forward = _call

    def _inv_call(self, tensordict):
        if not self.in_keys_inv or self.in_keys_inv[0] not in tensordict.keys(True):
            return tensordict
        values = torch.unbind(tensordict.get(self.in_keys_inv[0]), dim=self.dim)
        for value, key in zip(values, self.out_keys_inv, strict=True):
            tensordict.set(key, value)
        return tensordict.exclude(self.in_keys_inv[0])

    def _stacked(self, spec):
        if not isinstance(spec, Composite):
            raise TypeError(f"{self}: Only specs of type Composite can be transformed")
        keys = [key for key in spec.keys(True) if key in self.in_keys]
        if not keys:
            return spec
        spec.set(self.out_keys[0], torch.stack([spec[key] for key in keys], dim=self.dim))
        if self._del_keys:
            for key in keys:
                del spec[key]
            for parent in self._maybe_del_parent_keys:
                if parent in spec.keys(True) and not len(spec[parent]):
                    del spec[parent]
        return spec

    def transform_observation_spec(self, observation_spec):
        return self._stacked(observation_spec)

    def transform_reward_spec(self, reward_spec):
        return self._stacked(reward_spec)

    def transform_done_spec(self, done_spec):
        return self._stacked(done_spec)

    def transform_input_spec(self, input_spec):
        self._stacked(input_spec["full_state_spec"])
        self._stacked(input_spec["full_action_spec"])
        return input_spec

    def _attach(self, env):
        groups = (env.full_observation_spec, env.full_reward_spec, env.full_done_spec, env.full_action_spec,
                  env.full_state_spec)
        if any(isinstance(spec.get(key, None), Composite) for spec in groups for key in self.in_keys):
            # whole groups (("agents", "agent_0")): stacked on TensorDicts, as TorchRL stacks them
            self.__dict__["_tensordict_hooks_only"] = True
            return
        super()._attach(env)
        dim = self.dim
        slots = [(Ellipsis, i, *([slice(None)] * (-dim - 1))) if dim < 0 else (*([slice(None)] * dim), i)
                 for i in range(len(self.in_keys))]
        self._parts = [(("in", key), index) for key, index in zip(self.in_keys, slots)]
        self._out_key = self.out_keys[0]

    def _write(self, arrays, t, mask):
        if self._parts[0][0] not in arrays:
            return
        out = arrays[self._out_key][t]
        for source, index in self._parts:
            write_rows(out[index], arrays[source][t], mask)

    def __repr__(self) -> str:
        return f"Stack(in_keys={self.in_keys}, out_key={self.out_keys[0]}, dim={self.dim})"


class UnsqueezeTransform(_Writes):
    """Insert a dimension of size one at ``dim`` in ``in_keys`` (TorchRL's ``UnsqueezeTransform``;
    a ``dim >= 0`` needs ``allow_positive_dim=True`` and counts after the env's batch dims).

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import TransformedEnv, UnsqueezeTransform
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), UnsqueezeTransform(-2, in_keys=["observation"]))
        >>> env.reset()["observation"].shape
        torch.Size([1, 3])
    """

    _array_hooks = True

    invertible = True

    def __init__(self, dim: int | None = None, *, allow_positive_dim: bool = False, in_keys=None, out_keys=None,
                 in_keys_inv=None, out_keys_inv=None):
        in_keys = [] if in_keys is None else in_keys
        in_keys_inv = [] if in_keys_inv is None else in_keys_inv
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys,
                         in_keys_inv=in_keys_inv, out_keys_inv=copy(in_keys_inv) if out_keys_inv is None else out_keys_inv)
        if not isinstance(dim, int):
            raise TypeError(f"{type(self).__name__}: dim must be an int, got {dim!r}")
        self.allow_positive_dim = allow_positive_dim
        if dim >= 0 and not allow_positive_dim:
            raise RuntimeError("dim should be smaller than 0 to accommodate for envs of different batch_sizes. Turn "
                               "allow_positive_dim to accommodate for positive dim.")
        self._dim = dim

    @property
    def dim(self) -> int:
        if self._dim >= 0 and self.parent is not None:
            return len(self.parent.batch_size) + self._dim
        return self._dim

    @property
    def unsqueeze_dim(self) -> int:
        return self.dim

    def _apply_transform(self, observation):
        return observation.unsqueeze(self.dim)

    def _inv_apply_transform(self, observation):
        return observation.squeeze(self.dim)

    def _transform_spec(self, spec):
        return spec.reshape(*self._apply_transform(torch.zeros(spec.shape, device="meta")).shape)

    @apply_to_composite_inv
    def transform_action_spec(self, action_spec):
        return self._transform_spec(action_spec)

    @apply_to_composite_inv
    def transform_state_spec(self, state_spec):
        return self._transform_spec(state_spec)

    @apply_to_composite
    def transform_reward_spec(self, reward_spec):
        reward_key = self.parent.reward_key if self.parent is not None else "reward"
        return self._transform_spec(reward_spec) if reward_key in self.in_keys else reward_spec

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        return self._transform_spec(observation_spec)

    def _array(self, value, shape):
        return value.reshape(shape)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(dim={self.dim}, in_keys={self.in_keys}, out_keys={self.out_keys}, "
                f"in_keys_inv={self.in_keys_inv}, out_keys_inv={self.out_keys_inv})")


class SqueezeTransform(UnsqueezeTransform):
    """Remove the dimension of size one at ``dim`` from ``in_keys`` (TorchRL's ``SqueezeTransform``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import SqueezeTransform
        >>> SqueezeTransform(-1, in_keys=["x"])(TensorDict(x=torch.zeros(3, 1)))["x"].shape
        torch.Size([3])
    """

    _array_hooks = True

    def __init__(self, dim: int | None = None, *args, in_keys=None, out_keys=None, in_keys_inv=None,
                 out_keys_inv=None, **kwargs):
        if dim is None:
            if "squeeze_dim" not in kwargs:
                raise TypeError(f"dim must be passed to {type(self).__name__} constructor.")
            dim = kwargs.pop("squeeze_dim")
        super().__init__(dim, *args, in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv,
                         out_keys_inv=out_keys_inv, **kwargs)

    @property
    def squeeze_dim(self) -> int:
        return self.dim

    _apply_transform = UnsqueezeTransform._inv_apply_transform
    _inv_apply_transform = UnsqueezeTransform._apply_transform


class PermuteTransform(_Writes):
    """Permute the trailing dims of ``in_keys`` to ``dims`` (negative, e.g. ``[-1, -3, -2]``), as
    TorchRL's ``PermuteTransform``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import PermuteTransform
        >>> PermuteTransform([-1, -2], in_keys=["x"])(TensorDict(x=torch.zeros(2, 3)))["x"].shape
        torch.Size([3, 2])
    """

    _array_hooks = True

    def __init__(self, dims, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        in_keys = [] if in_keys is None else in_keys
        in_keys_inv = [] if in_keys_inv is None else in_keys_inv
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys,
                         in_keys_inv=in_keys_inv, out_keys_inv=copy(in_keys_inv) if out_keys_inv is None else out_keys_inv)
        self.dims = dims
        if sorted(dims) != list(range(-len(dims), 0)):
            raise ValueError(f"Only tailing dims with negative indices are supported by {type(self).__name__}. Got "
                             f"{dims} instead.")

    @staticmethod
    def _invert_permute(p):
        n = len(p)
        return [next(j if q >= 0 else j - n for j, q in enumerate(p) if (q % n) == i) for i in range(n)]

    def _apply_transform(self, observation):
        return observation.permute(*range(observation.ndim - len(self.dims)), *self.dims)

    def _inv_apply_transform(self, state):
        return state.permute(*range(state.ndim - len(self.dims)), *self._invert_permute(self.dims))

    def _permuted(self, spec, dims, fn):
        shape = torch.Size([*spec.shape[: -len(dims)], *[spec.shape[d] for d in dims]])
        if isinstance(spec.space, ContinuousBox):
            low, high = fn(spec.space.low), fn(spec.space.high)
            spec = spec.reshape(*shape)
            spec.space.low, spec.space.high = low, high
            return spec
        return spec.reshape(*shape)

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        return self._permuted(observation_spec, self.dims, self._apply_transform)

    @apply_to_composite_inv
    def transform_input_spec(self, input_spec):
        return self._permuted(input_spec, self._invert_permute(self.dims), self._inv_apply_transform)

    def _attach(self, env):
        super()._attach(env)
        self._axes = {}

    def _array(self, value, shape):
        axes = self._axes.get(value.ndim)
        if axes is None:
            lead = value.ndim - len(self.dims)
            axes = self._axes[value.ndim] = (*range(lead), *(lead + len(self.dims) + d for d in self.dims))
        return value.transpose(axes)


class FlattenObservation(_Writes):
    """Flatten the dims ``first_dim`` to ``last_dim`` of ``in_keys`` (default ``["pixels"]``) into
    one (TorchRL's ``FlattenObservation``; dims ``>= 0`` need ``allow_positive_dim=True`` and count
    after the env's batch dims).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import FlattenObservation
        >>> FlattenObservation(-3, -1)(TensorDict(pixels=torch.zeros(2, 3, 4, 4), batch_size=[2]))["pixels"].shape
        torch.Size([2, 48])
    """

    _array_hooks = True

    def __init__(self, first_dim: int, last_dim: int, in_keys=None, out_keys=None, allow_positive_dim: bool = False):
        in_keys = ["pixels"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)
        for name, dim in (("first_dim", first_dim), ("last_dim", last_dim)):
            if not allow_positive_dim and dim >= 0:
                raise ValueError(f"{name} should be smaller than 0 to accommodate for envs of different batch_sizes "
                                 "(or pass allow_positive_dim=True to count dims after the env's batch dims).")
        self._first_dim = first_dim
        self._last_dim = last_dim

    def _counted(self, dim: int) -> int:
        return len(self.parent.batch_size) + dim if dim >= 0 and self.parent is not None else dim

    @property
    def first_dim(self) -> int:
        return self._counted(self._first_dim)

    @property
    def last_dim(self) -> int:
        return self._counted(self._last_dim)

    def _apply_transform(self, observation):
        return torch.flatten(observation, self.first_dim, self.last_dim)

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        spec = observation_spec.clone()
        if isinstance(spec.space, ContinuousBox):
            low, high = self._apply_transform(spec.space.low), self._apply_transform(spec.space.high)
            spec = spec.reshape(*low.shape)
            spec.space.low, spec.space.high = low, high
            return spec
        return spec.reshape(*self._apply_transform(torch.zeros(spec.shape, device="meta")).shape)

    def _array(self, value, shape):
        return value.reshape(shape)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(first_dim={int(self.first_dim)}, last_dim={int(self.last_dim)}, "
                f"in_keys={self.in_keys}, out_keys={self.out_keys})")


class ExpandAs(Transform):
    """``in_key`` expanded to the right to ``ref_key``'s shape, written to ``out_key`` (default
    ``in_key``), as TorchRL's ``ExpandAs`` (e.g. an env-level ``"done"`` to per-agent rewards).

    An ``in_key`` among the done flags written under another name becomes an observation.
    Runs through TorchRL's hooks (one expand per step).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import ExpandAs
        >>> td = TensorDict(done=torch.ones(1, dtype=torch.bool), reward=torch.zeros(1, 3))
        >>> ExpandAs("done", "reward", out_key="done3")(td)["done3"].shape
        torch.Size([1, 3])
    """

    SPECS = ("full_observation_spec", "full_reward_spec", "full_done_spec")

    def __init__(self, in_key, ref_key, out_key=None):
        out_key = in_key if out_key is None else out_key
        super().__init__(in_keys=[in_key], out_keys=[out_key])
        self.in_key, self.ref_key, self.out_key = self.in_keys[0], unravel(ref_key), self.out_keys[0]

    @classmethod
    def _find_key_spec(cls, output_spec, key):
        for name in cls.SPECS:
            if name in output_spec.keys() and key in output_spec[name].keys(True, True):
                return name, output_spec[name][key]
        raise KeyError(f"Key {key} was not found in output specs.")

    def _call(self, next_tensordict):
        ref = next_tensordict.get(self.ref_key, None)
        value = next_tensordict.get(self.in_key, None)
        for key, found in ((self.ref_key, ref), (self.in_key, value)):
            if found is None:
                if self.missing_tolerance:
                    return next_tensordict
                raise KeyError(f"{self}: '{key}' not found in tensordict {next_tensordict}")
        next_tensordict.set(self.out_key, expand_as_right(value, ref))
        return next_tensordict

    def forward(self, tensordict):
        return self._call(tensordict)

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            tensordict_reset = self._call(tensordict_reset)
        if self.out_key in tensordict_reset.keys(True, True):
            return tensordict_reset
        value = tensordict_reset.get(self.in_key, None)
        if value is None:
            return tensordict_reset
        ref = tensordict_reset.get(self.ref_key, None)
        if ref is None and self.parent is not None:  # a reward, say: absent from a reset's output
            try:
                ref = torch.empty(self._find_key_spec(self.parent.output_spec, self.ref_key)[1].shape,
                                  dtype=value.dtype, device=value.device)
            except KeyError:
                ref = None
        tensordict_reset.set(self.out_key, value if ref is None else expand_as_right(value, ref))
        return tensordict_reset

    def transform_output_spec(self, output_spec):
        output_spec = output_spec.clone()
        _, ref_spec = self._find_key_spec(output_spec, self.ref_key)
        name, in_spec = self._find_key_spec(output_spec, self.in_key)
        if name == "full_done_spec" and self.out_key != self.in_key:
            name = "full_observation_spec"
        while len(in_spec.shape) < len(ref_spec.shape):
            in_spec = in_spec.unsqueeze(-1)
        spec = output_spec[name]
        spec[self.out_key] = in_spec.expand(ref_spec.shape)
        output_spec[name] = spec
        return output_spec
