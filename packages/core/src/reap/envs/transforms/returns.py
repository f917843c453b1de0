"""Return transforms (TorchRL's): ``TargetReturn`` (an env's return-to-go target) and
``Reward2GoTransform`` (the discounted reward-to-go, for replay buffers).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.transforms import Reward2GoTransform
    >>> data = TensorDict({("next", "reward"): torch.ones(1, 4, 1),
    ...                    ("next", "done"): torch.tensor([[[False], [True], [False], [True]]])}, [1, 4])
    >>> Reward2GoTransform(gamma=0.5).inv(data)["next", "reward"].flatten()
    tensor([1.5000, 1.0000, 1.5000, 1.0000])
"""

from __future__ import annotations

import math
from copy import copy

import numpy as np
import torch

from reap.envs.base import EnvBase
from reap.envs.transforms.transform import (
    FORWARD_NOT_IMPLEMENTED,
    Transform,
    expand_right,
    reset_flags,
)
from reap.specs import Unbounded


def _last(key, name: str):
    return name if isinstance(key, str) else (*key[:-1], name)


class TargetReturn(Transform):
    """A target return per trajectory: ``target_return`` at each reset, then (``mode="reduce"``)
    reduced by each reward, or (``"constant"``) kept (TorchRL's ``TargetReturn``).

    Args:
        target_return: the value at reset.
        mode: ``"reduce"`` or ``"constant"``.
        in_keys: the rewards (default: the env's); ``out_keys`` default ``"target_return"``.
        reset_key: reap's envs have one, ``"_reset"``.

    Examples:
        >>> import torch
        >>> from reap.envs.transforms import TargetReturn, TransformedEnv
        >>> from reap_testing import CountingEnv
        >>> env = TransformedEnv(CountingEnv(), TargetReturn(10.0))
        >>> env.rollout(2, policy=lambda td: td.set("action", torch.ones(1)))["next", "target_return"].flatten()
        tensor([9., 8.])
    """

    _array_hooks = True
    MODES = ["reduce", "constant"]
    MODE_ERR = "Mode can only be 'reduce' or 'constant'."

    def __init__(self, target_return: float, mode: str = "reduce", in_keys=None, out_keys=None, reset_key=None):
        if mode not in self.MODES:
            raise ValueError(self.MODE_ERR)
        if reset_key not in (None, "_reset"):
            raise ValueError(f"TargetReturn: reap envs have one reset key, '_reset'; got reset_key={reset_key!r}")
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.target_return, self.mode, self.reset_key = target_return, mode, "_reset"

    @property
    def in_keys(self) -> list:
        keys = self.__dict__.get("_in_keys")
        if keys is None and self.parent is not None:
            keys = self.__dict__["_in_keys"] = list(self.parent.reward_keys)
        return keys or []

    @in_keys.setter
    def in_keys(self, value) -> None:
        Transform.in_keys.fset(self, value)

    @property
    def out_keys(self) -> list:
        keys = self.__dict__.get("_out_keys")
        if keys is None:
            keys = [_last(k, "target_return") for k in self.in_keys]
            if len(set(keys)) < len(keys):
                raise ValueError("Could not infer the target_return because multiple rewards are located at the "
                                 "same level.")
        return keys

    @out_keys.setter
    def out_keys(self, value) -> None:
        Transform.out_keys.fset(self, value)

    def _reset(self, tensordict, tensordict_reset):
        reset = reset_flags(tensordict)
        for out_key in self.out_keys:
            target = tensordict.get(out_key, None)
            if target is None:
                target = torch.full((*tensordict.batch_size, 1), self.target_return, dtype=torch.float32,
                                    device=tensordict.device)
            else:
                target = torch.where(expand_right(~reset, target), target, self.target_return)
            tensordict_reset.set(out_key, target)
        return tensordict_reset

    def _apply_transform(self, reward, target_return):
        if target_return.shape != reward.shape:
            raise ValueError(f"The shape of the reward ({reward.shape}) and target return ({target_return.shape}) must "
                             "match.")
        return target_return - reward if self.mode == "reduce" else target_return

    def _call(self, next_tensordict):
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            reward = next_tensordict.get(in_key, None)
            if reward is not None:
                next_tensordict.set(out_key, self._apply_transform(reward, next_tensordict.get(out_key, None)))
            elif not self.missing_tolerance:
                raise KeyError(f"'{in_key}' not found in tensordict {next_tensordict}")
        return next_tensordict

    def _step(self, tensordict, next_tensordict):
        for out_key in self.out_keys:
            next_tensordict.set(out_key, tensordict.get(out_key))
        return self._call(next_tensordict)

    def forward(self, tensordict):
        raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))

    def transform_observation_spec(self, observation_spec):
        parent = self.parent
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            for spec in (parent.full_observation_spec, parent.full_reward_spec, parent.full_done_spec):
                if in_key in spec.keys(True):
                    target = spec[in_key]
                    break
            else:
                raise RuntimeError(f"in_key {in_key} not found in output_spec.")
            observation_spec[out_key] = Unbounded(shape=target.shape, dtype=target.dtype, device=target.device)
        return observation_spec

    def transform_input_spec(self, input_spec):
        input_spec["full_state_spec"] = self.transform_observation_spec(input_spec["full_state_spec"])
        return input_spec

    def _attach(self, env):
        self._check_in_keys(env)

    def on_reset(self, root, t, mask):
        for _, key in self._pairs:
            if mask is None or mask.ndim == 0:
                root[key][t] = self.target_return
            else:
                root[key][t][mask] = self.target_return

    def on_step(self, root, nxt, t):
        for src, dst in self._pairs:
            if self.mode == "reduce":
                np.subtract(root[dst][t], nxt[src][t], out=nxt[dst][t])
            else:
                np.copyto(nxt[dst][t], root[dst][t])


