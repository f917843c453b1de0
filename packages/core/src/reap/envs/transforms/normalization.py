"""Observation normalisation (TorchRL's): ``ObservationNorm`` (fixed statistics) and ``VecNorm``
(running ones; ``VecNorm(new_api=True)`` is ``VecNormV2``).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.transforms import ObservationNorm
    >>> norm = ObservationNorm(loc=1.0, scale=2.0, in_keys=["obs"], standard_normal=True)
    >>> norm(TensorDict(obs=torch.tensor([3.0])))["obs"]
    tensor([1.])
"""

from __future__ import annotations

import contextlib
from copy import copy
from multiprocessing.context import get_spawning_popen
from multiprocessing.reduction import ForkingPickler

import numpy as np
import torch
import torch.multiprocessing  # noqa: F401  (registers torch's reductions with ForkingPickler)
from tensordict import TensorDict
from torch import nn

from reap.envs.transforms.compose import Compose
from reap.envs.transforms.transform import (
    Transform,
    apply_to_composite,
    apply_to_composite_inv,
    missing_tolerance,
)
from reap.envs.transforms.vecnorm import VecNormV2, warn_uninitialised_state, warn_unshared_load
from reap.specs import Bounded, ContinuousBox, Unbounded

_NO_LOCK = contextlib.nullcontext()  # VecNorm without lock=: nothing to hold
_ERR_INIT = "Cannot have an mixed initialized and uninitialized loc and scale"
_NOT_INITIALIZED = ("Loc/Scale have not been initialized. Either pass in values in the constructor or call the "
                    "init_stats method")


