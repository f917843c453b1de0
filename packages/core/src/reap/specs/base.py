"""``TensorSpec``, the spaces (``ContinuousBox``, ``CategoricalBox``, ``BoxList``) and shape helpers.

A spec describes a tensor: its shape (batch dims included, ``-1`` for a dimension whose size
varies), dtype, device and domain. Leaf specs keep the tensors that vary along their shape
(``Bounded``'s bounds, masks, ``MultiCategorical``'s ``nvec``) as *fields*; one generic
implementation of ``expand``, ``squeeze``, ``unsqueeze``, ``reshape``, ``unbind``, indexing and
``torch.index_select`` maps those fields and rebuilds the spec with ``_new``.

Examples:
    >>> import torch
    >>> from reap.specs import Bounded
    >>> spec = Bounded(-1.0, 1.0, shape=(4, 2))
    >>> spec[0].shape, spec.unsqueeze(0).shape, torch.stack([spec, spec]).shape
    (torch.Size([2]), torch.Size([1, 4, 2]), torch.Size([2, 4, 2]))
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from textwrap import indent

import numpy as np
import torch

#: TorchRL's ``CHECK_SPEC_ENCODE``: ``encode`` and ``to_numpy`` check values against the spec.
_CHECK_SPEC_ENCODE = bool(int(os.environ.get("CHECK_SPEC_ENCODE", "0")))


def _size(shape) -> torch.Size:
    """``torch.Size`` of ints (NumPy ints too); ``f(2, 3)`` and ``f((2, 3))`` alike."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    elif len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = shape[0]
    return torch.Size([int(s) for s in shape])


def _safe(shape) -> torch.Size:
    """``shape`` with its variable (``-1``) dimensions as 1: the shape of a sample."""
    return torch.Size([s if s >= 0 else 1 for s in shape])


def _ordinal(device):
    """``device`` as a ``torch.device`` with its index (``cuda`` is ``cuda:0``); None stays None."""
    if device is None:
        return None
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def _dtype_device(dtype, device):
    """TorchRL's defaults: the default float dtype, the CPU."""
    dtype = torch.get_default_dtype() if dtype is None else dtype
    return dtype, _ordinal("cpu" if device is None else device)


def _minmax(dtype):
    if dtype is torch.bool:
        return False, True
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    return info.min, info.max


def _index(idx):
    """An index as torch reads it, a list as one tensor index (TorchRL's reading of ``[[0, 1]]``)."""
    if isinstance(idx, list):
        return torch.as_tensor(idx)
    if isinstance(idx, range):
        return torch.as_tensor(list(idx), dtype=torch.long)
    return idx


def _without_ellipsis(parts: list, ndim: int) -> list:
    """``parts`` (an index as a list) with its ``...`` spelled out as ``:`` for each dim it covers."""
    if Ellipsis in parts:
        at = parts.index(Ellipsis)
        used = sum(isinstance(p, int | slice) for p in parts)
        parts[at:at + 1] = [slice(None)] * (ndim - used)
    return parts


def _positive_steps(shape, idx):
    """``idx`` with each negative-step slice as the positive one over the same items, and the
    output dims to flip after it (torch refuses negative steps; specs take them, as TorchRL's).

    Examples:
        >>> _positive_steps((5, 3), slice(10, 1, -1))
        (slice(2, 5, 1), (0,))
        >>> _positive_steps((5, 3), (0, slice(None, None, -2)))
        ((0, slice(0, 3, 2)), (0,))
    """
    parts = list(idx) if isinstance(idx, tuple) else [idx]
    if not any(isinstance(p, slice) and p.step is not None and p.step < 0 for p in parts):
        return idx, ()
    if not all(p is None or p is Ellipsis or isinstance(p, int | slice) for p in parts):
        raise IndexError(f"a negative-step slice of a spec goes with ints, slices, None and ... only, got {idx!r}")
    parts = _without_ellipsis(parts, len(shape))
    out, dim, flips = [], 0, []
    for part in parts:
        if isinstance(part, slice) and part.step is not None and part.step < 0 and dim < len(shape):
            items = range(shape[dim])[part]
            flips.append(sum(not isinstance(p, int) for p in out))
            part = slice(items[-1], items[0] + 1, -part.step) if items else slice(0, 0)
        out.append(part)
        dim += part is not None
    return (tuple(out) if isinstance(idx, tuple) else out[0]), tuple(flips)


