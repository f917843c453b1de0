"""Discrete specs (TorchRL's): ``Categorical``, ``OneHot``, ``Binary``, ``MultiOneHot``, ``MultiCategorical``.

A ``mask`` (``update_mask``) limits the values ``rand`` draws and ``is_in`` accepts, as TorchRL's
action masks do.

Examples:
    >>> import torch
    >>> from reap.specs import Categorical, OneHot
    >>> spec = OneHot(3, mask=torch.tensor([False, True, False]))
    >>> spec.rand(), spec.is_in(torch.tensor([True, False, False]))
    (tensor([False,  True, False]), tensor(False))
    >>> spec.to_categorical_spec().n, Categorical(4).cardinality()
    (3, 4)
"""

from __future__ import annotations

import torch
from torch.nn.functional import one_hot

from reap.specs.base import (
    _CHECK_SPEC_ENCODE,
    BoxList,
    CategoricalBox,
    TensorSpec,
    _dtype_device,
    _safe,
    _size,
    _torchrl_data,
)


def _draw(mask: torch.Tensor, generator=None) -> torch.Tensor:
    """An index per row of ``mask`` (``[..., n]``), uniform among its True entries."""
    flat = mask.flatten(0, -2) if mask.ndim > 2 else mask
    return torch.multinomial(flat.float(), 1, generator=generator).reshape(mask.shape[:-1])


