"""Reward transforms: ``RewardSum``, ``RewardScaling``, ``RewardClipping``."""

from __future__ import annotations

import numpy as np
import torch

from reap.envs.transforms.transformed_env import Transform
from reap.specs import Bounded, Unbounded


class RewardSum(Transform):
    """Accumulate the reward of each trajectory in ``episode_reward``."""

    def __init__(self, in_keys=("reward",), out_keys=("episode_reward",)):
        super().__init__(in_keys=in_keys)
        self.out_keys = list(out_keys)

    def transform_root_specs(self, specs):
        for src, dst in zip(self.in_keys, self.out_keys):
            specs[dst] = Unbounded(shape=self.parent.next_specs()[src].shape)
        return specs

    def transform_next_specs(self, specs):
        for src, dst in zip(self.in_keys, self.out_keys):
            specs[dst] = Unbounded(shape=specs[src].shape)
        return specs

    def state_keys(self):
        return tuple(self.out_keys)

    def on_reset(self, root, t, mask):
        for key in self.out_keys:
            if mask is None or mask.ndim == 0:
                root[key][t] = 0
            else:
                root[key][t][mask] = 0

    def on_step(self, root, nxt, t):
        for src, dst in zip(self.in_keys, self.out_keys):
            np.add(root[dst][t], nxt[src][t], out=nxt[dst][t])


class RewardScaling(Transform):
    """Affine reward transform: ``reward * scale + loc``, or ``(reward - loc) / scale`` with
    ``standard_normal=True`` (TorchRL's ``RewardScaling``).

    Examples:
        >>> import torch
        >>> from reap.envs.transforms import RewardScaling, TransformedEnv
        >>> from reap_testing import CountingEnv
        >>> env = TransformedEnv(CountingEnv(), RewardScaling(loc=1.0, scale=2.0))
        >>> env.rollout(2, policy=lambda td: td.set("action", torch.ones(1)))["next", "reward"].flatten()
        tensor([3., 3.])
    """

    def __init__(self, loc, scale, in_keys=None, out_keys=None, *, standard_normal: bool = False):
        in_keys = ["reward"] if in_keys is None else list(in_keys)
        if out_keys is not None and list(out_keys) != in_keys:
            raise ValueError("RewardScaling: out_keys must equal in_keys (the reward is scaled in place)")
        super().__init__(in_keys=in_keys)
        self.loc = torch.as_tensor(loc, dtype=torch.float32)
        self.scale = torch.as_tensor(scale, dtype=torch.float32)
        if standard_normal and bool((self.scale == 0).any()):
            raise ValueError("RewardScaling: scale must be non-zero with standard_normal=True")
        self.standard_normal = standard_normal
        self._loc, self._scale = self.loc.numpy(), self.scale.numpy()

    def on_step(self, root, nxt, t):
        for key in self.in_keys:
            reward = nxt[key][t]
            if self.standard_normal:
                np.subtract(reward, self._loc, out=reward)
                np.divide(reward, self._scale, out=reward)
            else:
                np.multiply(reward, self._scale, out=reward)
                np.add(reward, self._loc, out=reward)


class RewardClipping(Transform):
    """Clip the reward to ``[clamp_min, clamp_max]`` (TorchRL's ``RewardClipping``).

    Examples:
        >>> import torch
        >>> from reap.envs.transforms import RewardClipping, TransformedEnv
        >>> from reap_testing import CountingEnv
        >>> env = TransformedEnv(CountingEnv(), RewardClipping(clamp_max=0.5))
        >>> env.rollout(2, policy=lambda td: td.set("action", torch.ones(1)))["next", "reward"].flatten()
        tensor([0.5000, 0.5000])
    """

    def __init__(self, clamp_min: float | None = None, clamp_max: float | None = None, in_keys=None):
        if clamp_min is None and clamp_max is None:
            raise ValueError("RewardClipping: give clamp_min, clamp_max or both")
        if clamp_min is not None and clamp_max is not None and clamp_min > clamp_max:
            raise ValueError(f"RewardClipping: clamp_min={clamp_min} must not exceed clamp_max={clamp_max}")
        super().__init__(in_keys=["reward"] if in_keys is None else in_keys)
        self.clamp_min, self.clamp_max = clamp_min, clamp_max

    def transform_next_specs(self, specs):
        for key in self.in_keys:
            spec = specs[key]
            low = float("-inf") if self.clamp_min is None else self.clamp_min
            high = float("inf") if self.clamp_max is None else self.clamp_max
            if self.clamp_min is not None and self.clamp_max is not None:
                specs[key] = Bounded(low, high, shape=spec.shape, dtype=spec.dtype)
        return specs

    def on_step(self, root, nxt, t):
        for key in self.in_keys:
            np.clip(nxt[key][t], self.clamp_min, self.clamp_max, out=nxt[key][t])
