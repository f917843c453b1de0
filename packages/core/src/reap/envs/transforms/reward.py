"""Reward transforms (TorchRL's): ``RewardSum``, ``RewardScaling``, ``RewardClipping``, ``LineariseRewards``,
``BinarizeReward``, and ``SignTransform`` (of rewards or any entry).

Examples:
    >>> import torch
    >>> from reap.envs.transforms import RewardClipping, RewardScaling, RewardSum, TransformedEnv
    >>> from reap_testing import CountingEnv
    >>> env = TransformedEnv(CountingEnv(), RewardScaling(loc=1.0, scale=2.0))
    >>> env.append_transform(RewardClipping(clamp_min=0.0, clamp_max=2.5)).append_transform(RewardSum())
    ... # doctest: +ELLIPSIS
    TransformedEnv(...)
    >>> td = env.rollout(2, policy=lambda td: td.set("action", torch.ones(1)))
    >>> td["next", "reward"].flatten(), td["next", "episode_reward"].flatten()
    (tensor([2.5000, 2.5000]), tensor([2.5000, 5.0000]))
"""

from __future__ import annotations

from copy import copy

import numpy as np
import torch

from reap.envs.transforms.steps import group_roots, leaf_key
from reap.envs.transforms.transform import (
    Transform,
    apply_to_composite,
    expand_right,
    keys_list,
    missing_tolerance,
    reset_flags,
)
from reap.specs import Binary, Bounded, Composite, Unbounded


def _group_flags(tensordict, reset_key, value) -> torch.Tensor:
    """The flags of ``reset_key`` in a reset's input, shaped to expand right to ``value``: one per
    row of its group (all True when absent), reduced over dims ``value`` lacks."""
    if reset_key == "_reset":
        flags = reset_flags(tensordict)
    else:
        group = tensordict.get(reset_key[:-1], None)
        group = tensordict if group is None else group
        flags = tensordict.get(reset_key, None)
        if flags is None:
            flags = torch.ones((), dtype=torch.bool, device=group.device).expand(group.batch_size)
        elif flags.ndim > group.ndim:
            flags = flags.flatten(group.ndim, -1).any(-1)
    while flags.ndim > tensordict.ndim and flags.shape != value.shape[: flags.ndim]:
        flags = flags.any(-1)  # a group inside the sum's: any of its rows reset clears the sum
    return flags


def _episode_key(key):
    return f"episode_{key}" if isinstance(key, str) else (*key[:-1], f"episode_{key[-1]}")