class ObservationNorm(Transform):
    """``obs * scale + loc``, or ``(obs - loc) / scale`` with ``standard_normal=True`` (TorchRL's).

    Without ``loc`` and ``scale``, ``init_stats(num_iter)`` estimates them from rollouts of the
    env before the transform (its ``parent``).

    Args:
        loc, scale: numbers or tensors (``scale`` is clamped to at least ``eps``).
        in_keys: the entries to normalise (required, as TorchRL's); ``out_keys`` default to them.
        in_keys_inv, out_keys_inv: inputs mapped back on the way in.
        standard_normal: which of the two affine maps.
        eps: the smallest scale (default: the scale dtype's eps, or 1e-6).
    """

    _array_hooks = True

    def __init__(self, loc=None, scale=None, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None,
                 standard_normal: bool = False, eps: float | None = None):
        if in_keys is None:
            raise RuntimeError("Not passing in_keys to ObservationNorm is a deprecated behavior.")
        in_keys_inv = [] if in_keys_inv is None else in_keys_inv
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys,
                         in_keys_inv=in_keys_inv, out_keys_inv=copy(in_keys_inv) if out_keys_inv is None else out_keys_inv)
        self.register_buffer("standard_normal", torch.as_tensor(standard_normal))
        floating = isinstance(scale, torch.Tensor) and scale.dtype.is_floating_point
        self.eps = eps if eps is not None else torch.finfo(scale.dtype).eps if floating else 1e-6
        if loc is None and scale is not None or scale is None and loc is not None:
            raise ValueError(_ERR_INIT)
        if loc is None:
            loc, scale = nn.UninitializedBuffer(), nn.UninitializedBuffer()
        else:
            loc = loc if isinstance(loc, torch.Tensor) else torch.tensor(loc, dtype=torch.get_default_dtype())
            if not isinstance(scale, torch.Tensor):
                scale = torch.tensor(scale, dtype=torch.get_default_dtype()).clamp_min(self.eps)
        self.register_buffer("loc", loc)
        self.register_buffer("scale", scale)

    @property
    def initialized(self) -> bool:
        return not isinstance(self.loc, nn.UninitializedBuffer)

    def init_stats(self, num_iter: int, reduce_dim=0, cat_dim=None, key=None, keep_dims=None) -> None:
        """Set ``loc`` and ``scale`` from at least ``num_iter`` steps of the parent env (TorchRL's).

        ``reduce_dim`` (an int or a tuple) are the dims of the collected data averaged over,
        ``cat_dim`` the one rollouts are concatenated along, ``keep_dims`` the reduced dims kept
        with size one; ``key`` the entry, when there are several in_keys.
        """
        if cat_dim is None:
            cat_dim = reduce_dim
            if not isinstance(cat_dim, int):
                raise ValueError("cat_dim must be specified if reduce_dim is not an integer.")
        if (isinstance(reduce_dim, tuple) and cat_dim not in reduce_dim) or (
                isinstance(reduce_dim, int) and cat_dim != reduce_dim):
            raise ValueError("cat_dim must be part of or equal to reduce_dim.")
        if self.initialized:
            raise RuntimeError(f"Loc/Scale are already initialized: ({self.loc}, {self.scale})")
        if len(self.in_keys) > 1 and key is None:
            raise RuntimeError("Transform has multiple in_keys but no specific key was passed as an argument")
        key = self.in_keys[0] if key is None else key
        parent = self.parent
        if parent is None:
            raise RuntimeError("Cannot initialize the transform if parent env is not defined.")
        for t in parent.transform.modules():
            if isinstance(t, ObservationNorm) and not t.initialized:
                raise RuntimeError("ObservationNorms need to be initialized in the right order. Trying to "
                                   "initialize an ObservationNorm while a parent ObservationNorm transform is still "
                                   "uninitialized")
        collected, data = 0, []
        while collected < num_iter:
            rollout = parent.rollout(max_steps=num_iter)
            collected += rollout.numel()
            data.append(rollout.get(key))
        data = torch.cat(data, cat_dim)
        reduce_dim = sorted(d if d < 0 else d - data.ndim for d in ([reduce_dim] if isinstance(reduce_dim, int) else reduce_dim))
        keep_dims = [] if keep_dims is None else sorted(d if d < 0 else d - data.ndim for d in keep_dims)
        if not all(k in reduce_dim for k in keep_dims):
            raise ValueError("keep_dim elements must be part of reduce_dim list.")
        loc, scale = data.mean(reduce_dim, keepdim=True), data.std(reduce_dim, keepdim=True)
        for dim in reduce_dim:
            if dim not in keep_dims:
                loc, scale = loc.squeeze(dim), scale.squeeze(dim)
        if not self.standard_normal:
            scale = 1 / scale.clamp_min(self.eps)
            loc = -loc * scale
        if not torch.isfinite(loc).all():
            raise RuntimeError("Non-finite values found in loc")
        if not torch.isfinite(scale).all():
            raise RuntimeError("Non-finite values found in scale")
        self.loc.materialize(shape=loc.shape, dtype=loc.dtype)
        self.loc.copy_(loc)
        self.scale.materialize(shape=scale.shape, dtype=scale.dtype)
        self.scale.copy_(scale.clamp_min(self.eps))
        self._bind_buffers()
        if self.container is not None:
            self.container._rebuild()

    def _apply_transform(self, obs):
        if not self.initialized:
            raise RuntimeError(_NOT_INITIALIZED)
        if self.standard_normal:
            return (obs - self.loc) / self.scale
        return obs * self.scale + self.loc

    def _inv_apply_transform(self, state):
        if not self.initialized:
            raise RuntimeError(_NOT_INITIALIZED)
        if not self.standard_normal:
            return (state - self.loc) / self.scale
        return state * self.scale + self.loc

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self._call(tensordict_reset)

    def _on_space(self, spec):
        # before init_stats the bounds are left as they are; init_stats rebuilds the env's specs
        if self.initialized and isinstance(spec.space, ContinuousBox):
            spec.space.low = self._apply_transform(spec.space.low)
            spec.space.high = self._apply_transform(spec.space.high)
        return spec

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        return self._on_space(observation_spec)

    @apply_to_composite_inv
    def transform_action_spec(self, action_spec):
        return self._on_space(action_spec)

    @apply_to_composite_inv
    def transform_state_spec(self, state_spec):
        return self._on_space(state_spec)

    # ---- arrays --------------------------------------------------------------------------------
    def _attach(self, env):
        self._check_in_keys(env)

    def _affine(self, value, out):
        buffers = self._np_buffers
        loc, scale = buffers["loc"], buffers["scale"]
        if loc is None:  # an UninitializedBuffer
            raise RuntimeError(_NOT_INITIALIZED)
        if buffers["standard_normal"]:
            np.subtract(value, loc, out=out)
            np.divide(out, scale, out=out)
        else:
            np.multiply(value, scale, out=out)
            np.add(out, loc, out=out)

    def on_reset(self, root, t, mask):
        for src, dst in self._pairs:
            if src not in root:
                continue  # the reward: on steps only
            if mask is None or mask.ndim == 0:
                self._affine(root[src][t], root[dst][t])
            else:
                rows = root[src][t][mask]
                self._affine(rows, rows)
                root[dst][t][mask] = rows

    def on_step(self, root, nxt, t):
        for src, dst in self._pairs:
            self._affine(nxt[src][t], nxt[dst][t])

    def __repr__(self) -> str:
        if self.initialized and self.loc.numel() == 1 and self.scale.numel() == 1:
            return f"ObservationNorm(loc={float(self.loc):4.4f}, scale={float(self.scale):4.4f}, keys={self.in_keys})"
        return super().__repr__()


