"""Observation normalisation: ``ObservationNorm`` (fixed statistics) and ``VecNorm`` (running)."""

from __future__ import annotations

import numpy as np
import torch

from reap.envs.transforms.transformed_env import Compose, Transform


class ObservationNorm(Transform):
    """``(obs - loc) / scale`` (or ``obs * scale + loc`` with ``standard_normal=False``).

    ``init_stats(num_iter)`` estimates loc and scale from a random rollout of the parent.
    """

    def __init__(self, loc=None, scale=None, in_keys=None, *, standard_normal: bool = True,
                 eps: float = 1e-6):
        super().__init__(in_keys=in_keys)
        self.loc = None if loc is None else torch.as_tensor(loc, dtype=torch.float32)
        self.scale = None if scale is None else torch.as_tensor(scale, dtype=torch.float32)
        self.standard_normal = standard_normal
        self.eps = eps

    @property
    def initialized(self) -> bool:
        return self.loc is not None and self.scale is not None

    def init_stats(self, num_iter: int, reduce_dim=0, cat_dim=0, key=None) -> None:
        """Estimate ``loc`` and ``scale`` from ``num_iter`` random steps of the parent env."""
        if self.parent is None:
            raise RuntimeError("ObservationNorm.init_stats: add the transform to a TransformedEnv first")
        key = key or self.in_keys[0]
        base = self.parent.base_env
        data = base.rollout(num_iter, break_when_any_done=False)["next", key]
        data = data.reshape(-1, *data.shape[len(base.batch_size) + 1:]).float()
        self.loc = data.mean(0)
        self.scale = data.std(0).clamp_min(self.eps)

    def state_dict(self) -> dict:
        return {} if not self.initialized else {"loc": self.loc.clone(), "scale": self.scale.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.loc, self.scale = state["loc"].clone(), state["scale"].clone()

    def _apply(self, array):
        if not self.initialized:
            raise RuntimeError(
                "ObservationNorm: loc and scale are not set; pass them or call init_stats() first"
            )
        loc, scale = self.loc.numpy(), self.scale.numpy()
        if self.standard_normal:
            np.subtract(array, loc, out=array)
            np.divide(array, scale, out=array)
        else:
            np.multiply(array, scale, out=array)
            np.add(array, loc, out=array)

    def on_reset(self, root, t, mask):
        for key in self.in_keys:
            if mask is None or mask.ndim == 0:
                self._apply(root[key][t])
            else:
                rows = root[key][t][mask]
                self._apply(rows)
                root[key][t][mask] = rows

    def on_step(self, root, nxt, t):
        for key in self.in_keys:
            self._apply(nxt[key][t])


class VecNorm(Transform):
    """Normalise observations with running, exponentially decayed statistics.

    The statistics live in torch tensors; ``share_memory()`` moves them to shared memory so that
    every worker of a multi-process collector updates and reads the same ones.
    """

    def __init__(self, in_keys=None, *, decay: float = 0.9999, eps: float = 1e-4,
                 shared_data: dict | None = None):
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"VecNorm: decay must be in (0, 1], got {decay}")
        super().__init__(in_keys=in_keys)
        self.decay, self.eps = decay, eps
        self._stats: dict[str, dict[str, torch.Tensor]] = shared_data or {}
        self._shared = False
        self._np: dict[str, dict[str, np.ndarray]] = {}

    def set_container(self, env):
        super().set_container(env)
        batch = len(env.batch_size)
        for key in self.in_keys:
            if key not in self._stats:
                shape = env.root_specs()[key].shape[batch:]
                self._stats[key] = {
                    "sum": torch.zeros(shape, dtype=torch.float64),
                    "ssq": torch.zeros(shape, dtype=torch.float64),
                    "count": torch.zeros((), dtype=torch.float64),
                }
        if self._shared:
            self.share_memory()
        self._bind_arrays()

    def _bind_arrays(self) -> None:
        self._np = {k: {n: v.numpy() for n, v in d.items()} for k, d in self._stats.items()}

    def share_memory(self) -> VecNorm:
        """Move the statistics to shared memory (now, and for keys created later)."""
        self._shared = True
        for stats in self._stats.values():
            for tensor in stats.values():
                tensor.share_memory_()
        self._bind_arrays()  # share_memory_ moves the storage: re-point the numpy views
        return self

    def get_extra_state(self) -> dict:
        """The statistics, to share with another VecNorm (``shared_data=``)."""
        return self._stats

    def state_dict(self) -> dict:
        return {f"{k}.{n}": v.clone() for k, d in self._stats.items() for n, v in d.items()}

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            key, _, stat = name.rpartition(".")
            self._stats[key][stat].copy_(value)

    def _update_and_normalize(self, key, array):
        stats = self._np[key]
        flat = array.reshape(-1, *stats["sum"].shape)
        stats["sum"] *= self.decay
        stats["ssq"] *= self.decay
        stats["count"] *= self.decay
        stats["sum"] += flat.sum(0)
        stats["ssq"] += np.square(flat, dtype=np.float64).sum(0)
        stats["count"] += flat.shape[0]
        mean = stats["sum"] / stats["count"]
        var = np.maximum(stats["ssq"] / stats["count"] - mean * mean, 0.0)
        std = np.maximum(np.sqrt(var), self.eps)
        array[...] = (array - mean) / std

    def on_reset(self, root, t, mask):
        for key in self.in_keys:
            if mask is None or mask.ndim == 0:
                self._update_and_normalize(key, root[key][t])
            else:
                rows = root[key][t][mask]
                self._update_and_normalize(key, rows)
                root[key][t][mask] = rows

    def on_step(self, root, nxt, t):
        for key in self.in_keys:
            self._update_and_normalize(key, nxt[key][t])

    def to_observation_norm(self) -> ObservationNorm:
        """A frozen ``ObservationNorm`` with the current statistics (for evaluation)."""
        norms = []
        for key in self.in_keys:
            stats = self._stats[key]
            mean = stats["sum"] / stats["count"]
            std = (stats["ssq"] / stats["count"] - mean**2).clamp_min(0).sqrt().clamp_min(self.eps)
            norms.append(ObservationNorm(mean.float(), std.float(), in_keys=[key]))
        return norms[0] if len(norms) == 1 else Compose(*norms)