class RewardSum(Transform):
    """Accumulate each reward of a trajectory in ``episode_<reward>`` (TorchRL's ``RewardSum``).

    Args:
        in_keys: the rewards (default: the env's reward keys, ``["reward"]`` without an env).
        out_keys: where the sums go (default ``episode_<key>``).
        reset_keys: the ``_reset`` entry that clears each sum, one per in_key (or one for all);
            by default that of the in_key's own done group (``("agents", "_reset")`` for
            ``("agents", "reward")``; ``"_reset"`` in an env of one done group), as TorchRL's.
        reward_spec: the sums are rewards (in ``full_reward_spec``) rather than observations.

    Outside an env, ``t(td)`` is the cumulative sum along the dim named ``"time"``.
    """

    _array_hooks = True

    def __init__(self, in_keys=None, out_keys=None, reset_keys=None, *, reward_spec: bool = False):
        super().__init__(in_keys=in_keys)
        if out_keys is not None:
            self.out_keys = out_keys
        self.reset_keys = reset_keys
        self.reward_spec = reward_spec

    @property
    def in_keys(self) -> list:
        keys = self.__dict__.get("_in_keys")
        if not keys:
            parent = self.parent
            return ["reward"] if parent is None else list(parent.reward_keys)
        return keys

    @in_keys.setter
    def in_keys(self, value) -> None:
        self.__dict__["_in_keys"] = keys_list(value, "RewardSum", "in_keys")
        self.__dict__["_resets"] = None  # the reset keys follow the in_keys (see reset_keys)

    @property
    def out_keys(self) -> list:
        keys = self.__dict__.get("_out_keys")
        return keys if keys else [_episode_key(k) for k in self.in_keys]

    @out_keys.setter
    def out_keys(self, value) -> None:
        value = keys_list(value, "RewardSum", "out_keys")
        if value is not None and len(value) != len(self.in_keys):
            raise ValueError("RewardSum expects the same number of input and output keys")
        self.__dict__["_out_keys"] = value

    @property
    def reset_keys(self) -> list:
        """Per in_key, the ``_reset`` entry that clears its sum (see the class)."""
        return self.__dict__.get("_resets") or self._resets_for(self.parent)

    @reset_keys.setter
    def reset_keys(self, value) -> None:
        self.__dict__["_given_reset_keys"] = keys_list(value, "RewardSum", "reset_keys")
        self.__dict__["_resets"] = None

    def _resets_for(self, env) -> list:
        """The reset key of each in_key: the given ones, else that of the done group of ``env``
        holding the in_key (the outermost such group, as TorchRL's ``_filtered_reset_keys``)."""
        in_keys, given = self.in_keys, self.__dict__.get("_given_reset_keys")
        if given is not None:
            if len(given) == 1:
                return given * len(in_keys)
            if len(given) != len(in_keys):
                raise ValueError(f"RewardSum: {len(given)} reset_keys {given} for {len(in_keys)} in_keys "
                                 f"{in_keys}; give one per in_key (or one for all)")
            return list(given)
        if env is None:
            return ["_reset"] * len(in_keys)
        roots, keys = group_roots(env), []
        for in_key in in_keys:
            path = in_key[:-1] if isinstance(in_key, tuple) else ()
            holding = [root for root in roots if path[: len(root)] == root]
            if not holding:
                raise ValueError(f"RewardSum: no done group of the env holds the in_key {in_key!r} (its reset "
                                 f"keys are {env.reset_keys}); pass reset_keys=[...] to say which resets clear it")
            keys.append(leaf_key(max(holding, key=len), "_reset"))
        return keys

    def _reset(self, tensordict, tensordict_reset):
        resets = self.reset_keys
        for in_key, reset_key, out_key in zip(self.in_keys, resets, self.out_keys, strict=True):
            value = tensordict.get(out_key, None)
            if value is None:
                value = self.parent.full_reward_spec[in_key].zero()
            else:
                value = torch.where(expand_right(~_group_flags(tensordict, reset_key, value), value), value, 0.0)
            tensordict_reset.set(out_key, value)
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            if in_key in next_tensordict.keys(True):
                next_tensordict.set(out_key, tensordict.get(out_key, 0.0) + next_tensordict.get(in_key))
            elif not self.missing_tolerance:
                raise KeyError(f"'{in_key}' not found in tensordict {tensordict}")
        return next_tensordict

    def forward(self, tensordict):
        time_dims = [i for i, name in enumerate(tensordict.names) if name == "time"]
        if not time_dims:
            raise ValueError("At least one dimension of the tensordict must be named 'time' in offline mode")
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            tensordict.set(out_key, tensordict[in_key].cumsum(time_dims[0] - 1))
        return tensordict

    def _episode_specs(self) -> Composite:
        reward_spec = self.parent.full_reward_spec
        specs = Composite(shape=reward_spec.shape)
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            if in_key not in reward_spec.keys(True, True):
                raise ValueError(f"The in_key: {in_key} is not present in the reward spec {reward_spec}.")
            specs[out_key] = reward_spec[in_key].clone()
        return specs

    def transform_observation_spec(self, observation_spec):
        if not self.reward_spec:
            observation_spec.update(self._episode_specs())
        return observation_spec

    def transform_reward_spec(self, reward_spec):
        if self.reward_spec:
            reward_spec.update(self._episode_specs())
        return reward_spec

    def transform_input_spec(self, input_spec):
        input_spec["full_state_spec"].update(self._episode_specs())
        return input_spec

    def _attach(self, env):
        self._check_in_keys(env)
        resets = self._resets_for(env)
        unknown = [key for key in resets if key not in env.reset_keys]
        if unknown:
            raise ValueError(f"RewardSum: reset_keys {unknown} are not reset keys of the env ({env.reset_keys})")
        self.__dict__["_resets"] = resets

    def on_reset(self, root, t, mask):
        for _, key in self._pairs:
            if mask is None or mask.ndim == 0:
                root[key][t] = 0
            else:
                root[key][t][mask] = 0

    def on_step(self, root, nxt, t):
        for src, dst in self._pairs:
            np.add(root[dst][t], nxt[src][t], out=nxt[dst][t])

    def __repr__(self) -> str:
        return f"RewardSum(keys={self.in_keys})"