def _indexed_shape(shape, idx) -> torch.Size:
    """The shape ``shape[idx]`` has, with torch's bounds checks (a zero-stride tensor, no memory).

    A variable dim (``-1``) stays variable under ``:``, ``...`` and ``None`` and goes under an
    int; any other index of it is an ``IndexError``, as in TorchRL.
    """
    if isinstance(idx, tuple) and any(isinstance(i, str) for i in idx):
        raise IndexError(f"cannot index a spec with {idx!r}")
    idx, _ = _positive_steps(shape, idx)
    if not shape and (idx is Ellipsis or isinstance(idx, slice)):
        return torch.Size(shape)
    parts = list(idx) if isinstance(idx, tuple) else [idx]
    simple = all(p is None or p is Ellipsis or isinstance(p, (int, slice)) for p in parts)
    if not any(s < 0 for s in shape) or not simple:
        return torch.zeros((), dtype=torch.bool).expand(_safe(shape))[_index(idx)].shape
    parts = _without_ellipsis(parts, len(shape))
    out, dim = [], 0
    for part in parts:
        if part is None:
            out.append(1)
            continue
        if dim >= len(shape):
            raise IndexError(f"too many indices for a spec of shape {tuple(shape)}")
        size = shape[dim]
        dim += 1
        if isinstance(part, int):
            if size >= 0 and not -size <= part < size:
                raise IndexError(f"index {part} is out of bounds for dimension {dim - 1} with size {size}")
        elif size < 0:
            if part != slice(None):
                raise IndexError(f"cannot slice a dynamic (-1) dimension with {part}: the extent of the dimension "
                                 "is unknown.")
            out.append(size)
        else:
            out.append(len(range(size)[part]))
    return torch.Size([*out, *shape[dim:]])


def _pad(idx, extra: int):
    """``idx`` for a tensor with ``extra`` trailing dims it must not touch."""
    if not extra:
        return _index(idx)
    idx = idx if isinstance(idx, tuple) else (idx,)
    return (*map(_index, idx), *(slice(None),) * extra)


def _neg_dim(dim: int, ndim: int, extra: int = 0) -> int:
    """``dim`` counted from the front of a shape of ``ndim`` dims (``extra``: +1 for unsqueeze)."""
    n = ndim + extra
    if not -n <= dim < max(n, 1):
        raise ValueError(f"Dimension out of range, expected value in the range [{-n}, {n - 1}], but got {dim}")
    return dim % n if n else 0


class Box:
    """A space of values (TorchRL's ``Box``)."""

    def clone(self):
        return copy.deepcopy(self)


@dataclass(repr=False, eq=False)
class ContinuousBox(Box):
    """Values between ``low`` and ``high`` (``Bounded.space``, ``Unbounded.space``)."""

    low: torch.Tensor
    high: torch.Tensor
    device: torch.device | None = None

    def __iter__(self):
        yield self.low
        yield self.high

    def to(self, dest) -> ContinuousBox:
        return ContinuousBox(self.low.to(dest), self.high.to(dest))

    def clone(self) -> ContinuousBox:
        return ContinuousBox(self.low.clone(), self.high.clone())

    def unbind(self, dim: int = 0):
        return tuple(ContinuousBox(lo, hi, self.device) for lo, hi in zip(self.low.unbind(dim), self.high.unbind(dim)))

    def __eq__(self, other) -> bool:
        if other is None:  # an unbounded space: the dtype's limits, or no finite bound
            lo, hi = (torch.as_tensor(v, dtype=self.low.dtype) for v in _minmax(self.low.dtype))
            return bool((torch.isclose(self.low, lo).all() and torch.isclose(self.high, hi).all())
                        or not (torch.isfinite(self.low).any() or torch.isfinite(self.high).any()))
        return (type(self) is type(other) and self.low.dtype == other.low.dtype
                and self.high.dtype == other.high.dtype and self.low.device == other.low.device
                and self.low.shape == other.low.shape and self.high.shape == other.high.shape
                and bool(torch.isclose(self.low, other.low).all()) and bool(torch.isclose(self.high, other.high).all()))

    def __repr__(self) -> str:
        def tensor(name, t):
            return (f"\n{name}=Tensor(shape={t.shape}, device={t.device}, dtype={t.dtype}, "
                    f"contiguous={self.high.is_contiguous()})")
        return f"ContinuousBox({indent(tensor('low', self.low), ' ' * 4)},{indent(tensor('high', self.high), ' ' * 4)})"


