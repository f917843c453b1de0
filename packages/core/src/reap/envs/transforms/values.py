"""Value-level transforms on entries in place: ``DoubleToFloat`` and ``ClipTransform``."""

from __future__ import annotations

import numpy as np
import torch

from reap.envs.transforms.transformed_env import Transform
from reap.specs import Bounded, Unbounded


class DoubleToFloat(Transform):
    """Store float64 observations (and reward) as float32."""

    def default_in_keys(self, env):
        specs = {**env.root_specs(), **env.next_specs()}
        return [k for k, v in specs.items() if v.dtype == torch.float64]

    def _convert(self, specs):
        for key in self.in_keys:
            if key in specs and specs[key].dtype == torch.float64:
                spec = specs[key]
                if isinstance(spec, Bounded):
                    specs[key] = Bounded(spec.low.float(), spec.high.float(), shape=spec.shape)
                else:
                    specs[key] = Unbounded(shape=spec.shape, dtype=torch.float32)
        return specs

    # the arrays are allocated from these specs, so the base env's writes cast on the fly
    transform_root_specs = _convert
    transform_next_specs = _convert


class ClipTransform(Transform):
    """Clip ``in_keys`` (observations by default) to ``[low, high]``."""

    def __init__(self, in_keys=None, *, low: float | None = None, high: float | None = None):
        if low is None and high is None:
            raise ValueError("ClipTransform: give low, high or both")
        if low is not None and high is not None and low > high:
            raise ValueError(f"ClipTransform: low={low} must not exceed high={high}")
        super().__init__(in_keys=in_keys)
        self.low, self.high = low, high

    def _clip(self, array):
        np.clip(array, self.low, self.high, out=array)

    def on_reset(self, root, t, mask):
        for key in self.in_keys:
            if key in root:
                self._clip(root[key][t])

    def on_step(self, root, nxt, t):
        for key in self.in_keys:
            if key in nxt:
                self._clip(nxt[key][t])