def _masks_equal(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool((a == b).all())


class _Discrete(TensorSpec):
    """What the discrete specs share: ``n``, a mask, equality with the mask."""

    mask = None

    def _mask(self, mask, shape):
        if mask is None:
            return None
        mask = torch.as_tensor(mask, device=self.device)
        if mask.dtype != torch.bool:
            raise ValueError("Only boolean masks are accepted.")
        n = self.space.n if isinstance(self.space, CategoricalBox) else None
        if n is not None and mask.numel() == n and mask.shape != shape:
            mask = mask.reshape(n)
        try:
            return mask.expand(shape)
        except RuntimeError as err:
            raise RuntimeError("Cannot expand mask to the desired shape.") from err

    def _fields(self) -> dict:
        return {"mask": self.mask}

    @property
    def n(self) -> int:
        return self.space.n

    def cardinality(self) -> int:
        return self.n

    def _eq(self, other) -> bool:
        return (hasattr(other, "mask") and type(self) is type(other) and self.shape == other.shape
                and self.space == other.space and self.device == other.device and self.dtype == other.dtype
                and self.domain == other.domain and getattr(self, "use_register", False)
                == getattr(other, "use_register", False) and _masks_equal(self.mask, other.mask))


class Categorical(_Discrete):
    """An integer in ``[0, n)`` (``n=-1``: not known yet, see ``set_provisional_n``)."""

    def __init__(self, n: int, shape=None, device=None, dtype=torch.long, mask=None):
        dtype, device = _dtype_device(dtype, device)
        super().__init__(_size(() if shape is None else shape), CategoricalBox(n), device, dtype, "discrete")
        self._provisional_n = None
        self.update_mask(mask)

    def update_mask(self, mask) -> None:
        """Allow only the values where ``mask`` (``[*shape, n]``, or ``[n]``) is True."""
        self.mask = self._mask(mask, (*self._safe_shape, self.space.n))

    def set_provisional_n(self, n: int) -> None:
        self._provisional_n = n

    @property
    def n(self) -> int:
        n = self.space.n
        if n == -1:
            if self._provisional_n is None:
                raise RuntimeError(f"Undefined cardinality for {type(self)}. Please call "
                                   "spec.set_provisional_n(int).")
            return self._provisional_n
        return n

    def _new(self, shape, *, device=None, dtype=None, mask=None):
        return type(self)(self.space.n, shape=shape, device=device or self.device, dtype=dtype or self.dtype,
                          mask=mask)

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        values = torch.arange(self.n, dtype=torch.uint8 if self.dtype is torch.bool else self.dtype,
                              device=self.device)
        if use_mask and self.mask is not None:
            values = values[self.mask]
        return values.view(-1, *(1,) * self.ndim).expand(len(values), *self.shape)

    def rand(self, shape=None, *, generator=None) -> torch.Tensor:
        shape = _size(shape or ())
        if self.space.n == -1 and self._provisional_n is None:
            raise RuntimeError("Cannot generate random categorical samples for undefined cardinality (n=-1). To "
                               "sample from this class, first call Categorical.set_provisional_n(n) before "
                               "calling rand().")
        if self.mask is None:
            return torch.randint(0, self.n, (*shape, *self._safe_shape), device=self.device, dtype=self.dtype,
                                 generator=generator)
        return _draw(self.mask.expand(*shape, *self.mask.shape), generator).to(self.dtype)

    def index(self, index, tensor_to_index):
        """``tensor_to_index`` at the values ``index`` along its last dim."""
        idx = index.expand(tensor_to_index.shape[: tensor_to_index.ndim - self.ndim] + torch.Size([-1] * self.ndim))
        return tensor_to_index.gather(-1, idx)

    def is_in(self, val) -> bool:
        if self.mask is None:
            if torch.broadcast_shapes(self._safe_shape, val.shape) != val.shape or val.dtype != self.dtype:
                return False
            # a 0-dim bool tensor once the values are checked, as TorchRL's
            return self.space.n == -1 or ((val >= 0) & (val < self.space.n)).all()
        shape = (*torch.broadcast_shapes(self.mask.shape[:-1], val.shape), self.mask.shape[-1])
        return self.mask.expand(shape).gather(-1, val.unsqueeze(-1).long()).all()

    def _project(self, val):
        if val.dtype not in (torch.int, torch.long):
            val = torch.round(val)
        if self.mask is None:
            return val.clamp_(min=0, max=self.space.n - 1)
        shape = (*torch.broadcast_shapes(self.mask.shape[:-1], val.shape), self.mask.shape[-1])
        mask = self.mask.expand(shape)
        outside = ~mask.gather(-1, val.long().unsqueeze(-1)).all(-1)
        return torch.masked_scatter(val, outside, _draw(mask[outside]).to(val.dtype))

    def to_numpy(self, val, safe: bool | None = None):
        return super().to_numpy(val, safe)

    def to_one_hot(self, val, safe: bool | None = None) -> torch.Tensor:
        if _CHECK_SPEC_ENCODE if safe is None else safe:
            self.assert_is_in(val)
        return one_hot(val.long(), self.space.n).bool()

    def to_one_hot_spec(self) -> OneHot:
        return OneHot(self.space.n, shape=[*self.shape, self.space.n], device=self.device)

    def to_categorical(self, val, safe: bool | None = None) -> torch.Tensor:
        return val

    def to_categorical_spec(self) -> Categorical:
        return self

    def to_torchrl(self):
        return _torchrl_data().Categorical(self.space.n, shape=self.shape, device=self.device, dtype=self.dtype,
                                           mask=self.mask)


class OneHot(_Discrete):
    """One of ``n`` values as a one-hot vector along the last dim (``shape[-1] == n``)."""

    _protected = 1
    _fixed_last = True

    def __init__(self, n: int, shape=None, device=None, dtype=torch.bool, use_register: bool = False, mask=None):
        dtype, device = _dtype_device(dtype, device)
        space = CategoricalBox(n)
        shape = _size((space.n,) if shape is None else shape)
        if not shape or shape[-1] != space.n:
            raise ValueError(f"The last value of the shape must match n for transform of type {type(self)}. "
                             f"Got n={space.n} and shape={shape}.")
        _refuse_register(use_register)
        self.use_register = use_register
        super().__init__(shape, space, device, dtype, "discrete")
        self.update_mask(mask)

    def update_mask(self, mask) -> None:
        """Allow only the values where ``mask`` (the spec's shape, or ``[n]``) is True."""
        self.mask = self._mask(mask, self._safe_shape)

    def _new(self, shape, *, device=None, dtype=None, mask=None):
        return type(self)(n=_size(shape)[-1], shape=shape, device=device or self.device,
                          dtype=dtype or self.dtype, mask=mask)

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        if use_mask:
            raise NotImplementedError("OneHot.enumerate(use_mask=True) is not implemented (as in TorchRL)")
        eye = torch.eye(self.n, dtype=self.dtype, device=self.device)
        return eye.expand(*self.shape, self.n).permute(-2, *range(self.ndim - 1), -1)

    def rand(self, shape=None, *, generator=None) -> torch.Tensor:
        size = (*_size(shape or ()), *self._safe_shape[:-1])
        if self.mask is None:
            index = torch.randint(self.n, size, device=self.device, generator=generator)
        else:
            index = _draw(self.mask.expand(*size, self.mask.shape[-1]), generator)
        eye = self.__dict__.get("_eye")  # rows of an identity: half the time of one_hot()
        if eye is None or (eye.dtype, eye.device) != (self.dtype, self.device):
            eye = self._eye = torch.eye(self.n, dtype=self.dtype, device=self.device)
        return eye[index]

    def encode(self, val, *, ignore_device: bool = False) -> torch.Tensor:
        """An index (array, number or tensor) as a one-hot tensor."""
        if not isinstance(val, torch.Tensor):
            val = torch.as_tensor(val, device=None if ignore_device else self.device)
        if (val >= self.n).any():
            raise AssertionError("Value must be less than action space.")
        return one_hot(val.long(), self.n).to(self.dtype)

    def to_numpy(self, val, safe: bool | None = None):
        """The index of each one-hot vector (what a gymnasium ``Discrete`` space takes)."""
        if _CHECK_SPEC_ENCODE if safe is None else safe:
            self.assert_is_in(val)
        return val.long().argmax(-1).cpu().numpy()

    def index(self, index, tensor_to_index):
        """``tensor_to_index`` at the one-hot ``index`` along its last dim (TorchRL's reading)."""
        if not isinstance(index, torch.Tensor):
            raise ValueError(f"Only tensors are allowed for indexing using {type(self).__name__}.index(...)")
        index = index.nonzero(as_tuple=True)[-1]
        return tensor_to_index.gather(-1, index.expand((*tensor_to_index.shape[:-1], index.shape[-1])))

    def is_in(self, val) -> bool:
        if self.mask is None:
            if torch.broadcast_shapes(self._safe_shape, val.shape) != val.shape or val.dtype != self.dtype:
                return False
            return (val.sum(-1) == 1).all()  # a 0-dim bool tensor, as TorchRL's
        mask = self.mask.expand(torch.broadcast_shapes(self.mask.shape, val.shape))
        return (mask & val.bool()).any(-1).all()

    def _project(self, val):
        if self.mask is None:  # an index drawn in proportion to the entries (a one-hot keeps its index)
            index = torch.multinomial(val.reshape(-1, val.shape[-1]).to(torch.get_default_dtype()), 1)
            return one_hot(index.reshape(val.shape[:-1]), self.n).to(self.dtype)
        mask = self.mask.expand(torch.broadcast_shapes(self.mask.shape, val.shape))
        outside = ~(mask & val.bool()).any(-1)
        new = torch.zeros_like(val[outside]).scatter(-1, torch.multinomial(mask[outside].float(), 1), 1)
        return val.masked_scatter(outside.unsqueeze(-1).expand_as(val), new)

    def to_categorical(self, val, safe: bool | None = None) -> torch.Tensor:
        if _CHECK_SPEC_ENCODE if safe is None else safe:
            self.assert_is_in(val)
        return val.long().argmax(-1)

    def to_categorical_spec(self) -> Categorical:
        return Categorical(self.n, device=self.device, shape=self.shape[:-1], mask=self.mask)

    def to_one_hot(self, val, safe: bool | None = None) -> torch.Tensor:
        return val

    def to_one_hot_spec(self) -> OneHot:
        return self

    def to_torchrl(self):
        return _torchrl_data().OneHot(self.n, shape=self.shape, device=self.device, dtype=self.dtype,
                                      mask=self.mask)


class Binary(Categorical):
    """``n`` binary values (a ``Categorical`` of 2 values per entry; ``int8`` by default)."""

    _protected = 1

    def unbind(self, dim: int = 0):
        if dim in (self.ndim - 1, -1):
            raise ValueError(f"Final dimension of {type(self)} must remain unchanged")
        return super().unbind(dim)

    def __init__(self, n: int | None = None, shape=None, device=None, dtype=torch.int8):
        if n is None and shape is None:
            raise TypeError("Must provide either n or shape.")
        shape = _size((n,) if shape is None else shape)
        if not shape:
            if n not in (None, 0):
                raise ValueError(f"'n' must be zero for spec {type(self)} when using an empty shape")
        elif n is not None and shape[-1] != n:
            raise ValueError(f"The last value of the shape must match 'n' for spec {type(self)}. Got n={n} and "
                             f"shape={shape}.")
        super().__init__(n=2, shape=shape, device=device, dtype=dtype)

    def _fields(self) -> dict:
        return {}

    def _new(self, shape, *, device=None, dtype=None):
        return type(self)(shape=shape, device=device or self.device, dtype=dtype or self.dtype)

    def squeeze(self, dim: int | None = None):
        shape = list(self.shape)
        if dim is None:
            if self.ndim == 1 or 1 not in shape:
                return self
            return self._new([s for s in shape if s != 1])
        dim = dim % self.ndim
        return self._new(shape[:dim] + shape[dim + 1:]) if shape[dim] == 1 else self

    def unsqueeze(self, dim: int):
        shape = list(self.shape)
        shape.insert(dim % (self.ndim + 1), 1)
        return self._new(shape)

    def __getitem__(self, idx):
        if not self.shape:
            raise ValueError("Cannot index a Binary spec with an empty shape")
        return super().__getitem__(idx)

    def _eq(self, other) -> bool:
        if not isinstance(other, Binary):
            return (isinstance(other, Categorical) and other.n == 2 and other.device == self.device
                    and other.shape == self.shape and other.dtype == self.dtype)
        return super()._eq(other)

    def to_torchrl(self):
        return _torchrl_data().Binary(shape=self.shape, device=self.device, dtype=self.dtype)


class MultiOneHot(OneHot):
    """One one-hot vector per entry of ``nvec``, concatenated along the last dim (``sum(nvec)``)."""

    def __init__(self, nvec, shape=None, device=None, dtype=torch.bool, use_register: bool = False, mask=None):
        self.nvec = nvec
        dtype, device = _dtype_device(dtype, device)
        total = sum(nvec)
        shape = _size((total,) if shape is None else shape)
        if shape[-1] != total:
            raise ValueError(f"The last value of the shape must match sum(nvec) for transform of type {type(self)}. "
                             f"Got sum(nvec)={total} and shape={shape}.")
        _refuse_register(use_register)
        self.use_register = use_register
        TensorSpec.__init__(self, shape, BoxList([CategoricalBox(n) for n in nvec]), device, dtype, "discrete")
        self.update_mask(mask)

    def update_mask(self, mask) -> None:
        if mask is not None and mask.dtype != torch.bool:
            raise ValueError("Only boolean masks are accepted.")
        try:
            self.mask = None if mask is None else mask.expand(*self._safe_shape)
        except RuntimeError as err:
            raise RuntimeError("Cannot expand mask to the desired shape.") from err

    def _new(self, shape, *, device=None, dtype=None, mask=None):
        return type(self)(self.nvec, shape=shape, device=device or self.device, dtype=dtype or self.dtype,
                          mask=mask)

    @property
    def _ns(self) -> list[int]:
        return [box.n for box in self.space]

    def cardinality(self) -> int:
        return torch.as_tensor(self.nvec).prod()

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        columns = self.to_categorical_spec().enumerate(use_mask).unbind(-1)
        return torch.cat([one_hot(c, n).to(self.dtype) for n, c in zip(self.nvec, columns)], -1)

    def rand(self, shape=None, *, generator=None) -> torch.Tensor:
        size = (*_size(shape or ()), *self._safe_shape[:-1])
        if self.mask is None:
            parts = [one_hot(torch.randint(n, (*size, 1), device=self.device, generator=generator), n)
                     for n in self._ns]
            return torch.cat(parts, -1).to(self.dtype).squeeze(-2)
        masks = torch.split(self.mask.expand(*size, self.mask.shape[-1]), self._ns, -1)
        return torch.cat([one_hot(_draw(m, generator), m.shape[-1]).to(self.dtype) for m in masks], -1)

    def encode(self, val, *, ignore_device: bool = False) -> torch.Tensor:
        if not isinstance(val, torch.Tensor):
            val = torch.as_tensor(val, device=None if ignore_device else self.device)
        parts = []
        for v, n in zip(val.unbind(-1), self._ns):
            if not (v < n).all():
                raise RuntimeError(f"value {v} is greater than the allowed max {n}")
            parts.append(one_hot(v.long(), n).to(self.dtype))
        return torch.cat(parts, -1).reshape(self.shape)

    def _split(self, val):
        if val.ndim < 1 or val.shape[-1] != sum(self._ns):
            return None
        return val.split(self._ns, dim=-1)

    def _split_self(self) -> list[OneHot]:
        masks = [None] * len(self._ns) if self.mask is None else self.mask.split(self._ns, -1)
        return [OneHot(n, shape=(*self.shape[:-1], n), device=self.device, dtype=self.dtype, mask=m)
                for n, m in zip(self._ns, masks)]

    def index(self, index, tensor_to_index):
        if not isinstance(index, torch.Tensor):
            raise ValueError(f"Only tensors are allowed for indexing using {type(self).__name__}.index(...)")
        out = []
        for idx, table in zip(self._split(index), self._split(tensor_to_index)):
            idx = idx.nonzero().squeeze()
            out.append(table.gather(-1, idx.expand((*table.shape[:-1], idx.shape[-1]))))
        return torch.cat(out, -1)

    def is_in(self, val) -> bool:
        parts = self._split(val)
        return parts is not None and all(spec.is_in(v) for v, spec in zip(parts, self._split_self()))

    def _project(self, val):
        return torch.cat([spec._project(v) for v, spec in zip(self._split(val), self._split_self())], -1)

    def to_categorical(self, val, safe: bool | None = None) -> torch.Tensor:
        if _CHECK_SPEC_ENCODE if safe is None else safe:
            self.assert_is_in(val)
        return torch.stack([v.long().argmax(-1) for v in self._split(val)], -1)

    def to_categorical_spec(self) -> MultiCategorical:
        return MultiCategorical(self._ns, device=self.device, shape=[*self.shape[:-1], len(self._ns)],
                                mask=self.mask)

    def to_numpy(self, val, safe: bool | None = None):
        if _CHECK_SPEC_ENCODE if safe is None else safe:
            self.assert_is_in(val)
        return self.to_categorical(val, safe=False).cpu().numpy()

    def to_torchrl(self):
        return _torchrl_data().MultiOneHot(list(self.nvec), shape=self.shape, device=self.device, dtype=self.dtype,
                                           mask=self.mask)


class MultiCategorical(Categorical):
    """One integer per column, the i-th in ``[0, nvec[i])`` (``nvec`` follows the spec's shape)."""

    _protected = 0
    _fixed_last = True

    def __init__(self, nvec, shape=None, device=None, dtype=torch.int64, mask=None, remove_singleton: bool = True):
        nvec = torch.as_tensor(nvec)
        if nvec.ndim < 1:
            nvec = nvec.unsqueeze(0)
        dtype, device = _dtype_device(dtype, device)
        shape = nvec.shape if shape is None else _size(shape)
        if shape[-1] != nvec.shape[-1]:
            raise ValueError(f"The last value of the shape must match nvec.shape[-1] for transform of type "
                             f"{type(self)}. Got nvec.shape[-1]={nvec.shape[-1]} and shape={shape}.")
        self.nvec = nvec.expand(_safe(shape))
        TensorSpec.__init__(self, shape, BoxList.from_nvec(self.nvec), device, dtype, "discrete")
        self.remove_singleton = remove_singleton
        self.update_mask(mask)

    def update_mask(self, mask) -> None:
        if mask is not None and mask.dtype != torch.bool:
            raise ValueError("Only boolean masks are accepted.")
        try:
            self.mask = None if mask is None else mask.expand(*_safe(self.shape[:-1]), mask.shape[-1])
        except RuntimeError as err:
            raise RuntimeError("Cannot expand mask to the desired shape.") from err

    def _fields(self) -> dict:
        return {"nvec": self.nvec, "mask": self.mask}

    def _map(self, shape, fn):
        # nvec follows the whole shape; the mask (``[*shape[:-1], sum(nvec)]``) its batch dims
        mask = None if self.mask is None else fn(self.mask, 1)
        return self._new(shape, nvec=fn(self.nvec, 0), mask=mask)

    def reshape(self, *shape):
        shape = _size(shape)
        mask = None if self.mask is None else self.mask.reshape(*shape[:-1], self.mask.shape[-1])
        return self._new(shape, nvec=self.nvec.reshape(shape), mask=mask)

    view = reshape

    def _new(self, shape, *, device=None, dtype=None, nvec, mask=None):
        return type(self)(nvec, shape=_size(shape) or None, device=device or self.device, dtype=dtype or self.dtype,
                          mask=mask, remove_singleton=self.remove_singleton)

    @property
    def _row(self) -> torch.Tensor:
        """The nvec every row shares (heterogeneous rows are refused)."""
        rows = self.nvec.reshape(-1, self.nvec.shape[-1]).unique(dim=0)
        if len(rows) > 1:
            raise ValueError(f"Cannot call enumerate on heterogeneous nvecs: unique nvecs={rows}.")
        return rows[0]

    def cardinality(self) -> int:
        return self._row.prod()

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        if use_mask:
            raise NotImplementedError("MultiCategorical.enumerate(use_mask=True) is not implemented (as in TorchRL)")
        if self.mask is not None:
            raise RuntimeError("Cannot enumerate a masked TensorSpec. Submit an issue on github if this feature "
                               "is requested.")
        grids = torch.meshgrid(*[torch.arange(n, device=self.device, dtype=self.dtype) for n in self._row],
                               indexing="ij")
        values = torch.stack([g.reshape(-1) for g in grids], dim=-1)
        values = values.view(len(values), *(1,) * (self.ndim - 1), self.shape[-1])
        return values.expand(len(values), *self.shape)

    def _rand(self, space, shape, generator):
        out = []
        for box in space:
            if isinstance(box, BoxList):
                out.append(self._rand(box, shape[:-1], generator))
            else:
                out.append(torch.randint(0, box.n, shape, device=self.device, dtype=self.dtype, generator=generator))
        return torch.stack(out, -1)

    def rand(self, shape=None, *, generator=None) -> torch.Tensor:
        if self.mask is not None:
            return torch.stack([s.rand(shape, generator=generator) for s in self._split_self()], -1)
        shape = (*_size(shape or ()), *self.shape[:-1])
        out = self._rand(self.space, shape, generator)
        return out.squeeze(-1) if self.remove_singleton and self.shape == (1,) else out

    def _split_self(self) -> list[Categorical]:
        ns = self._row.tolist() if self.nvec.ndim > 1 else self.nvec.tolist()
        masks = [None] * len(ns) if self.mask is None else self.mask.split(ns, -1)
        return [Categorical(n, shape=self.shape[:-1], device=self.device, dtype=self.dtype, mask=m)
                for n, m in zip(ns, masks)]

    def is_in(self, val) -> bool:
        if self.mask is not None:
            values, specs = val.unbind(-1), self._split_self()
            return len(values) == len(specs) and all(s.is_in(v) for v, s in zip(values, specs))
        val = val.unsqueeze(0) if val.ndim < 1 else val
        if torch.broadcast_shapes(_safe(self.shape), val.shape) != val.shape or self.dtype != val.dtype:
            return False
        return bool(((val >= 0) & (val < self.nvec.to(val.device))).all())

    def _project(self, val):
        if self.mask is not None:
            return torch.stack([s._project(v) for v, s in zip(val.unbind(-1), self._split_self())], -1)
        scalar = val.ndim < 1
        val = val.unsqueeze(0) if scalar else val
        if not self.dtype.is_floating_point:
            val = torch.round(val)
        val = val.clamp_min(0).type(self.dtype)
        above = val >= self.nvec
        val[above] = (self.nvec.expand_as(val)[above] - 1).type(self.dtype)
        return val.squeeze(0) if scalar else val

    def to_one_hot(self, val, safe: bool | None = None) -> torch.Tensor:
        if _CHECK_SPEC_ENCODE if safe is None else safe:
            self.assert_is_in(val)
        val = val.unsqueeze(0) if val.ndim < 1 else val
        return torch.cat([one_hot(val[..., i].long(), n).bool() for i, n in enumerate(self._row.tolist())],
                         -1).to(self.device)

    def to_one_hot_spec(self) -> MultiOneHot:
        if self.ndim > 1:
            return torch.stack([spec.to_one_hot_spec() for spec in self.unbind(0)])
        ns = [box.n for box in self.space]
        return MultiOneHot(ns, device=self.device, shape=[*self.shape[:-1], sum(ns)], mask=self.mask)

    def to_categorical(self, val, safe: bool | None = None) -> torch.Tensor:
        return val

    def to_categorical_spec(self) -> MultiCategorical:
        return self

    def _eq(self, other) -> bool:
        return _Discrete._eq(self, other)

    def to_torchrl(self):
        return _torchrl_data().MultiCategorical(self.nvec.clone(), shape=self.shape, device=self.device,
                                                dtype=self.dtype, mask=self.mask,
                                                remove_singleton=self.remove_singleton)


def _refuse_register(use_register: bool) -> None:
    if use_register:
        raise ValueError("use_register=True is not supported by reap's specs: encode indices yourself and keep "
                         "use_register=False")
