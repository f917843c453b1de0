"""``Unbounded`` and ``Bounded`` specs (TorchRL's), with their continuous and discrete variants.

As in TorchRL, ``Unbounded(...)`` is an ``UnboundedContinuous`` or an ``UnboundedDiscrete``
according to its dtype, and ``Bounded(...)`` a ``BoundedContinuous`` or ``BoundedDiscrete``.

Examples:
    >>> import torch
    >>> from reap.specs import Bounded, Unbounded
    >>> type(Unbounded(shape=(3,))).__name__, type(Bounded(0, 9, shape=(2,), dtype=torch.int64)).__name__
    ('UnboundedContinuous', 'BoundedDiscrete')
    >>> Bounded(-1.0, 1.0, shape=(2,)).project(torch.tensor([-3.0, 0.5]))
    tensor([-1.0000,  0.5000])
"""

from __future__ import annotations

import torch

from reap.specs.base import (
    ContinuousBox,
    TensorSpec,
    _dtype_device,
    _minmax,
    _safe,
    _size,
    _torchrl_data,
)


class Unbounded(TensorSpec):
    """Any value of its dtype (``space`` spans the dtype's range); default shape ``(1,)``."""

    def __init__(self, shape=(1,), device=None, dtype=None, **kwargs):
        dtype, device = _dtype_device(dtype, device)
        low, high = _minmax(dtype)
        shape = _size(shape)
        space = ContinuousBox(torch.full(_safe(shape), low, dtype=dtype, device=device),
                              torch.full(_safe(shape), high, dtype=dtype, device=device))
        default = "continuous" if dtype.is_floating_point else "discrete"
        domain = kwargs.pop("domain", default)
        if kwargs:
            raise TypeError(f"Unbounded got unexpected keyword arguments {sorted(kwargs)}")
        super().__init__(shape, space, device, dtype, domain)
        if type(self) in (Unbounded, UnboundedContinuous, UnboundedDiscrete):
            self.__class__ = UnboundedContinuous if domain == "continuous" else UnboundedDiscrete

    def _new(self, shape, *, device=None, dtype=None):
        cls = Unbounded if dtype is not None else type(self)  # a new dtype may change the class, as in TorchRL
        return cls(shape=shape, device=device or self.device, dtype=dtype or self.dtype)

    def cardinality(self) -> int:
        raise NotImplementedError("`cardinality` is not implemented for Unbounded specs.")

    def enumerate(self, use_mask: bool = False):
        raise NotImplementedError("enumerate cannot be called with continuous specs.")

    def index(self, index, tensor_to_index):
        raise NotImplementedError("`index` is not implemented for Unbounded specs.")

    def rand(self, shape=None, *, generator=None) -> torch.Tensor:
        size = (*_size(shape or ()), *self._safe_shape)
        if self.dtype.is_floating_point:
            return torch.randn(size, device=self.device, dtype=self.dtype, generator=generator)
        return torch.empty(size, device=self.device, dtype=self.dtype).random_(generator=generator)

    def is_in(self, val) -> bool:
        return torch.broadcast_shapes(self._safe_shape, val.shape) == val.shape and val.dtype == self.dtype

    def _project(self, val):
        return torch.as_tensor(val, dtype=self.dtype).reshape(val.shape[: val.ndim - self.ndim] + self.shape)

    def _eq(self, other) -> bool:
        if isinstance(other, Bounded):
            low, high = _minmax(self.dtype)
            return Bounded(low, high, shape=self.shape, device=self.device, dtype=self.dtype,
                           domain=self.domain) == other
        if isinstance(other, Unbounded):
            return (self.dtype, self.shape, self.device) == (other.dtype, other.shape, other.device)
        return type(self) is type(other)

    def to_torchrl(self):
        return _torchrl_data().Unbounded(shape=self.shape, device=self.device, dtype=self.dtype)


class UnboundedContinuous(Unbounded):
    """An ``Unbounded`` spec of a floating dtype."""


class UnboundedDiscrete(Unbounded):
    """An ``Unbounded`` spec of an integer (or bool) dtype; ``int64`` by default."""

    def __init__(self, shape=(1,), device=None, dtype=torch.int64, **kwargs):
        super().__init__(shape=shape, device=device, dtype=dtype, **kwargs)


_SHAPE_ERROR = ("Bounded requires the shape to be explicitly (via the shape argument) or implicitly defined (via "
                "either the minimum or the maximum or both). If the maximum and/or the minimum have a "
                "non-singleton shape, they must match the provided shape if this one is set explicitly.")


