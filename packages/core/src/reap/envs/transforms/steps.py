"""Per-trajectory bookkeeping: ``StepCounter`` and ``InitTracker`` (TorchRL's).

Both need an env (their ``forward`` raises, as TorchRL's): they count or flag steps since the
last reset, on the root at reset and in ``"next"`` at each step.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(max_steps=2))
    >>> td = env.rollout(5)
    >>> td["next", "step_count"].flatten().tolist(), td["next", "truncated"].flatten().tolist()
    ([1, 2], [False, True])
"""

from __future__ import annotations

import numpy as np
import torch

from reap.envs.transforms.transform import FORWARD_NOT_IMPLEMENTED, Transform
from reap.specs import Bounded, Categorical


def reset_mask(tensordict, like, key: str = "_reset"):
    """The reset flags of a reset's input, broadcast to ``like``'s shape (all True when absent)."""
    reset = tensordict.get(key, None)
    if reset is None:
        return torch.ones(like.shape, dtype=torch.bool, device=like.device)
    while reset.ndim < like.ndim:
        reset = reset.unsqueeze(-1)
    return reset.expand(like.shape)


def done_shape(env) -> torch.Size:
    return env.output_spec["full_done_spec"]["done"].shape


class StepCounter(Transform):
    """Count the steps since the last reset in ``step_count``; with ``max_steps``, mark the step
    that reaches it truncated (and done, with ``update_done``), as TorchRL's ``StepCounter``.

    Args:
        max_steps: the step count at which a trajectory is truncated (None: never).
        truncated_key: the flag written when ``max_steps`` is reached.
        step_count_key: where the count goes.
        update_done: also set ``"done"`` when truncating.
    """

    _array_hooks = True

    def __init__(self, max_steps: int | None = None, truncated_key: str | None = "truncated",
                 step_count_key: str | None = "step_count", update_done: bool = True):
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps should have a value greater or equal to one (an int or None), got {max_steps!r}")
        if not isinstance(truncated_key, str):
            raise ValueError("truncated_key must be a string.")
        if not isinstance(step_count_key, str):
            raise ValueError("step_count_key must be a string.")
        super().__init__()
        self.max_steps = max_steps
        self.truncated_key = truncated_key
        self.step_count_key = step_count_key
        self.update_done = update_done

    # ---- TorchRL's hooks -----------------------------------------------------------------------
    def _reset(self, tensordict, tensordict_reset):
        done = tensordict_reset.get("done", None)
        if done is None:
            done = torch.zeros(done_shape(self.parent), dtype=torch.bool)
        reset = reset_mask(tensordict, done)
        count = tensordict.get(self.step_count_key, None)
        if count is None:
            count = torch.zeros(done.shape, dtype=torch.int64, device=done.device)
        count = torch.where(~reset, count.expand_as(reset), 0)
        tensordict_reset.set(self.step_count_key, count)
        if self.max_steps is not None:
            truncated = (count >= self.max_steps) | tensordict_reset.get(self.truncated_key, False)
            if self.update_done:
                tensordict_reset.set("done", truncated)
            tensordict_reset.set(self.truncated_key, truncated)
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        count = tensordict.get(self.step_count_key) + 1
        next_tensordict.set(self.step_count_key, count)
        if self.max_steps is not None:
            truncated = (count >= self.max_steps) | next_tensordict.get(self.truncated_key, False)
            if self.update_done:
                next_tensordict.set("done", truncated | next_tensordict.get("done"))
            next_tensordict.set(self.truncated_key, truncated)
        return next_tensordict

    def forward(self, tensordict):
        raise NotImplementedError(
            "StepCounter cannot be called independently, only its step and reset methods are functional "
            "(it counts the steps of sequential data from an env, not of a replay buffer's samples)."
        )

    def _count_spec(self, spec_like):
        return Bounded(low=0, high=torch.iinfo(torch.int64).max, shape=spec_like.shape, dtype=torch.int64,
                       device=spec_like.device)

    def transform_observation_spec(self, observation_spec):
        observation_spec[self.step_count_key] = self._count_spec(self.parent.output_spec["full_done_spec"]["done"])
        return observation_spec

    def transform_output_spec(self, output_spec):
        if self.max_steps:
            done_spec = output_spec["full_done_spec"]
            shape = done_spec["done"].shape
            keys = [self.truncated_key, "done"] if self.update_done else [self.truncated_key]
            for key in keys:
                done_spec[key] = Categorical(2, dtype=torch.bool, device=output_spec.device, shape=shape)
        return super().transform_output_spec(output_spec)

    def transform_input_spec(self, input_spec):
        input_spec["full_state_spec"][self.step_count_key] = self._count_spec(
            self.parent.output_spec["full_done_spec"]["done"])
        return input_spec

    # ---- arrays --------------------------------------------------------------------------------
    def on_reset(self, root, t, mask):
        if mask is None or mask.ndim == 0:
            root[self.step_count_key][t] = 0
        else:
            root[self.step_count_key][t][mask] = 0

    def on_step(self, root, nxt, t):
        count = nxt[self.step_count_key][t]
        np.add(root[self.step_count_key][t], 1, out=count)
        if self.max_steps is not None:
            hit = count >= self.max_steps
            truncated = nxt[self.truncated_key][t]
            np.logical_or(truncated, hit, out=truncated)
            if self.update_done:
                np.logical_or(nxt["done"][t], truncated, out=nxt["done"][t])

    def __repr__(self) -> str:
        return f"StepCounter(max_steps={self.max_steps}, step_count_key={self.step_count_key!r})"