@dataclass(repr=False, frozen=True)
class CategoricalBox(Box):
    """``n`` values, ``0`` to ``n - 1`` (``Categorical.space``, ``OneHot.space``)."""

    n: int

    def __post_init__(self):
        object.__setattr__(self, "n", int(self.n))

    def to(self, dest) -> CategoricalBox:
        return self

    def __repr__(self) -> str:
        return f"CategoricalBox(n={self.n})"


class DiscreteBox(CategoricalBox):
    """TorchRL's former name of :class:`CategoricalBox`."""


@dataclass(repr=False)
class BoxList(Box):
    """One box per column (``MultiOneHot.space``, ``MultiCategorical.space``)."""

    boxes: list

    def to(self, dest) -> BoxList:
        return BoxList([box.to(dest) for box in self.boxes])

    def __iter__(self):
        yield from self.boxes

    def __len__(self) -> int:
        return len(self.boxes)

    def __repr__(self) -> str:
        return f"BoxList(boxes={self.boxes})"

    @staticmethod
    def from_nvec(nvec: torch.Tensor):
        if nvec.ndim == 0:
            return CategoricalBox(nvec.item())
        return BoxList([BoxList.from_nvec(n) for n in nvec.unbind(-1)])


@dataclass(repr=False, frozen=True)
class BinaryBox(Box):
    """``n`` binary values."""

    n: int

    def to(self, dest) -> BinaryBox:
        return self


#: ``torch`` functions a spec answers: ``torch.stack``, ``torch.index_select``, ``torch.squeeze``, ...
_HANDLED: dict = {}


def implements_for_spec(func):
    """Register ``fn`` as what ``func(spec, ...)`` does (TorchRL's ``implements_for_spec``)."""

    def register(fn):
        _HANDLED[func] = fn
        return fn

    return register


def _is_torchrl(obj) -> bool:
    return type(obj).__module__.startswith("torchrl.")


