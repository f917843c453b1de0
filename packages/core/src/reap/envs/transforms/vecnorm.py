"""``VecNormV2`` (also ``VecNorm(new_api=True)``): TorchRL's running normalisation with
exponential moving averages of the mean and of the square, bias-corrected.

Statistics are TensorDicts ``loc``, ``var`` (the mean of the squares) and ``count``; each
update is ``loc.lerp_(value, 1 - decay)`` (with ``decay=1``: the running mean), and values are
normalised by ``(value - loc / b) / sqrt((var - loc ** 2) / b)`` with
``b = 1 - decay ** count``. reap runs it through its TensorDict hooks on each step (it has no
array path). ``stateful=False`` (TorchRL's stateless mode) keeps the statistics in the data
instead: observations ``"_vecnorm_loc"``, ``"_vecnorm_var"`` and ``"_vecnorm_count"`` (each a
group with one entry per in_key) that each step reads from the root and writes, updated, into
``"next"``; a reset starts them anew (another stateless VecNormV2 of the env gets a prefix of
its own).

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
import uuid
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
        stateful: keep the statistics in the transform (True, the default) or in the data (False).
        decay: the weight of the past in the averages (``1`` gives the running mean).
        eps: the smallest standard deviation.
        shared_data: statistics to share (``{"loc", "var", "count"}``), e.g. another's.
        reduce_batch_dims: average the batch dims of each update first (one update per call).
    """

    #: the separator of the nested keys of ``get_extra_state()`` (TorchRL's)
    SEP = _SEP

    def __init__(self, in_keys, out_keys=None, *, lock=None, stateful: bool = True, decay: float = 0.9999,
                 eps: float = 1e-4, shared_data=None, reduce_batch_dims: bool = False):
        if not stateful and reduce_batch_dims:
            raise RuntimeError("reduce_batch_dims=True and stateful=False are not supported.")
        if not stateful and shared_data is not None:
            raise ValueError("VecNormV2: shared_data needs stateful=True (a stateless VecNormV2 keeps its statistics "
                             "in the data)")
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)
        self.stateful, self.lock, self.decay, self.eps = bool(stateful), lock, decay, eps
        self.reduce_batch_dims = reduce_batch_dims
        self.frozen = False
        self._cast_int_to_float = False
        self._loc = self._var = self._count = None
        if not self.stateful:
            self.initialized = False
            return
        self.register_buffer("initialized", torch.zeros((), dtype=torch.bool))
        if shared_data is not None:
            self._loc, self._var, self._count = shared_data["loc"], shared_data["var"], shared_data["count"]
            self.initialized.fill_(True)

    def _attach(self, env):
        self._check_in_keys(env)
        if not self.stateful:  # a prefix no other stateless VecNormV2 of the env uses
            if self.__dict__.get("_prefix") is None:  # the statistics are observations
                taken = "_vecnorm_loc" in env.observation_spec.keys()
                self._prefix = f"_vecnorm{uuid.uuid1()}" if taken else "_vecnorm"
            return
        self._maybe_init(env.fake_tensordict().get("next"))

    @property
    def prefix(self) -> str:
        """The start of the names of a stateless VecNormV2's statistics (``"<prefix>_loc"``, ...)."""
        return self.__dict__.get("_prefix") or "_vecnorm"

    def _stat_keys(self) -> tuple[str, str, str]:
        return f"{self.prefix}_loc", f"{self.prefix}_var", f"{self.prefix}_count"

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
        if not self.stateful:
            raise RuntimeError("Cannot create a frozen copy of a stateless VecNorm: its statistics are in the data.")
        if self._loc is None:
            raise RuntimeError("Make sure the VecNorm has been initialized before creating a frozen copy.")
        return self.clone().freeze()

    def clone(self) -> VecNormV2:
        other = super().clone()
        if not self.stateful:
            return other
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
        selected = self._with_spec_zeros(data)
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
        self._update_stats(data, loc, var, count)

    def _update_stats(self, data, loc, var, count) -> None:
        """``loc``, ``var`` and ``count`` updated in place with ``data`` (one update per call)."""
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

    def _norm(self, data, loc=None, var=None, count=None):
        if loc is None:
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
        if not self.stateful:
            return self._stateless_step(tensordict, next_tensordict)
        with self.lock if self.lock is not None else contextlib.nullcontext():
            self._maybe_init(next_tensordict)
            selected = next_tensordict.select(*self.in_keys, strict=not self.missing_tolerance)
            if self.missing_tolerance and selected.is_empty():
                return next_tensordict
            self._update(selected)
            return next_tensordict.update(self._norm(selected))

    def _call(self, next_tensordict):
        return self._step(next_tensordict, next_tensordict)

    def _stateless_step(self, tensordict, next_tensordict):
        """Read the statistics from ``tensordict`` (zeros where it has none: after a reset), update
        copies with ``next_tensordict``'s values, write them and the normalised values there."""
        loc_key, var_key, count_key = self._stat_keys()
        if loc_key not in tensordict.keys():
            selected = self._with_spec_zeros(tensordict)
            tensordict.set(count_key, torch.zeros_like(selected, dtype=torch.int64))
            tensordict.set(loc_key, torch.zeros_like(selected.apply(self._floating)))
            tensordict.set(var_key, torch.zeros_like(selected.apply(self._floating)))
        selected = next_tensordict.select(*self.in_keys, strict=not self.missing_tolerance)
        if self.missing_tolerance and selected.is_empty():
            return next_tensordict
        loc, var, count = (tensordict.get(key).clone() for key in (loc_key, var_key, count_key))
        if not self.frozen:
            keys = list(selected.keys(True, True))
            self._update_stats(selected, *(s.select(*keys) for s in (loc, var, count)))
        next_tensordict.update(self._norm(selected, loc, var, count))
        return next_tensordict.set(loc_key, loc).set(var_key, var).set(count_key, count)

    def _with_spec_zeros(self, data):
        """``data``'s in_keys, zeros of the env's specs for those it lacks (a reward at a reset)."""
        selected = data.select(*self.in_keys, strict=False)
        if set(selected.keys(True, True)) != set(self.in_keys) and self.parent is not None:
            zeros = self.parent.full_observation_spec.zero().update(self.parent.full_reward_spec.zero())
            selected = zeros.update(selected).select(*self.in_keys, strict=True)
        return selected

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

    def transform_output_spec(self, output_spec):
        output_spec = super().transform_output_spec(output_spec)
        if self.stateful:
            return output_spec
        observations = output_spec["full_observation_spec"]
        specs = {key: output_spec[group, key].clone() for group in ("full_observation_spec", "full_reward_spec")
                 if group in output_spec.keys() for key in self.out_keys if key in output_spec[group].keys(True)}
        if specs:  # each statistic: a group of the normalised entries' float specs (counts: int64)
            loc_key, var_key, count_key = self._stat_keys()
            for key in (loc_key, var_key, count_key):
                if key not in observations.keys():
                    observations[key] = Composite(shape=observations.shape, device=observations.device)
            for in_key, out_key in zip(self.in_keys, self.out_keys):
                if out_key in specs:
                    spec = specs[out_key]
                    observations[loc_key][in_key] = spec.clone()
                    observations[var_key][in_key] = spec.clone()
                    observations[count_key][in_key] = Unbounded(shape=spec.shape, dtype=torch.int64,
                                                                device=spec.device)
        return output_spec

    # ---- what the statistics give ------------------------------------------------------------------
    def _get_loc_scale(self, loc_only: bool = False):
        if not self.stateful:
            raise RuntimeError("loc and scale cannot be computed with a stateless VecNormV2: its statistics are in "
                               f"the data ({self.prefix}_loc, ...)")
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
        """A shallow copy of ``tensordict`` with the out_keys mapped back into the in_keys (stateful
        only, as TorchRL's)."""
        if not self.stateful:
            raise NotImplementedError("denorm is not implemented for stateless VecNormV2.")
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
        if not self.stateful:
            return {}
        if self._loc is None:
            warn_uninitialised_state(self)
            return {}
        return TensorDict(loc=self._loc, var=self._var, count=self._count).flatten_keys(_SEP).to_dict()

    def set_extra_state(self, state) -> None:
        if not self.stateful:
            return
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
