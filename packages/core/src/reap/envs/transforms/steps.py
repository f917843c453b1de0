"""Per-trajectory bookkeeping: ``StepCounter`` and ``InitTracker``."""

from __future__ import annotations

import numpy as np
import torch

from reap.envs.transforms.transformed_env import Transform
from reap.specs import Unbounded


class StepCounter(Transform):
    """Count steps per trajectory in ``step_count``; truncate at ``max_steps`` when given."""

    def __init__(self, max_steps: int | None = None, *, step_count_key: str = "step_count"):
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"StepCounter: max_steps must be a positive int or None, got {max_steps!r}")
        super().__init__(in_keys=[])
        self.max_steps = max_steps
        self.key = step_count_key

    def _spec(self, specs):
        batch = self.parent.batch_size
        return Unbounded(shape=(*batch, 1), dtype=torch.int64)

    def transform_root_specs(self, specs):
        specs[self.key] = self._spec(specs)
        return specs

    def transform_next_specs(self, specs):
        specs[self.key] = self._spec(specs)
        return specs

    def state_keys(self):
        return (self.key,)

    def on_reset(self, root, t, mask):
        if mask is None or mask.ndim == 0:
            root[self.key][t] = 0
        else:
            root[self.key][t][mask] = 0

    def on_step(self, root, nxt, t):
        count = nxt[self.key][t]
        np.add(root[self.key][t], 1, out=count)
        if self.max_steps is not None:
            hit = count >= self.max_steps
            np.logical_or(nxt["truncated"][t], hit, out=nxt["truncated"][t])
            np.logical_or(nxt["done"][t], hit, out=nxt["done"][t])


class InitTracker(Transform):
    """Write ``is_init``: True at the step where a trajectory starts (after every reset).

    Recurrent policies read it to restart their hidden state. ``("next", "is_init")`` is False.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import InitTracker, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), InitTracker())
        >>> env.rollout(3)["is_init"].flatten().tolist()
        [True, False, False]
    """

    def __init__(self, init_key: str = "is_init"):
        if not isinstance(init_key, str):
            raise TypeError(f"InitTracker: init_key must be a string, got {init_key!r}")
        super().__init__(in_keys=[])
        self.init_key = init_key

    def _add(self, specs):
        specs[self.init_key] = Unbounded(shape=(*self.parent.batch_size, 1), dtype=torch.bool)
        return specs

    transform_root_specs = transform_next_specs = _add

    def state_keys(self):
        return (self.init_key,)

    def on_reset(self, root, t, mask):
        if mask is None or mask.ndim == 0:
            root[self.init_key][t] = True
        else:
            root[self.init_key][t][mask] = True

    def on_step(self, root, nxt, t):
        nxt[self.init_key][t] = False