class TensorSpec:
    """Base of the specs: ``shape``, ``space``, ``device``, ``dtype``, ``domain``.

    Subclasses set ``_protected`` (trailing dims that indexing and ``index_select`` leave
    alone: the one-hot dim), ``_fixed_last`` (the last dim may not be squeezed, unsqueezed or
    unbound, as TorchRL checks it) and implement ``_fields`` and ``_new``.
    """

    _protected = 0
    _fixed_last = False

    def __init__(self, shape, space=None, device=None, dtype=None, domain: str = ""):
        self.shape = shape
        self.space = space
        self.device = device
        self.dtype = torch.get_default_dtype() if dtype is None else dtype
        self.domain = domain

    # ---- attributes ---------------------------------------------------------------------------
    def __setattr__(self, name, value):
        if name == "shape":
            value = _size(value)
        elif name == "device":
            value = _ordinal(value)
        super().__setattr__(name, value)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def ndimension(self) -> int:
        return len(self.shape)

    @property
    def _safe_shape(self) -> torch.Size:
        return _safe(self.shape)

    def clear_device_(self):
        """A no-op on leaf specs (only a ``Composite`` may have no device)."""
        return self

    def cardinality(self) -> int:
        raise NotImplementedError(f"cardinality is not implemented for {type(self).__name__} specs.")

    def enumerate(self, use_mask: bool = False):
        raise NotImplementedError(f"enumerate is not implemented for spec of class {type(self).__name__}.")

    def index(self, index, tensor_to_index):
        raise NotImplementedError(f"`index` is not implemented for {type(self).__name__} specs.")

    # ---- the fields that follow the shape (subclasses) ----------------------------------------
    def _fields(self) -> dict:
        """Tensors whose leading dims follow ``shape[:ndim - _protected]`` (bounds, masks, nvec)."""
        return {}

    def _new(self, shape, *, device=None, dtype=None, **fields):
        """A spec like this one with shape ``shape``, these fields (and device or dtype)."""
        raise NotImplementedError

    def _map(self, shape, fn):
        """``_new(shape)`` with ``fn(field, extra)`` applied to each field (``extra``: its trailing
        dims beyond the indexable ones)."""
        lead = self.ndim - self._protected
        return self._new(shape, **{k: None if v is None else fn(v, v.ndim - lead) for k, v in self._fields().items()})

    # ---- values -------------------------------------------------------------------------------
    def zero(self, shape=None) -> torch.Tensor:
        """Zeros of shape ``(*shape, *spec.shape)`` (not always in the spec: a buffer's filling)."""
        return torch.zeros((*_size(shape or ()), *self._safe_shape), dtype=self.dtype, device=self.device)

    def zeros(self, shape=None):
        return self.zero(shape)

    def one(self, shape=None):
        if self.dtype == torch.bool:
            return ~self.zero(shape)
        return self.zero(shape) + 1

    def ones(self, shape=None):
        return self.one(shape)

    def rand(self, shape=None, *, generator=None):
        raise NotImplementedError(f"{type(self).__name__} cannot draw random values")

    def sample(self, shape=None, *, generator=None):
        return self.rand(shape, generator=generator)

    def is_in(self, val) -> bool:
        raise NotImplementedError

    def contains(self, item) -> bool:
        return self.is_in(item)

    def _project(self, val):
        raise NotImplementedError

    def project(self, val):
        """``val`` if it is in the spec, else mapped into it (what ``safe=True`` modules do)."""
        return val if self.is_in(val) else self._project(val)

    def assert_is_in(self, value) -> None:
        if not self.is_in(value):
            raise AssertionError(f"Encoding failed because value is not in space. Consider calling project(val) "
                                 f"first. value was = {value} and spec was {self}.")

    def type_check(self, value: torch.Tensor, key=None) -> None:
        if value.dtype is not self.dtype:
            raise TypeError(f"value.dtype={value.dtype} but {type(self).__name__}.dtype={self.dtype}")

    def encode(self, val, *, ignore_device: bool = False):
        """``val`` (an array, a list, a number) as a tensor of this spec; a tensor is kept as is."""
        if not isinstance(val, torch.Tensor):
            if isinstance(val, list):
                val = val[0] if len(val) == 1 else np.array(val)
            if isinstance(val, np.ndarray) and not all(s > 0 for s in val.strides):
                val = val.copy()
            val = torch.as_tensor(val, dtype=self.dtype, device=None if ignore_device else self.device)
            if val.shape != self.shape:
                try:
                    val = val.reshape(self.shape)
                except RuntimeError as err:
                    raise RuntimeError(f"Shape mismatch: the value has shape {val.shape} which is incompatible "
                                       f"with the spec shape {self.shape}.") from err
        if _CHECK_SPEC_ENCODE:
            self.assert_is_in(val)
        return val

    def memoize_encode(self, mode: bool = True) -> None:
        """Taken for TorchRL's API: reap's ``encode`` is the same either way."""

    def erase_memoize_cache(self) -> None:
        """Taken for TorchRL's API (see :meth:`memoize_encode`)."""

    def to_numpy(self, val, safe: bool | None = None):
        """``val`` as a NumPy array (the inverse of :meth:`encode`)."""
        if _CHECK_SPEC_ENCODE if safe is None else safe:
            self.assert_is_in(val)
        return val.detach().cpu().numpy()

    # ---- shape ops ------------------------------------------------------------------------------
    def _check_expand(self, shape) -> torch.Size:
        shape = _size(shape)
        tail = shape[len(shape) - self.ndim:] if self.ndim else ()
        if len(shape) < self.ndim or any(new != old and old != 1 for new, old in zip(tail, self.shape)):
            raise ValueError(f"The last {self.ndim} of the expanded shape {shape} must match the shape of the "
                             f"{type(self).__name__} spec in expand().")
        return shape

    def expand(self, *shape):
        """This spec with shape ``shape`` (leading dims added, size-1 dims grown), as ``Tensor.expand``."""
        shape = self._check_expand(shape)
        lead = shape[: len(shape) - self._protected]
        return self._map(shape, lambda t, extra: t.expand(*_safe(lead), *t.shape[t.ndim - extra:]).clone())

    def _guard_last(self, dim, dims=(-1,)) -> None:
        if self._fixed_last and (dim in dims or dim == self.ndim):
            raise ValueError(f"Final dimension of {type(self)} must remain unchanged")

    def squeeze(self, dim: int | None = None):
        """This spec without its size-1 dims (``dim``: that one only); ``self`` if none."""
        if self.shape and self.shape[-1] == 1:
            self._guard_last(dim, (-1, None))
        if dim is None:
            dims = [i for i, s in enumerate(self.shape) if s == 1]
            if not dims or self.ndim == 1:
                return self
            spec = self
            for i in reversed(dims):
                spec = spec.squeeze(i)
            return spec
        dim = _neg_dim(dim, self.ndim)
        if self.shape[dim] != 1:
            return self
        shape = [s for i, s in enumerate(self.shape) if i != dim]
        return self._map(shape, lambda t, extra: t.squeeze(dim))

    def unsqueeze(self, dim: int):
        """This spec with a size-1 dim inserted at ``dim``."""
        self._guard_last(dim)
        dim = _neg_dim(dim, self.ndim, extra=1)
        shape = list(self.shape)
        shape.insert(dim, 1)
        return self._map(shape, lambda t, extra: t.unsqueeze(dim))

    def reshape(self, *shape):
        """This spec with shape ``shape`` (the fields beyond the spec's dims, a ``Categorical`` mask's
        ``n``, kept)."""
        shape = _size(shape)
        return self._map(shape, lambda t, extra: t.reshape(*shape, *t.shape[self.ndim:]))

    view = reshape

    def unflatten(self, dim: int, sizes):
        return self.reshape(torch.zeros(self._safe_shape, device="meta").unflatten(dim, sizes).shape)

    def flatten(self, start_dim: int, end_dim: int):
        return self.reshape(torch.zeros(self._safe_shape, device="meta").flatten(start_dim, end_dim).shape)

    def make_neg_dim(self, dim: int) -> None:
        """Mark dim ``dim`` as variable (``-1``), in place."""
        dim = _neg_dim(dim, self.ndim)
        self.shape = [-1 if i == dim else s for i, s in enumerate(self.shape)]

    def unbind(self, dim: int = 0):
        """The specs along dim ``dim`` (as ``Tensor.unbind``)."""
        self._guard_last(dim)
        orig = dim
        dim = dim + self.ndim if dim < 0 else dim
        if dim >= self.ndim:
            raise IndexError(f"Cannot unbind along dim {orig} with shape {self.shape}.")
        if dim < 0 or self.shape[dim] < 0:
            raise ValueError(f"Cannot unbind along dim {orig} with shape {self.shape}: its size is not known")
        shape = [s for i, s in enumerate(self.shape) if i != dim]
        return tuple(self._map(shape, lambda t, extra, i=i: t.select(dim, i)) for i in range(self.shape[dim]))

    def __getitem__(self, idx):
        """The spec of ``tensor[idx]`` (its protected trailing dim kept)."""
        lead = self.shape[: self.ndim - self._protected]
        shape = (*_indexed_shape(lead, idx), *self.shape[len(lead):])
        idx, flips = _positive_steps(lead, idx)
        return self._map(shape, lambda t, extra: t[_pad(idx, extra)].flip(flips) if flips else t[_pad(idx, extra)])

    def _index_select(self, dim: int, index: torch.Tensor):
        dim = dim % self.ndim
        if self._protected and dim == self.ndim - 1:
            raise ValueError(f"Cannot index_select along the last dimension of {type(self).__name__} spec, as "
                             "it represents the domain.")
        shape = list(self.shape)
        shape[dim] = index.numel()
        return self._map(shape, lambda t, extra: torch.index_select(t, dim, index))

    # ---- devices, copies, comparison --------------------------------------------------------------
    def to(self, dest):
        """This spec on device ``dest`` (a dtype: with that dtype); ``self`` when nothing changes."""
        if dest is None:
            return self
        dtype, device = (dest, self.device) if isinstance(dest, torch.dtype) else (self.dtype, _ordinal(dest))
        if (dtype, device) == (self.dtype, self.device):
            return self
        return self._moved(device, dtype)

    def _moved(self, device, dtype):
        fields = {k: None if v is None else v.to(device) for k, v in self._fields().items()}
        return self._new(self.shape, device=device, dtype=dtype, **fields)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}")

    def clone(self):
        return self._map(self.shape, lambda t, extra: t.clone())

    def to_torchrl(self):
        """The equivalent TorchRL spec (needs TorchRL installed)."""
        raise NotImplementedError(f"{type(self).__name__} has no TorchRL equivalent")

    def __eq__(self, other) -> bool:
        if _is_torchrl(other):
            return self.to_torchrl() == other
        return self._eq(other)

    def _eq(self, other) -> bool:
        return type(self) is type(other)

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = None  # specs are mutable, as TorchRL's (which do not hash either)

    def __repr__(self) -> str:
        fields = [f"shape={self.shape}", f"space={self.space}", f"device={self.device}", f"dtype={self.dtype}",
                  f"domain={self.domain}"]
        return f"{type(self).__name__}(\n" + ",\n".join(indent(f, " " * 4) for f in fields) + ")"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func not in _HANDLED or not all(issubclass(t, TensorSpec) for t in types):
            return NotImplemented
        return _HANDLED[func](*args, **(kwargs or {}))