class InitTracker(Transform):
    """Write ``init_key``: True at the step where a trajectory starts (after every reset).

    Recurrent policies read it to restart their hidden state. ``("next", init_key)`` is False.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import InitTracker, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), InitTracker())
        >>> env.rollout(3)["is_init"].flatten().tolist()
        [True, False, False]
    """

    _array_hooks = True

    def __init__(self, init_key: str = "is_init"):
        if not isinstance(init_key, str):
            raise ValueError("init_key can only be of type str as it will be the leaf key associated to each reset flag.")
        super().__init__()
        self.init_key = init_key

    @property
    def out_keys(self) -> list:
        if self.parent is None:
            raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))
        return [self.init_key]

    @out_keys.setter
    def out_keys(self, value) -> None:
        if value not in (None, []):
            raise ValueError("Cannot set non-empty out-keys when out-keys are defined by the init_key value.")

    def _call(self, next_tensordict):
        if self.init_key not in next_tensordict.keys():
            shape = done_shape(self.parent)
            next_tensordict.set(self.init_key, torch.zeros(shape, dtype=torch.bool, device=next_tensordict.device))
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        reset = tensordict.get("_reset", None)
        if reset is None:
            init = torch.ones(done_shape(self.parent), dtype=torch.bool, device=tensordict.device)
        else:
            init = reset.clone()
            if init.ndim == tensordict_reset.ndim:
                init = init.unsqueeze(-1)
        tensordict_reset.set(self.init_key, init)
        return tensordict_reset

    def forward(self, tensordict):
        raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))

    def transform_observation_spec(self, observation_spec):
        shape = self.parent.output_spec["full_done_spec"]["done"].shape
        observation_spec[self.init_key] = Categorical(2, dtype=torch.bool, device=self.parent.device, shape=shape)
        return observation_spec

    def on_reset(self, root, t, mask):
        if mask is None or mask.ndim == 0:
            root[self.init_key][t] = True
        else:
            root[self.init_key][t][mask] = True

    def on_step(self, root, nxt, t):
        nxt[self.init_key][t] = False

    def __repr__(self) -> str:
        return f"InitTracker(init_key={self.init_key!r})"