class _KeyedInPlace(Transform):
    """Reward transforms written in place (``out_key`` is ``in_key``) or into a new entry."""

    def _attach(self, env):
        self._check_in_keys(env)


class RewardScaling(_KeyedInPlace):
    """Affine reward transform: ``reward * scale + loc``, or ``(reward - loc) / scale`` with
    ``standard_normal=True`` (TorchRL's ``RewardScaling``; ``scale`` is clamped to at least 1e-6).

    Examples:
        >>> import torch
        >>> from reap.envs.transforms import RewardScaling, TransformedEnv
        >>> from reap_testing import CountingEnv
        >>> env = TransformedEnv(CountingEnv(), RewardScaling(loc=1.0, scale=2.0))
        >>> env.rollout(2, policy=lambda td: td.set("action", torch.ones(1)))["next", "reward"].flatten()
        tensor([3., 3.])
    """

    _array_hooks = True

    def __init__(self, loc, scale, in_keys=None, out_keys=None, standard_normal: bool = False):
        in_keys = ["reward"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)
        self.register_buffer("standard_normal", torch.as_tensor(standard_normal))
        loc = loc if isinstance(loc, torch.Tensor) else torch.tensor(loc)
        scale = scale if isinstance(scale, torch.Tensor) else torch.tensor(scale)
        self.register_buffer("loc", loc)
        self.register_buffer("scale", scale.clamp_min(1e-6))

    def _apply_transform(self, reward):
        if self.standard_normal:
            return (reward - self.loc) / self.scale
        return reward * self.scale + self.loc

    @apply_to_composite
    def transform_reward_spec(self, reward_spec):
        if isinstance(reward_spec, Unbounded):
            return reward_spec
        raise NotImplementedError(f"{type(self).__name__}.transform_reward_spec not implemented for tensor spec "
                                  f"of type {type(reward_spec).__name__}")

    def on_step(self, root, nxt, t):
        buffers = self._np_buffers
        loc, scale = buffers["loc"], buffers["scale"]
        for src, dst in self._pairs:
            out = nxt[dst][t]
            if buffers["standard_normal"]:
                np.subtract(nxt[src][t], loc, out=out)
                np.divide(out, scale, out=out)
            else:
                np.multiply(nxt[src][t], scale, out=out)
                np.add(out, loc, out=out)

    def __repr__(self) -> str:
        return f"RewardScaling(loc={self.loc.item():4.4f}, scale={self.scale.item():4.4f}, keys={self.in_keys})"