class Bounded(TensorSpec):
    """Values in ``[low, high]``; ``shape`` given, or that of a non-scalar ``low`` or ``high``.

    reap refuses ``low > high`` (TorchRL takes it, and ``rand`` then draws outside the bounds).
    """

    def __init__(self, low=None, high=None, shape=None, device=None, dtype=None, **kwargs):
        for old, new in (("maximum", "high"), ("minimum", "low")):
            if old in kwargs:
                raise TypeError(f"'{old}' has been removed. Please use '{new}' instead.")
        domain = kwargs.pop("domain", None)
        if kwargs:
            raise TypeError(f"Got unrecognised kwargs {tuple(kwargs.keys())}.")
        dtype, device = _dtype_device(dtype, device)
        if domain is None:
            domain = "continuous" if dtype.is_floating_point else "discrete"
        low, high = (torch.as_tensor(v, dtype=dtype, device=device) for v in (low, high))
        shape = None if shape is None else _size(shape)
        target = None if shape is None else _safe(shape)
        sized = high if high.ndim else low if low.ndim else None
        if sized is None and target is None:
            raise RuntimeError(_SHAPE_ERROR)
        if sized is not None:
            if target is not None and target != sized.shape:
                raise RuntimeError(_SHAPE_ERROR)
            shape = sized.shape if shape is None else shape
            target = sized.shape
        low, high = low.expand(target).clone(), high.expand(target).clone()
        if (low > high).any():
            raise ValueError(f"Bounded: low must not exceed high (got low={low}, high={high}); swap them")
        super().__init__(shape, ContinuousBox(low, high, device=device), device, dtype, domain)
        if type(self) in (Bounded, BoundedContinuous, BoundedDiscrete):
            self.__class__ = BoundedContinuous if domain == "continuous" else BoundedDiscrete

    @property
    def low(self) -> torch.Tensor:
        return self.space.low

    @property
    def high(self) -> torch.Tensor:
        return self.space.high

    def _fields(self) -> dict:
        return {"low": self.space.low, "high": self.space.high}

    def _new(self, shape, *, device=None, dtype=None, low, high):
        cls = Bounded if dtype is not None else type(self)  # a new dtype may change the class, as in TorchRL
        dtype = dtype or self.dtype
        return cls(low=low.to(dtype), high=high.to(dtype), shape=shape, device=device or self.device, dtype=dtype)

    def unbind(self, dim: int = 0):
        if dim in (self.ndim, -1):
            raise ValueError(f"Final dimension of {type(self)} must remain unchanged")
        return super().unbind(dim)

    def _register_batch_size(self, batch_size) -> None:
        """Called by TorchRL's ``Composite`` on its ``Bounded`` entries; the bounds stay whole here."""

    def cardinality(self) -> float:
        return float("inf")

    def index(self, index, tensor_to_index):
        raise NotImplementedError("Indexing not implemented for Bounded.")

    def rand(self, shape=None, *, generator=None) -> torch.Tensor:
        size = (*_size(shape or ()), *self._safe_shape)
        low, high = self.space.low, self.space.high
        if self.dtype in (torch.float, torch.double, torch.half):
            out = torch.zeros(size, dtype=self.dtype, device=self.device).uniform_(generator=generator)
            out = out * (high - low) + low
            return torch.minimum(torch.maximum(out, low), high)  # rounding may step outside
        if low.dtype == torch.bool:
            low, high = low.int(), high.int()
        if self.dtype.is_floating_point:
            out = low + (high - low) * torch.rand(size, device=self.device, generator=generator)
        else:
            out = _rand_int(low.to(torch.int64), high.to(torch.int64), size, self.dtype, generator)
        return out.to(self.dtype)

    def is_in(self, val) -> bool:
        val_shape = _safe(val.shape)
        shape = list(torch.broadcast_shapes(self._safe_shape, val_shape))
        if self.ndim:
            shape[-self.ndim:] = [s if s >= 0 else b for s, b in zip(self.shape, shape[-self.ndim:])]
        if not all(a == b or a == -1 for a, b in zip(shape, val_shape)) or val.dtype != self.dtype:
            return False
        low, high = self.space.low.to(val.device), self.space.high.to(val.device)
        return ((val >= low) & (val <= high)).all()  # a 0-dim bool tensor, as TorchRL's

    def _project(self, val):
        low, high = self.space.low.to(val.device), self.space.high.to(val.device)
        return torch.clamp(val, low.expand_as(val), high.expand_as(val))

    def _eq(self, other) -> bool:
        return (type(other) is type(self) and self.device == other.device and self.shape == other.shape
                and self.space == other.space and self.dtype == other.dtype)

    def to_torchrl(self):
        return _torchrl_data().Bounded(low=self.space.low.clone(), high=self.space.high.clone(), shape=self.shape,
                                       device=self.device, dtype=self.dtype)


class BoundedContinuous(Bounded):
    """A ``Bounded`` spec of a floating dtype."""

    def __init__(self, low=None, high=None, shape=None, device=None, dtype=None, domain: str = "continuous"):
        super().__init__(low=low, high=high, shape=shape, device=device, dtype=dtype, domain=domain)


class BoundedDiscrete(Bounded):
    """A ``Bounded`` spec of an integer dtype."""

    def __init__(self, low=None, high=None, shape=None, device=None, dtype=None, domain: str = "discrete"):
        super().__init__(low=low, high=high, shape=shape, device=device, dtype=dtype, domain=domain)


def _rand_int(low, high, size, dtype, generator):
    """Integers uniform in ``[low, high]``, drawn as TorchRL draws them (the same values per seed)."""
    if dtype == torch.int64:  # spans beyond 2**53 (and 2**63) stay exact through a float64 offset
        span = high - low
        span = span.to(torch.float64) + (span < 0).to(torch.float64) * 2.0**64
        offset = torch.rand(size, dtype=torch.float64, device=low.device, generator=generator)
        offset = torch.minimum((offset * (span + 1)).floor(), span)
        from_low = offset <= span / 2
        step = torch.where(from_low, offset, span - offset)
        step = step.clamp(max=2.0**63 * (1 - torch.finfo(torch.float64).eps / 2)).long()
        return torch.where(from_low, low + step, high - step)
    float_dtype = torch.float64 if dtype == torch.int32 else torch.float32
    offset = torch.rand(size, dtype=float_dtype, device=low.device, generator=generator)
    offset = (offset * ((high - low).to(float_dtype) + 1)).long()
    return torch.minimum(low + offset, high)