def reward2go(reward: torch.Tensor, done: torch.Tensor, gamma, *, time_dim: int = -2) -> torch.Tensor:
    """The discounted sum of the rewards to the end of each trajectory (TorchRL's ``reward2go``):
    ``reward`` and ``done`` of shape ``[*B, T, 1]`` (or ``[T]``), trajectories cut after each done
    step. Time is at dim -2 whatever ``time_dim`` says, as in TorchRL. ``done`` is not modified.

    Examples:
        >>> done = torch.tensor([False, True, False, False])
        >>> reward2go(torch.ones(4), done, 0.5)
        tensor([1.5000, 1.0000, 1.5000, 1.0000])
    """
    if reward.shape != done.shape:
        raise ValueError(f"reward and done must share the same shape, got {reward.shape} and {done.shape}")
    shape = reward.shape
    if reward.ndim == 1:  # one trajectory of scalars
        return reward2go(reward.unsqueeze(-1), done.unsqueeze(-1), gamma).squeeze(-1)
    if reward.ndim > 2:  # time at -3, the trailing dims folded into one batch of rows
        flipped = reward.transpose(-2, -3)
        inner = flipped.shape[-2:]
        out = reward2go(flipped.flatten(-2, -1), done.transpose(-2, -3).flatten(-2, -1), gamma)
        return out.unflatten(-1, inner).transpose(-2, -3)
    reward, done = reward.transpose(-2, -1), done.transpose(-2, -1).clone()
    done[..., -1] = True
    ends = torch.where(done.reshape(-1))[0] + 1
    lengths = torch.cat([ends[:1], ends[1:] - ends[:-1]])
    longest = int(lengths.max())
    mask = torch.arange(longest).unsqueeze(0) < lengths.unsqueeze(1)
    padded = torch.zeros(len(lengths), longest, dtype=reward.dtype).masked_scatter(mask, reward.reshape(-1))
    gamma = float(gamma)
    span = longest if gamma >= 1.0 else min(longest, int(math.log(1e-7) / math.log(gamma))) if gamma else 1
    series = torch.full((span,), gamma, dtype=reward.dtype)
    series[0] = 1.0
    series = series.cumprod(0) if gamma else torch.zeros(span, dtype=reward.dtype)
    out = torch.conv1d(torch.nn.functional.pad(padded.unsqueeze(1), [0, span - 1]), series.view(1, 1, -1)).squeeze(1)
    out = out if len(lengths) == 1 else out[mask]
    return out.reshape(reward.shape).transpose(-2, -1).reshape(shape)


class Reward2GoTransform(Transform):
    """On ``inv`` (a replay buffer's extend), the discounted reward-to-go of ``in_keys`` into
    ``out_keys``, trajectories cut at ``("next", done_key)`` (TorchRL's ``Reward2GoTransform``).
    It is for replay buffers only: an env refuses it.
    """

    ENV_ERR = ("The Reward2GoTransform is only an inverse transform and can only be applied to the replay buffer.")

    def __init__(self, gamma=1.0, in_keys=None, out_keys=None, done_key="done"):
        in_keys = [("next", "reward")] if in_keys is None else in_keys
        out_keys = copy(in_keys) if out_keys is None else out_keys
        super().__init__(in_keys=in_keys, in_keys_inv=in_keys, out_keys_inv=out_keys)
        self.done_key = done_key
        self.register_buffer("gamma", gamma if isinstance(gamma, torch.Tensor) else torch.tensor(gamma))

    def _inv_apply_transform(self, reward, done):
        return reward2go(reward, done, self.gamma)

    def _inv_call(self, tensordict):
        if self.parent is not None:
            raise ValueError(self.ENV_ERR)
        done = tensordict.get(("next", self.done_key))
        if not done.any(-2).all():
            raise RuntimeError("No episode ends found to calculate the reward to go. Make sure that the number of "
                               "frames_per_batch is larger than number of steps per episode.")
        found = False
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            if in_key in tensordict.keys(True):
                found = True
                tensordict.set(out_key, self._inv_apply_transform(tensordict.get(in_key), done))
        if not found:
            raise KeyError(f"Could not find any of the input keys {self.in_keys}.")
        return tensordict

    def forward(self, tensordict):
        return tensordict

    def _call(self, next_tensordict):
        raise ValueError(self.ENV_ERR)

    def set_container(self, container):
        if isinstance(container, EnvBase) or container.parent is not None:
            raise ValueError(self.ENV_ERR)
        super().set_container(container)