class RewardClipping(_KeyedInPlace):
    """Clip the reward to ``[clamp_min, clamp_max]`` (TorchRL's ``RewardClipping``; reap also takes
    one bound alone).

    Examples:
        >>> import torch
        >>> from reap.envs.transforms import RewardClipping, TransformedEnv
        >>> from reap_testing import CountingEnv
        >>> env = TransformedEnv(CountingEnv(), RewardClipping(clamp_max=0.5))
        >>> env.rollout(2, policy=lambda td: td.set("action", torch.ones(1)))["next", "reward"].flatten()
        tensor([0.5000, 0.5000])
    """

    _array_hooks = True

    def __init__(self, clamp_min: float | None = None, clamp_max: float | None = None, in_keys=None,
                 out_keys=None):
        if clamp_min is None and clamp_max is None:
            raise ValueError("RewardClipping: give clamp_min, clamp_max or both")
        if clamp_min is not None and clamp_max is not None and clamp_min > clamp_max:
            raise ValueError(f"RewardClipping: clamp_min={clamp_min} must not exceed clamp_max={clamp_max}")
        in_keys = ["reward"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)
        for name, value in (("clamp_min", clamp_min), ("clamp_max", clamp_max)):
            self.register_buffer(name, None if value is None else torch.as_tensor(value))

    def _apply_transform(self, reward):
        if self.clamp_max is not None and self.clamp_min is not None:
            return reward.clamp(self.clamp_min, self.clamp_max)
        if self.clamp_min is not None:
            return reward.clamp_min(self.clamp_min)
        return reward.clamp_max(self.clamp_max)

    @apply_to_composite
    def transform_reward_spec(self, reward_spec):
        if not isinstance(reward_spec, Unbounded):
            raise NotImplementedError(f"{type(self).__name__}.transform_reward_spec not implemented for tensor "
                                      f"spec of type {type(reward_spec).__name__}")
        if self.clamp_min is None or self.clamp_max is None:
            return reward_spec
        return Bounded(self.clamp_min, self.clamp_max, shape=reward_spec.shape, device=reward_spec.device,
                       dtype=reward_spec.dtype)

    def on_step(self, root, nxt, t):
        low, high = self._np_buffers["clamp_min"], self._np_buffers["clamp_max"]
        for src, dst in self._pairs:
            np.clip(nxt[src][t], low, high, out=nxt[dst][t])

    def __repr__(self) -> str:
        bound = lambda b: "None" if b is None else f"{float(b):4.4f}"  # noqa: E731
        return f"RewardClipping(clamp_min={bound(self.clamp_min)}, clamp_max={bound(self.clamp_max)}, keys={self.in_keys})"


class LineariseRewards(Transform):
    """Sum the entries of a vector reward (weighted by ``weights``) into one (TorchRL's).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import LineariseRewards
        >>> t = LineariseRewards(in_keys=["reward"], weights=[1.0, 2.0])
        >>> t(TensorDict(reward=torch.tensor([[1.0, 1.0]]), batch_size=[1]))["reward"]
        tensor([[3.]])
    """

    _array_hooks = True

    def __init__(self, in_keys, out_keys=None, *, weights=None):
        super().__init__(in_keys=in_keys, out_keys=in_keys if out_keys is None else out_keys)
        if weights is not None:
            weights = weights if isinstance(weights, torch.Tensor) else torch.tensor(weights)
            if weights.ndim >= 2:
                raise ValueError(f"Expected weights to be a unidimensional tensor. Got {weights.ndim} dimension.")
        self.register_buffer("weights", weights)

    @apply_to_composite
    def transform_reward_spec(self, reward_spec):
        if reward_spec.domain != "continuous":
            raise NotImplementedError("Aggregation of rewards that take discrete values is not supported.")
        *batch, n = reward_spec.shape
        weights = (torch.ones(n, device=reward_spec.device, dtype=reward_spec.dtype)
                   if self.weights is None else self.weights)
        if weights.numel() != n:
            raise ValueError(f"The number of rewards and weights should match. Got: {n} and {weights.numel()}")
        if isinstance(reward_spec, Unbounded):
            return Unbounded(shape=(*batch, 1), device=reward_spec.device, dtype=reward_spec.dtype)
        positive, negative = weights.clamp(min=0), weights.clamp(max=0)
        low = (positive * reward_spec.space.low).sum(-1, keepdim=True) + (negative * reward_spec.space.high).sum(-1, keepdim=True)
        high = (positive * reward_spec.space.high).sum(-1, keepdim=True) + (negative * reward_spec.space.low).sum(-1, keepdim=True)
        return Bounded(low=low, high=high, device=reward_spec.device, dtype=reward_spec.dtype)

    def _apply_transform(self, reward):
        if self.weights is None:
            return reward.sum(dim=-1, keepdim=True)
        if self.weights.numel() != reward.shape[-1]:
            raise ValueError(f"The number of rewards and weights should match. Got: {reward.shape[-1]} and "
                             f"{self.weights.numel()}.")
        return (self.weights * reward).sum(dim=-1, keepdim=True)

    def replaced_keys(self):
        return tuple(self.out_keys)

    def reads_inputs(self):
        return tuple(self.in_keys)

    def _attach(self, env):
        self._check_in_keys(env)
        specs = env.next_specs()
        self._scratch = {k: np.zeros(tuple(specs[k].shape), dtype=specs[k].zero().numpy().dtype) for k in self.in_keys}

    def on_step(self, root, nxt, t):
        weights = self._np_buffers["weights"]
        for src, dst in self._pairs:
            reward = nxt[("in", src)][t]
            if weights is not None:
                reward = np.multiply(reward, weights, out=self._scratch[src])
            np.sum(reward, axis=-1, keepdims=True, out=nxt[dst][t])


