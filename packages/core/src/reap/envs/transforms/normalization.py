"""Observation normalisation: ``ObservationNorm`` (fixed statistics) and ``VecNorm`` (running)."""

from __future__ import annotations

import contextlib
import warnings
from multiprocessing.context import get_spawning_popen
from multiprocessing.reduction import ForkingPickler

import numpy as np
import torch
import torch.multiprocessing  # noqa: F401  (registers torch's reductions with ForkingPickler)
from tensordict import TensorDict

from reap.envs.transforms.transformed_env import Compose, Transform
from reap.specs import Bounded, Unbounded

_NO_LOCK = contextlib.nullcontext()  # VecNorm without lock=: nothing to hold

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
            if key not in root:
                continue  # reward: on steps only
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
    """Normalise entries with running, exponentially decayed statistics, as TorchRL's ``VecNorm``.

    Each call first folds the new values into the statistics of each in_key (``sum``, sum of
    squares ``ssq`` and ``count``, each multiplied by ``decay`` before the new values are added;
    ``count`` grows by the number of envs the values come from), then writes
    ``(value - mean) / sqrt(max(var, eps))`` in place, with ``mean = sum / count`` and
    ``var = ssq / count - mean ** 2``. So the first value of a key normalises to 0. Resets update
    the statistics too (only the envs that are reset); ``reward`` is normalised on steps.
    Statistics have the entry's dtype (``count`` is float32), under TorchRL's names
    ``"<key>_sum"``, ``"<key>_ssq"`` and ``"<key>_count"`` (``get_extra_state()``).

    Args:
        in_keys: the entries to normalise; default ``["observation", "reward"]`` (those the env
            has).
        out_keys: must be ``in_keys`` (or None): reap normalises in place.
        shared_td: statistics to use instead of new ones, a dict or TensorDict with the keys
            above in shared memory, e.g. ``other.get_extra_state()`` after ``other.share_memory()``.
        lock: a multiprocessing lock held while the statistics are updated (TorchRL creates one
            per transform; reap updates without a lock unless given one).
        decay: how much of the statistics each update keeps, in (0, 1].
        eps: lower bound of the variance (and of the standard deviation).
        new_api: TorchRL's switch to its ``VecNormV2``, which reap does not have: only None or
            False (what TorchRL 0.14's ``VecNorm`` gives without it, with a FutureWarning).

    ``share_memory()`` moves the statistics to shared memory so that every process that holds
    this transform (a worker of a multi-process collector) updates and reads the same ones.
    ``freeze()`` stops the updates; ``to_observation_norm()`` gives a fixed ``ObservationNorm``.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import TransformedEnv, VecNorm
        >>> vecnorm = VecNorm(in_keys=["observation"], decay=0.99)
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), vecnorm)
        >>> td = env.rollout(3)
        >>> td["observation"][0].tolist()  # the first value has nothing to be compared with
        [0.0, 0.0, 0.0]
        >>> sorted(vecnorm.get_extra_state())
        ['observation_count', 'observation_ssq', 'observation_sum']
        >>> round(vecnorm.get_extra_state()["observation_count"].item(), 4)  # 4 updates, decayed
        3.9404
    """

    STATS = ("_sum", "_ssq", "_count")

    def __init__(self, in_keys=None, out_keys=None, *, shared_td=None, lock=None,
                 decay: float = 0.9999, eps: float = 1e-4, new_api: bool | None = None):
        if new_api:
            raise ValueError(
                "VecNorm: new_api=True asks for TorchRL's VecNormV2, which reap does not have; "
                "leave new_api unset (TorchRL's VecNorm statistics)"
            )
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"VecNorm: decay must be in (0, 1], got {decay}")
        if not eps > 0.0:
            raise ValueError(f"VecNorm: eps must be > 0 (the smallest variance), got {eps}")
        if out_keys is not None and (in_keys is None or list(out_keys) != list(in_keys)):
            raise ValueError(
                f"VecNorm: out_keys={list(out_keys)} must be the in_keys (reap normalises in place); "
                "to keep the raw entry too, copy it first with "
                "RenameTransform(in_keys, out_keys, create_copy=True) and normalise the copy"
            )
        super().__init__(in_keys=in_keys)
        self.decay, self.eps, self.lock = decay, eps, lock
        self.frozen = False
        self._shared = False
        self._td: dict[str, torch.Tensor] = {}
        self._given_stats = shared_td is not None
        if shared_td is not None:
            self._td = {k: shared_td[k] for k in shared_td.keys()}
            if not all(t.is_shared() or _is_memmap(t) for t in self._td.values()):
                raise RuntimeError(
                    "VecNorm: shared_td must be in shared memory; call share_memory() on the VecNorm "
                    "it comes from (or share_memory_() on the tensors) before get_extra_state()"
                )
        self._np: dict[str, np.ndarray] = {}

    def default_in_keys(self, env) -> list[str]:
        return [k for k in ("observation", "reward") if k in env.root_specs() or k in env.next_specs()]

    @property
    def out_keys(self) -> list[str]:
        return self.in_keys

    def set_container(self, env):
        super().set_container(env)
        batch = len(env.batch_size)
        self._numel = max(1, int(np.prod(env.batch_size)))
        root, nxt = env.root_specs(), env.next_specs()
        for key in self.in_keys:
            spec = root[key] if key in root else nxt[key]
            if not spec.dtype.is_floating_point:
                raise TypeError(
                    f"VecNorm: in_key {key!r} has dtype {spec.dtype}; it is normalised in place, so it "
                    "must be floating point: cast it first (e.g. DoubleToFloat(in_keys=...)) or leave it out"
                )
            names = [key + suffix for suffix in self.STATS]
            present = [n in self._td for n in names]
            if (self._given_stats or any(present)) and not all(present):
                raise KeyError(
                    f"VecNorm: shared_td has no statistics for in_key {key!r} (needs {names}, has "
                    f"{sorted(self._td)}); give this VecNorm the in_keys of the one they come from"
                )
            if not any(present):
                shape = spec.shape[batch:]
                self._td[names[0]] = torch.zeros(shape, dtype=spec.dtype)
                self._td[names[1]] = torch.zeros(shape, dtype=spec.dtype)
                self._td[names[2]] = torch.zeros(1, dtype=torch.float32)
        if self._shared:
            self.share_memory()
        self._bind_arrays()

    def transform_root_specs(self, specs):
        return self._unbound(specs)

    def transform_next_specs(self, specs):
        return self._unbound(specs)

    def _unbound(self, specs):
        # normalised values leave the env's bounds; the reward spec stays as it is, as in TorchRL
        keys = [k for k in (self.in_keys or ()) if k != "reward"]
        return {k: Unbounded(s.shape, s.dtype, s.device) if k in keys and isinstance(s, Bounded) else s
                for k, s in specs.items()}

    def _bind_arrays(self) -> None:
        self._np = {k: v.numpy() for k, v in self._td.items()}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_np"] = {}  # views of the tensors: rebound after unpickling
        if self._shared and get_spawning_popen() is not None:
            # a child process is being started with this VecNorm (e.g. in reap_mp's worker
            # arguments, which go through plain pickle or cloudpickle and would copy the
            # tensors): hand it the shared memory itself, as torch.multiprocessing does
            state["_td"] = _SharedStats(bytes(ForkingPickler.dumps(self._td)))
        return state

    def __setstate__(self, state):
        if isinstance(state["_td"], _SharedStats):
            state["_td"] = ForkingPickler.loads(state["_td"].data)
        self.__dict__.update(state)
        self._bind_arrays()

    def share_memory(self) -> VecNorm:
        """Move the statistics to shared memory (now, and for keys created later)."""
        self._shared = True
        for tensor in self._td.values():
            tensor.share_memory_()
        self._bind_arrays()  # share_memory_ moves the storage: re-point the numpy views
        return self

    def freeze(self) -> VecNorm:
        """Stop updating the statistics (values are still normalised with them)."""
        self.frozen = True
        return self

    def unfreeze(self) -> VecNorm:
        """Update the statistics again."""
        self.frozen = False
        return self

    def frozen_copy(self) -> VecNorm:
        """A frozen VecNorm for another env (evaluation) that reads this one's statistics.

        As TorchRL's, the copy holds the same statistics tensors: it never updates them, and it
        normalises with them as this VecNorm goes on updating them.
        """
        if not self._td:
            raise RuntimeError("VecNorm.frozen_copy: add the VecNorm to a TransformedEnv first")
        copy = VecNorm(list(self.in_keys), lock=self.lock, decay=self.decay, eps=self.eps)
        copy._td, copy._shared = dict(self._td), self._shared
        copy._bind_arrays()
        return copy.freeze()

    def get_extra_state(self) -> dict | None:
        """The statistics, under TorchRL's names (pass them to another VecNorm's ``shared_td=``)."""
        if not self._td:
            warnings.warn("VecNorm.get_extra_state: no statistics yet (the VecNorm is in no env); "
                          "returning None", stacklevel=2)
            return None
        return dict(self._td)

    def set_extra_state(self, state: dict | None) -> None:
        """Load statistics from ``get_extra_state()`` (copied into the current ones, which stay shared)."""
        if state is None:
            if self._td:
                raise KeyError("VecNorm.set_extra_state: got no statistics for an initialised VecNorm")
            return
        for name, value in state.items():
            if name in self._td:
                self._td[name].copy_(value)
            else:
                self._td[name] = value.clone()
        self._bind_arrays()

    def state_dict(self) -> dict:
        return {"_extra_state": {k: v.clone() for k, v in self._td.items()}} if self._td else {}

    def load_state_dict(self, state: dict) -> None:
        if set(state) != {"_extra_state"}:
            raise KeyError(f"VecNorm.load_state_dict: expected the key '_extra_state', got {sorted(state)}")
        self.set_extra_state(state["_extra_state"])

    def _update_and_normalize(self, key, array, n):
        stats = self._np
        total, ssq, count = stats[key + "_sum"], stats[key + "_ssq"], stats[key + "_count"]
        if not self.frozen:
            if array.ndim > total.ndim:  # several envs: torch's sum, to add in TorchRL's order
                rows = torch.from_numpy(array).reshape(-1, *total.shape)
                value_sum, value_ssq = rows.sum(0).numpy(), rows.pow(2).sum(0).numpy()
            else:
                value_sum, value_ssq = array, np.square(array)
            decay = total.dtype.type(self.decay)
            total *= decay
            total += value_sum
            ssq *= decay
            ssq += value_ssq
            count *= np.float32(self.decay)
            count += np.float32(n)
        mean = total / count
        eps = total.dtype.type(self.eps)
        var = ssq / count
        var -= np.square(mean)
        np.maximum(var, eps, out=var)
        std = torch.from_numpy(var).sqrt_().numpy()  # torch's sqrt rounds unlike numpy's: TorchRL's values
        np.maximum(std, eps, out=std)
        np.subtract(array, mean, out=array)
        np.divide(array, std, out=array)

    def _normalize(self, arrays, t, mask):
        with self.lock if self.lock is not None else _NO_LOCK:
            for key in self.in_keys:
                if key not in arrays:
                    continue  # reward: not on the root
                if mask is None or mask.ndim == 0:
                    self._update_and_normalize(key, arrays[key][t], self._numel)
                else:
                    rows = arrays[key][t][mask]
                    self._update_and_normalize(key, rows, int(mask.sum()))
                    arrays[key][t][mask] = rows

    def on_reset(self, root, t, mask):
        self._normalize(root, t, mask)

    def on_step(self, root, nxt, t):
        self._normalize(nxt, t, None)

    def _loc_scale(self) -> tuple[dict, dict]:
        if not self._td:
            raise RuntimeError("VecNorm: no statistics yet; add the VecNorm to a TransformedEnv first")
        loc, scale = {}, {}
        for key in self.in_keys:
            total, ssq, count = (self._td[key + s] for s in self.STATS)
            loc[key] = total / count
            scale[key] = (ssq / count - loc[key].pow(2)).clamp_min(self.eps).sqrt()
        return loc, scale

    @property
    def loc(self) -> TensorDict:
        """The current means, one entry per in_key (``ObservationNorm``'s ``loc``)."""
        return TensorDict(self._loc_scale()[0])

    @property
    def scale(self) -> TensorDict:
        """The current standard deviations, one entry per in_key (``ObservationNorm``'s ``scale``)."""
        return TensorDict(self._loc_scale()[1])

    @property
    def standard_normal(self) -> bool:
        """Always True: values become ``(value - loc) / scale``, as ``ObservationNorm``'s default."""
        return True

    def denorm(self, tensordict):
        """A shallow copy of ``tensordict`` with the in_keys mapped back: ``value * scale + loc``."""
        loc, scale = self._loc_scale()
        tensordict = tensordict.copy()
        for key in self.in_keys:
            if key in tensordict.keys():
                tensordict.set(key, tensordict.get(key) * scale[key] + loc[key])
        return tensordict

    def to_observation_norm(self) -> ObservationNorm | Compose:
        """A fixed ``ObservationNorm`` with the current statistics (for evaluation)."""
        loc, scale = self._loc_scale()
        norms = [ObservationNorm(loc[key], scale[key], in_keys=[key]) for key in self.in_keys]
        return norms[0] if len(norms) == 1 else Compose(*norms)

    def __repr__(self) -> str:
        return (f"VecNorm(decay={self.decay:4.4f},eps={self.eps:4.4f}, in_keys={self.in_keys}, "
                f"out_keys={self.out_keys})")


class _SharedStats:
    """Statistics pickled with torch.multiprocessing's reductions (handles to shared memory)."""

    def __init__(self, data: bytes):
        self.data = data


def _is_memmap(tensor: torch.Tensor) -> bool:
    return tensor.untyped_storage().filename is not None
