"""``VecNormV2`` (also ``VecNorm(new_api=True)``): TorchRL's running normalisation with
exponential moving averages of the mean and of the square, bias-corrected.

Statistics are TensorDicts ``loc``, ``var`` (the mean of the squares) and ``count``; each
update is ``loc.lerp_(value, 1 - decay)`` (with ``decay=1``: the running mean), and values are
normalised by ``(value - loc / b) / sqrt((var - loc ** 2) / b)`` with
``b = 1 - decay ** count``. reap runs it through its TensorDict hooks on each step (it has no
array path), in stateful mode only.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.transforms import VecNorm
    >>> norm = VecNorm(in_keys=["obs"], new_api=True, decay=0.9)
    >>> out = norm._call(TensorDict(obs=torch.tensor([1.0, 3.0])))  # TorchRL's has no forward either
    >>> type(norm).__name__, out["obs"].abs().max() < 1e-3
    ('VecNormV2', tensor(True))
"""

from __future__ import annotations

import contextlib
import math
import warnings
from copy import copy

import torch
from tensordict import TensorDict

from reap.envs.transforms.compose import Compose
from reap.envs.transforms.transform import Transform, missing_tolerance
from reap.specs import Bounded, Composite, Unbounded

_SEP = ".-|-."


def warn_uninitialised_state(norm: Transform) -> None:
    """The warning of ``state_dict()`` on a VecNorm that has seen no data (TorchRL warns too)."""
    warnings.warn(f"Querying state_dict on an uninitialized {type(norm).__name__}: its statistics are empty until "
                  "it sees data, and loading them into an initialised one raises", UserWarning, stacklevel=4)


def warn_unshared_load(norm: Transform, tensors) -> None:
    """The warning of loading statistics outside shared memory into a VecNorm that has none yet."""
    if not all(t.is_shared() for t in tensors):
        warnings.warn(f"{type(norm).__name__}: VecNorm wasn't initialized and the tensordict is not shared: the "
                      "loaded statistics stay in this process; call share_memory_() on the VecNorm first to share "
                      "them with others", UserWarning, stacklevel=4)