def _torchrl_data():
    try:
        import torchrl.data as specs
    except ImportError as exc:
        raise ImportError("to_torchrl() needs TorchRL installed (`uv pip install torchrl`, or `uv sync --group "
                          "bench` in reap's workspace)") from exc
    return specs


@implements_for_spec(torch.squeeze)
def _squeeze(spec, *args, **kwargs):
    return spec.squeeze(*args, **kwargs)


@implements_for_spec(torch.unsqueeze)
def _unsqueeze(spec, *args, **kwargs):
    return spec.unsqueeze(*args, **kwargs)


@implements_for_spec(torch.index_select)
def _index_select(input, dim: int, index: torch.Tensor):
    if not input.ndim:
        raise IndexError(f"index_select of a spec of shape {input.shape}: it has no dim {dim}")
    dim = dim % input.ndim
    if bool((index < 0).any()) or bool((index >= input.shape[dim]).any()):
        raise IndexError(f"index {index} is out of bounds for dimension {dim} with size {input.shape[dim]}")
    return input._index_select(dim, index)


def _stacked_shape(shape, dim: int, n: int) -> torch.Size:
    dim = dim + len(shape) + 1 if dim < 0 else dim
    shape = list(shape)
    shape.insert(dim, n)
    return torch.Size(shape)