_SEP = ".-|-."


def _stat_name(key, suffix: str) -> str:
    """TorchRL's name of a statistic: ``"<key><suffix>"``, nested keys joined by ``".-|-."``."""
    return key + suffix if isinstance(key, str) else _SEP.join((*key[:-1], key[-1] + suffix))


class VecNorm(Transform):
    """Normalise entries with running, exponentially decayed statistics, as TorchRL's ``VecNorm``.

    Each call first folds the new values into the statistics of each in_key (``sum``, sum of
    squares ``ssq`` and ``count``, each multiplied by ``decay`` before the new values are added;
    ``count`` grows by the number of envs the values come from), then writes
    ``(value - mean) / sqrt(max(var, eps))`` into the out_key, with ``mean = sum / count`` and
    ``var = ssq / count - mean ** 2``. So the first value of a key normalises to 0. Resets update
    the statistics too (only the envs that are reset); ``reward`` is normalised on steps.
    Statistics have the entry's dtype (``count`` is float32), under TorchRL's names
    ``"<key>_sum"``, ``"<key>_ssq"`` and ``"<key>_count"`` (``get_extra_state()``).

    Args:
        in_keys: the entries to normalise; default ``["observation", "reward"]``.
        out_keys: where the normalised values go (default: the in_keys, in place).
        shared_td: statistics to use instead of new ones, a dict or TensorDict with the keys
            above in shared memory, e.g. ``other.get_extra_state()`` after ``other.share_memory()``.
        lock: a multiprocessing lock held while the statistics are updated (TorchRL creates one
            per transform; reap updates without a lock unless given one, and then processes that
            update shared statistics at the same moment can lose one another's update).
        decay: how much of the statistics each update keeps, in (0, 1].
        eps: lower bound of the variance (and of the standard deviation).
        shapes: TorchRL's shapes of the statistics; reap takes them from the env (None only).
        new_api: True gives a ``VecNormV2`` (TorchRL's switch).

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

    _array_hooks = True
    STATS = ("_sum", "_ssq", "_count")
    SEP = _SEP

    def __new__(cls, *args, new_api: bool | None = None, **kwargs):
        if new_api:
            return VecNormV2(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, in_keys=None, out_keys=None, shared_td=None, lock=None, decay: float = 0.9999,
                 eps: float = 1e-4, shapes=None, new_api: bool | None = None):
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"VecNorm: decay must be in (0, 1], got {decay}")
        if not eps > 0.0:
            raise ValueError(f"VecNorm: eps must be > 0 (the smallest variance), got {eps}")
        if shapes is not None:
            raise ValueError("VecNorm: shapes= is not supported; reap takes the statistics' shapes from the env")
        in_keys = ["observation", "reward"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)
        self.decay, self.eps, self.lock, self.shapes = decay, eps, lock, shapes
        self.frozen = False
        self._shared = False
        self._td: dict[str, torch.Tensor] = {}
        self._given_stats = shared_td is not None
        if shared_td is not None:
            self._td = {k: shared_td[k] for k in shared_td.keys()}
            if not all(t.is_shared() or _is_memmap(t) for t in self._td.values()):
                raise RuntimeError(
                    "shared_td must be either in shared memory or a memmap tensordict: call share_memory() on the "
                    "VecNorm it comes from (or share_memory_() on the tensors) before get_extra_state()"
                )
            for key in self.in_keys:
                if any(_stat_name(key, s) not in self._td for s in self.STATS):
                    raise KeyError(f"key {key} not present in the shared tensordict with keys {sorted(self._td)}; "
                                   "give this VecNorm the in_keys of the one the statistics come from")
        self._np: dict[str, np.ndarray] = {}

    # ---- statistics ------------------------------------------------------------------------------
    def _init_key(self, key, like: torch.Tensor) -> None:
        """New (zero) statistics for ``key``, shaped like one env's entry ``like``."""
        names = [_stat_name(key, s) for s in self.STATS]
        if names[0] in self._td:
            return
        self._td[names[0]] = torch.zeros_like(like)
        self._td[names[1]] = torch.zeros_like(like)
        self._td[names[2]] = torch.zeros(1, dtype=torch.float32, device=like.device)
        if self._shared:
            self.share_memory()
        self._bind_arrays()

    def _bind_arrays(self) -> None:
        self._np = {k: v.numpy() for k, v in self._td.items()}

    def __getstate__(self):
        state = super().__getstate__()
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
        super().__setstate__(state)
        self._bind_arrays()

    def share_memory(self) -> VecNorm:
        """Move the statistics to shared memory (now, and for keys created later)."""
        self._shared = True
        for tensor in self._td.values():
            tensor.share_memory_()
        self._bind_arrays()  # share_memory_ moves the storage: re-point the numpy views
        return self

    def _share_statistics(self) -> dict:
        """The statistics, moved to shared memory: what ``EnvCreator`` hands the envs it makes."""
        return self.share_memory()._td

    def _use_statistics(self, statistics: dict) -> None:
        """Normalise with (and update) ``statistics`` of another VecNorm, shared with it."""
        self._td, self._shared = statistics, True
        self._bind_arrays()

    def freeze(self) -> VecNorm:
        """Stop updating the statistics (values are still normalised with them)."""
        self.frozen = True
        return self

    def unfreeze(self) -> VecNorm:
        """Update the statistics again."""
        self.frozen = False
        return self

    def frozen_copy(self) -> VecNorm:
        """A frozen copy for another env (evaluation) that reads this one's statistics.

        As TorchRL's, the copy holds the same statistics tensors: it never updates them, and it
        normalises with them as this VecNorm goes on updating them.
        """
        if not self._td:
            raise RuntimeError("Make sure the VecNorm has been initialized before creating a frozen copy.")
        clone = self.clone()
        clone._td = dict(self._td)
        clone._bind_arrays()
        return clone.freeze()

    def get_extra_state(self) -> dict | None:
        """The statistics, under TorchRL's names (pass them to another VecNorm's ``shared_td=``)."""
        if not self._td:
            warn_uninitialised_state(self)
            return None
        return dict(self._td)

    def set_extra_state(self, state) -> None:
        """Load statistics from ``get_extra_state()`` (copied into the current ones, which stay shared)."""
        if state is None:
            if self._td:
                raise KeyError("Could not find a tensordict of statistics in the state_dict (it comes from an "
                               "uninitialised VecNorm) to load into this initialised VecNorm")
            return
        if not self._td:
            warn_unshared_load(self, state.values())
        for name, value in state.items():
            if name in self._td:
                self._td[name].copy_(value)
            else:
                self._td[name] = value.clone()
        self._bind_arrays()

    # ---- TorchRL's hooks ---------------------------------------------------------------------------
    def _update(self, key, value, n) -> torch.Tensor:
        total, ssq, count = (self._td[_stat_name(key, s)] for s in self.STATS)
        value_sum, value_ssq = value, value.pow(2)
        while value_sum.ndim > total.ndim:
            value_sum, value_ssq = value_sum.sum(0), value_ssq.sum(0)
        if not self.frozen:
            total.mul_(self.decay).add_(value_sum)
            ssq.mul_(self.decay).add_(value_ssq)
            count.mul_(self.decay).add_(n)
        mean = total / count
        std = (ssq / count - mean.pow(2)).clamp_min(self.eps).sqrt()
        return (value - mean) / std.clamp_min(self.eps)

    def _call(self, next_tensordict):
        with self.lock if self.lock is not None else _NO_LOCK:
            for key, out_key in zip(self.in_keys, self.out_keys):
                if key not in next_tensordict.keys(True):
                    continue
                value = next_tensordict.get(key)
                self._init_key(key, value.reshape(-1, *value.shape[next_tensordict.ndim:])[0])
                next_tensordict.set(out_key, self._update(key, value, max(1, next_tensordict.numel())))
        return next_tensordict

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self._call(tensordict_reset)

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        if isinstance(observation_spec, Bounded):
            return Unbounded(shape=observation_spec.shape, dtype=observation_spec.dtype, device=observation_spec.device)
        return observation_spec

    # ---- arrays --------------------------------------------------------------------------------------
    def _attach(self, env):
        self._check_in_keys(env)
        self._numel = max(1, int(np.prod(env.batch_size)))
        batch = len(env.batch_size)
        root, nxt = env.root_specs(), env.next_specs()
        for key in self.in_keys:
            spec = root[key] if key in root else nxt[key]
            if not spec.dtype.is_floating_point:
                raise TypeError(
                    f"VecNorm: in_key {key!r} has dtype {spec.dtype}; it must be floating point: cast it first "
                    "(e.g. DoubleToFloat(in_keys=...)) or leave it out"
                )
            self._init_key(key, torch.zeros(spec.shape[batch:], dtype=spec.dtype))
        self._stat_names = {key: tuple(_stat_name(key, s) for s in self.STATS) for key in self.in_keys}
        self._bind_arrays()

    def replaced_keys(self):
        return ()

    def _update_and_normalize(self, key, array, n):
        stats, (sum_name, ssq_name, count_name) = self._np, self._stat_names[key]
        total, ssq, count = stats[sum_name], stats[ssq_name], stats[count_name]
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
            for key, out_key in self._pairs:
                if key not in arrays:
                    continue  # reward: not on the root
                if mask is None or mask.ndim == 0:
                    out = arrays[out_key][t]
                    if out_key != key:
                        np.copyto(out, arrays[key][t])
                    self._update_and_normalize(key, out, self._numel)
                else:
                    rows = arrays[key][t][mask]
                    self._update_and_normalize(key, rows, int(mask.sum()))
                    arrays[out_key][t][mask] = rows

    def on_reset(self, root, t, mask):
        self._normalize(root, t, mask)

    def on_step(self, root, nxt, t):
        self._normalize(nxt, t, None)

    # ---- what the statistics give ------------------------------------------------------------------
    def _loc_scale(self) -> tuple[dict, dict]:
        if not self._td:
            raise RuntimeError("VecNorm must be initialized before computing loc and scale.")
        loc, scale = {}, {}
        for key in self.in_keys:
            total, ssq, count = (self._td[_stat_name(key, s)] for s in self.STATS)
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
        """Always True: values become ``(value - loc) / scale``."""
        return True

    def denorm(self, tensordict):
        """A shallow copy of ``tensordict`` with the out_keys mapped back into the in_keys."""
        loc, scale = self._loc_scale()
        tensordict = tensordict.copy()
        for key, out_key in zip(self.in_keys, self.out_keys):
            if out_key in tensordict.keys(True):
                tensordict.set(key, tensordict.get(out_key) * scale[key] + loc[key])
        return tensordict

    def to_observation_norm(self) -> ObservationNorm | Compose:
        """A fixed ``ObservationNorm`` with the current statistics (for evaluation)."""
        loc, scale = self._loc_scale()
        norms = [ObservationNorm(loc[k], scale[k], in_keys=k, out_keys=o, standard_normal=True)
                 for k, o in zip(self.in_keys, self.out_keys)]
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