class VecNormV2(Transform):
    """Moving-average normalisation of ``in_keys`` into ``out_keys`` (TorchRL's ``VecNormV2``).

    Args:
        in_keys, out_keys: the entries (``out_keys`` default to ``in_keys``).
        lock: held while the statistics are updated (none unless given).
        stateful: True only (TorchRL's stateless mode keeps them in the data; reap does not).
        decay: the weight of the past in the averages (``1`` gives the running mean).
        eps: the smallest standard deviation.
        shared_data: statistics to share (``{"loc", "var", "count"}``), e.g. another's.
        reduce_batch_dims: average the batch dims of each update first (one update per call).
    """

    #: the separator of the nested keys of ``get_extra_state()`` (TorchRL's)
    SEP = _SEP

    def __init__(self, in_keys, out_keys=None, *, lock=None, stateful: bool = True, decay: float = 0.9999,
                 eps: float = 1e-4, shared_data=None, reduce_batch_dims: bool = False):
        if not stateful:
            raise ValueError("VecNormV2: stateful=False (statistics carried in the data) is not supported by reap; "
                             "use the default stateful=True")
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)
        self.stateful, self.lock, self.decay, self.eps = True, lock, decay, eps
        self.reduce_batch_dims = reduce_batch_dims
        self.frozen = False
        self._cast_int_to_float = False
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))
        self._loc = self._var = self._count = None
        if shared_data is not None:
            self._loc, self._var, self._count = shared_data["loc"], shared_data["var"], shared_data["count"]
            self.initialized.fill_(True)

    def _attach(self, env):
        self._check_in_keys(env)
        self._maybe_init(env.fake_tensordict().get("next"))

    def _share_statistics(self) -> dict:
        """The statistics, moved to shared memory: what ``EnvCreator`` hands the envs it makes."""
        for stat in (self._loc, self._var, self._count):
            stat.share_memory_()
        return {"loc": self._loc, "var": self._var, "count": self._count}

    def _use_statistics(self, statistics: dict) -> None:
        """Normalise with (and update) ``statistics`` of another VecNormV2, shared with it."""
        self._loc, self._var, self._count = statistics["loc"], statistics["var"], statistics["count"]
        self.initialized.fill_(True)

    def freeze(self) -> VecNormV2:
        self.frozen = True
        return self

    def unfreeze(self) -> VecNormV2:
        self.frozen = False
        return self

    def frozen_copy(self) -> VecNormV2:
        """A frozen copy with copies of the current statistics."""
        if self._loc is None:
            raise RuntimeError("Make sure the VecNorm has been initialized before creating a frozen copy.")
        return self.clone().freeze()

    def clone(self) -> VecNormV2:
        other = super().clone()
        del other.initialized
        other.register_buffer("initialized", self.initialized.clone())
        if self._loc is not None:
            other._loc, other._var, other._count = self._loc.clone(), self._var.clone(), self._count.clone()
        return other

    # ---- statistics ----------------------------------------------------------------------------
    @staticmethod
    def _floating(x):
        return x if x.dtype.is_floating_point else x.to(torch.get_default_dtype())

    def _maybe_init(self, data) -> None:
        if self.initialized:
            return
        self.initialized.copy_(True)
        selected = data.select(*self.in_keys, strict=False)
        if set(selected.keys(True, True)) != set(self.in_keys) and self.parent is not None:
            zeros = self.parent.full_observation_spec.zero().update(self.parent.full_reward_spec.zero())
            selected = zeros.update(selected).select(*self.in_keys, strict=True)
        if self.reduce_batch_dims and selected.ndim:
            selected = selected.apply(self._floating).mean(dim=tuple(range(selected.ndim)))
        self._count = torch.zeros_like(selected, dtype=torch.float32).mean().to(torch.int64)
        self._loc = torch.zeros_like(selected.apply(self._floating))
        self._var = torch.zeros_like(selected.apply(self._floating))

    def _update(self, data) -> None:
        if self.frozen:
            return
        keys = list(data.keys(True, True))
        loc, var, count = (s.select(*keys) if self.missing_tolerance else s
                           for s in (self._loc, self._var, self._count))
        if self._cast_int_to_float:
            data = data.apply(self._floating)
        if self.reduce_batch_dims and data.ndim:
            n = data.numel()
            count += n
            square, mean = data.pow(2).mean(dim=tuple(range(data.ndim))), data.mean(dim=tuple(range(data.ndim)))
            weight = 1 - self.decay ** n if self.decay != 1.0 else n / count
        else:
            count += 1
            square, mean = data.pow(2), data
            weight = 1 - self.decay if self.decay != 1.0 else 1 / count
        loc.lerp_(end=mean, weight=weight)
        var.lerp_(end=square, weight=weight)

    def _norm(self, data):
        loc, var, count = self._loc, self._var, self._count
        if self.missing_tolerance:
            keys = list(data.keys(True, True))
            loc, var, count = loc.select(*keys), var.select(*keys), count.select(*keys)
            if loc.is_empty():
                return data
        if self.decay < 1.0:
            bias = 1 - (count * math.log(self.decay)).exp()
            bias = bias.apply(lambda x, y: x.to(y.dtype), data)
        else:
            bias = 1
        var = var - loc.pow(2)
        loc, var = loc / bias, var / bias
        out = (data - loc) / var.sqrt().clamp_min(self.eps)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key != out_key and in_key in out.keys(True, True):
                out.rename_key_(in_key, out_key)
        return out

    # ---- TorchRL's hooks ---------------------------------------------------------------------------
    def _step(self, tensordict, next_tensordict):
        with self.lock if self.lock is not None else contextlib.nullcontext():
            self._maybe_init(next_tensordict)
            selected = next_tensordict.select(*self.in_keys, strict=not self.missing_tolerance)
            if self.missing_tolerance and selected.is_empty():
                return next_tensordict
            self._update(selected)
            return next_tensordict.update(self._norm(selected))

    def _call(self, next_tensordict):
        return self._step(next_tensordict, next_tensordict)

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self._step(tensordict_reset, tensordict_reset)

    def _unbounded(self, spec):
        if not spec.dtype.is_floating_point:
            spec = spec.clone()
            spec = spec.to(torch.get_default_dtype())
            self._cast_int_to_float = True
        if isinstance(spec, Bounded):
            spec = Unbounded(shape=spec.shape, device=spec.device, dtype=spec.dtype)
        return spec

    def _transform_spec(self, spec: Composite) -> Composite:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in spec.keys(True):
                spec.set(out_key, self._unbounded(spec.get(in_key).clone()))
        return spec

    def transform_observation_spec(self, observation_spec):
        return self._transform_spec(observation_spec)

    def transform_reward_spec(self, reward_spec):
        return self._transform_spec(reward_spec)

    # ---- what the statistics give ------------------------------------------------------------------
    def _get_loc_scale(self, loc_only: bool = False):
        if self._loc is None:
            raise RuntimeError("VecNormV2 must be initialized before computing loc and scale.")
        loc, count = self._loc, self._count
        if self.decay != 1.0:
            bias = (1 - (count * math.log(self.decay)).exp()).apply(lambda x, y: x.to(y.dtype), loc)
        else:
            bias = 1
        if loc_only:
            return loc / bias, None
        var = self._var - loc.pow(2)
        return loc / bias, (var / bias).sqrt().clamp_min(self.eps)

    @property
    def loc(self):
        return self._get_loc_scale(loc_only=True)[0]

    @property
    def scale(self):
        return self._get_loc_scale()[1]

    @property
    def standard_normal(self) -> bool:
        return True

    def denorm(self, tensordict):
        """A shallow copy of ``tensordict`` with the out_keys mapped back into the in_keys."""
        loc, scale = self._get_loc_scale()
        tensordict = tensordict.copy()
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if out_key in tensordict.keys(True):
                tensordict.set(in_key, tensordict.get(out_key) * scale.get(in_key) + loc.get(in_key))
        return tensordict

    def to_observation_norm(self):
        """A fixed ``ObservationNorm`` (a ``Compose`` of them) with the current statistics."""
        from reap.envs.transforms.normalization import ObservationNorm

        loc, scale = self._get_loc_scale()
        norms = [ObservationNorm(loc=loc.get(k), scale=scale.get(k), standard_normal=True, in_keys=k, out_keys=o,
                                 eps=self.eps) for k, o in zip(self.in_keys, self.out_keys)]
        return Compose(*norms) if len(norms) > 1 else norms[0]

    def get_extra_state(self) -> dict:
        if self._loc is None:
            warn_uninitialised_state(self)
            return {}
        return TensorDict(loc=self._loc, var=self._var, count=self._count).flatten_keys(_SEP).to_dict()

    def set_extra_state(self, state) -> None:
        if not state:
            if self._loc is not None:
                raise RuntimeError("set_extra_state() called with a void state-dict while the instance is initialized.")
            return
        td = TensorDict(state).unflatten_keys(_SEP)
        if self._loc is None:
            warn_unshared_load(self, td.values(True, True))
        self._loc, self._var, self._count = td["loc"], td["var"], td["count"]
        self.initialized.fill_(True)

    def __repr__(self) -> str:
        return f"VecNormV2(decay={self.decay:4.4f},eps={self.eps:4.4f}, in_keys={self.in_keys}, out_keys={self.out_keys})"