class BinarizeReward(Transform):
    """The reward as 1 where it is positive, else 0, in ``torch.int8`` (TorchRL's ``BinarizeReward``;
    the reward spec becomes ``Binary(n=1)``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import BinarizeReward
        >>> BinarizeReward()(TensorDict(reward=torch.tensor([[0.5], [0.0], [-2.0]]), batch_size=[3]))["reward"]
        tensor([[1],
                [0],
                [0]], dtype=torch.int8)
    """

    def __init__(self, in_keys=None, out_keys=None):
        in_keys = ["reward"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)

    def _apply_transform(self, reward):
        if not reward.shape or reward.shape[-1] != 1:
            raise RuntimeError(f"BinarizeReward: the reward's last dim must be 1, got a reward of shape "
                               f"{tuple(reward.shape)}")
        return (reward > 0).to(torch.int8)

    @apply_to_composite
    def transform_reward_spec(self, reward_spec):
        return Binary(n=1, shape=reward_spec.shape, device=reward_spec.device)


class SignTransform(Transform):
    """The sign (-1, 0 or 1) of each entry of ``in_keys`` into ``out_keys``, and of ``in_keys_inv``
    into ``out_keys_inv`` on the way in (TorchRL's ``SignTransform``); their specs become
    ``Bounded(-1, 1)``. With no keys it does nothing.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import SignTransform
        >>> SignTransform(in_keys=["reward"])(TensorDict(reward=torch.tensor([[3.0], [0.0], [-0.5]]),
        ...                                              batch_size=[3]))["reward"].flatten()
        tensor([ 1.,  0., -1.])
    """

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        in_keys = [] if in_keys is None else in_keys
        in_keys_inv = [] if in_keys_inv is None else in_keys_inv
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys,
                         in_keys_inv=in_keys_inv,
                         out_keys_inv=copy(in_keys_inv) if out_keys_inv is None else out_keys_inv)

    def _apply_transform(self, value):
        return value.sign()

    def _inv_apply_transform(self, value):
        return value.sign()

    @staticmethod
    def _bounded(spec):
        return Bounded(low=-1.0, high=1.0, shape=spec.shape, device=spec.device, dtype=spec.dtype)

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        return self._bounded(observation_spec)

    def transform_reward_spec(self, reward_spec):
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in reward_spec.keys(True, True):
                reward_spec[out_key] = self._bounded(reward_spec[in_key])
        return reward_spec

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self._call(tensordict_reset)