@implements_for_spec(torch.stack)
def _stack(specs, dim: int = 0, out=None):
    """``torch.stack`` of specs: equal specs give one spec expanded along ``dim``, others a lazy
    stack (``Stacked``, ``StackedComposite``)."""
    from reap.specs.stacked import Stacked, StackedComposite

    if out is not None:
        raise NotImplementedError("In-place spec modification is not a feature of torchrl, hence "
                                  "torch.stack(list_of_specs, dim, out=spec) is not implemented.")
    specs = list(specs)
    if not specs:
        raise ValueError("Cannot stack an empty list of specs.")
    first = specs[0]
    from reap.specs.composite import Composite

    composite = isinstance(first, Composite)
    for spec in specs[1:]:
        if isinstance(spec, Composite) != composite or (not composite and type(spec) is not type(first)):
            raise RuntimeError("Stacking specs cannot occur: Found more than one type of specs in the list.")
        if not composite:
            if spec.device != first.device:
                raise RuntimeError(f"Devices differ, got {spec.device} and {first.device}")
            if spec.dtype != first.dtype:
                raise RuntimeError(f"Dtypes differ, got {spec.dtype} and {first.dtype}")
            if spec.ndim != first.ndim:
                raise RuntimeError(f"Ndims differ, got {spec.ndim} and {first.ndim}")
        elif spec.shape != first.shape:
            raise RuntimeError(f"Shapes differ, got {spec.shape} and {first.shape}")
    if all(spec == first for spec in specs[1:]):
        dim = dim + first.ndim + 1 if dim < 0 else dim
        return first.clone().unsqueeze(dim).expand(_stacked_shape(first.shape, dim, len(specs)))
    return (StackedComposite if composite else Stacked)(*specs, dim=dim)
