"""Tensor specs: shape, dtype and domain of what an environment reads and writes.

The names follow TorchRL (``Unbounded``, ``Bounded``, ``Categorical``, ``OneHot``, ``Binary``,
``Composite``), and so do the methods TorchRL's modules and losses call on a spec (``rand``,
``is_in``, ``project``, ``expand``, ``index``, ``to_one_hot``, ``to_categorical``, ...); shapes
include the environment's batch dimensions.

Examples:
    >>> import torch
    >>> from reap.specs import Bounded, OneHot
    >>> spec = Bounded(low=-2.0, high=2.0, shape=(1,))
    >>> spec.is_in(spec.rand())
    True
    >>> spec.space.high
    tensor([2.])
    >>> OneHot(3).to_categorical(torch.tensor([False, False, True]))
    tensor(2)

Once TorchRL is imported, its type checks take these specs as its own (:mod:`reap.specs_torchrl`):
``QValueModule(spec=env.action_spec)``, ``DQNLoss(action_space=env.action_spec)`` or
``SafeModule(..., spec=env.action_spec, safe=True)`` need no conversion. ``spec.to_torchrl()``
gives TorchRL's own spec where one is wanted.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase


@dataclass(frozen=True)
class ContinuousBox:
    """The domain of a ``Bounded`` spec (TorchRL's ``spec.space``): ``low`` and ``high``."""

    low: torch.Tensor
    high: torch.Tensor


@dataclass(frozen=True)
class CategoricalBox:
    """The domain of a ``Categorical`` or ``OneHot`` spec: ``n`` values, ``0`` to ``n - 1``."""

    n: int


def _torchrl_specs():
    try:
        import torchrl.data as specs
    except ImportError as exc:
        raise ImportError(
            "to_torchrl() needs TorchRL installed (`uv pip install torchrl`, or `uv sync --group bench` "
            "in reap's workspace)"
        ) from exc
    return specs


def _is_torchrl(obj) -> bool:
    return type(obj).__module__.startswith("torchrl.")


def _size(shape) -> torch.Size:
    """``expand(2, 3)`` and ``expand((2, 3))`` alike."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = shape[0]
    return torch.Size(shape)


class TensorSpec:
    """Base of the leaf specs: a shape, a dtype and a device."""

    domain = "continuous"
    mask = None  # TorchRL's action masks: reap's specs take none (see update_mask)

    def __init__(self, shape=(), dtype=torch.float32, device="cpu"):
        self.shape = torch.Size(shape)
        self.dtype = dtype
        self.device = torch.device(device)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def ndimension(self) -> int:
        return self.ndim

    @property
    def space(self):
        """The domain (TorchRL's ``spec.space``); None when unbounded."""
        return None

    def clone(self) -> TensorSpec:
        return copy.copy(self)

    def to(self, dest) -> TensorSpec:
        """The same spec on device ``dest`` (a dtype changes the dtype), as TorchRL's ``spec.to``."""
        clone = self.clone()
        if isinstance(dest, torch.dtype):
            clone.dtype = dest
        else:
            clone.device = torch.device(dest)
        for name in ("low", "high"):
            if hasattr(clone, name):
                setattr(clone, name, getattr(clone, name).to(dest))
        return clone

    def unbatch(self, ndim: int) -> TensorSpec:
        """The same spec without its ``ndim`` leading (batch) dimensions."""
        clone = copy.copy(self)
        clone.shape = self.shape[ndim:]
        return clone

    def expand(self, *shape) -> TensorSpec:
        """This spec with shape ``shape``, as ``torch.Tensor.expand`` and TorchRL's ``spec.expand``:
        leading (batch) dims are added and size-1 dims may grow; ``spec.expand(4, *spec.shape)``
        batches it over 4 envs."""
        shape = _size(shape)
        tail = shape[len(shape) - self.ndim:]
        if len(shape) < self.ndim or any(new != old and old != 1 for new, old in zip(tail, self.shape)):
            raise ValueError(
                f"{type(self).__name__}.expand: the new shape {tuple(shape)} must end with the spec's "
                f"shape {tuple(self.shape)} (only its size-1 dims may differ); to add batch dims, pass "
                f"expand(*batch, *spec.shape)"
            )
        clone = copy.copy(self)
        clone.shape = shape
        return clone

    def to_torchrl(self):
        """The equivalent TorchRL spec (needs TorchRL installed)."""
        specs = _torchrl_specs()
        return getattr(specs, type(self).__name__)(shape=self.shape, dtype=self.dtype, device=self.device)

    def __eq__(self, other) -> bool:
        if _is_torchrl(other):
            return self.to_torchrl() == other
        if type(other) is not type(self) or (self.shape, self.dtype, self.device) != (
            other.shape, other.dtype, other.device
        ):
            return False
        space, other_space = self.space, other.space
        if isinstance(space, ContinuousBox):
            return torch.equal(space.low, other_space.low) and torch.equal(space.high, other_space.high)
        return space == other_space

    __hash__ = None

    def zero(self, shape=None) -> torch.Tensor:
        """A tensor of zeros with batch dims ``shape`` prepended."""
        shape = () if shape is None else tuple(shape)
        return torch.zeros((*shape, *self.shape), dtype=self.dtype, device=self.device)

    def rand(self, shape=None, generator=None) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} cannot draw random values")

    def is_in(self, value: torch.Tensor) -> bool:
        """Whether ``value`` has this spec's trailing shape and dtype."""
        n = len(self.shape)
        return value.dtype == self.dtype and (n == 0 or tuple(value.shape[-n:]) == tuple(self.shape))

    def project(self, value: torch.Tensor) -> torch.Tensor:
        """``value`` if it is in the spec, else mapped into it (what ``safe=True`` modules do)."""
        return value if self.is_in(value) else self._project(value)

    def _project(self, value: torch.Tensor) -> torch.Tensor:
        return value.to(self.dtype)

    def encode(self, value, *, ignore_device: bool = False) -> torch.Tensor:
        """``value`` (an array, a number or a tensor) as a tensor of this spec (TorchRL's ``encode``)."""
        return torch.as_tensor(value, dtype=self.dtype, device=None if ignore_device else self.device)

    def to_numpy(self, value: torch.Tensor, safe: bool | None = None):
        """``value`` as the NumPy array a gymnasium env takes."""
        return value.detach().cpu().numpy()

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} has no index(); only discrete specs do")

    def update_mask(self, mask) -> None:
        if mask is not None:
            raise NotImplementedError(
                f"{type(self).__name__}.update_mask: reap's specs take no action mask; mask the "
                "policy's logits (or action values) instead"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={tuple(self.shape)}, dtype={self.dtype})"


class Unbounded(TensorSpec):
    """Any real (or integer) value."""

    def rand(self, shape=None, generator=None) -> torch.Tensor:
        size = (*(shape or ()), *self.shape)
        if self.dtype.is_floating_point:
            return torch.randn(size, dtype=self.dtype, device=self.device, generator=generator)
        return torch.randint(-100, 100, size, dtype=self.dtype, device=self.device, generator=generator)


class Bounded(TensorSpec):
    """Values in ``[low, high]`` (broadcast to ``shape``)."""

    def __init__(self, low, high, shape=None, dtype=torch.float32, device="cpu"):
        low = torch.as_tensor(low, dtype=dtype, device=device)
        high = torch.as_tensor(high, dtype=dtype, device=device)
        if shape is None:
            shape = torch.broadcast_shapes(low.shape, high.shape)
        super().__init__(shape, dtype, device)
        self.low = low.expand(self.shape).clone()
        self.high = high.expand(self.shape).clone()
        if (self.low > self.high).any():
            raise ValueError(f"Bounded: low must not exceed high, got low={low}, high={high}")

    @property
    def domain(self) -> str:
        return "continuous" if self.dtype.is_floating_point else "discrete"

    @property
    def space(self) -> ContinuousBox:
        return ContinuousBox(self.low, self.high)

    def clone(self) -> Bounded:
        clone = copy.copy(self)
        clone.low, clone.high = self.low.clone(), self.high.clone()
        return clone

    def expand(self, *shape) -> Bounded:
        clone = super().expand(*shape)
        clone.low = self.low.expand(clone.shape)
        clone.high = self.high.expand(clone.shape)
        return clone

    def unbatch(self, ndim: int) -> Bounded:
        clone = super().unbatch(ndim)
        index = (0,) * ndim
        clone.low, clone.high = self.low[index], self.high[index]
        return clone

    def _register_batch_size(self, batch_size) -> None:
        """Called by TorchRL's ``Composite`` on its ``Bounded`` entries; nothing to do here."""

    def to_torchrl(self):
        return _torchrl_specs().Bounded(
            low=self.low.clone(), high=self.high.clone(), shape=self.shape, dtype=self.dtype, device=self.device
        )

    def rand(self, shape=None, generator=None) -> torch.Tensor:
        size = (*(shape or ()), *self.shape)
        if not self.dtype.is_floating_point:
            span = (self.high - self.low + 1).to(torch.float64)
            u = torch.rand(size, dtype=torch.float64, device=self.device, generator=generator)
            return (self.low + (u * span).floor().to(self.dtype)).clamp(self.low, self.high)
        u = torch.rand(size, dtype=self.dtype, device=self.device, generator=generator)
        return self.low + u * (self.high - self.low)

    def is_in(self, value) -> bool:
        return super().is_in(value) and bool(((value >= self.low) & (value <= self.high)).all())

    def _project(self, value: torch.Tensor) -> torch.Tensor:
        return value.clamp(self.low.to(value.dtype), self.high.to(value.dtype))


class _Discrete(TensorSpec):
    """Base of the specs of ``n`` values (``Categorical``, ``OneHot``)."""

    domain = "discrete"

    def __init__(self, n: int, shape, dtype, device, mask):
        if n <= 0:
            raise ValueError(f"{type(self).__name__}: n must be positive, got {n}")
        super().__init__(shape, dtype, device)
        self.n = int(n)
        self.update_mask(mask)

    @property
    def space(self) -> CategoricalBox:
        return CategoricalBox(self.n)

    def cardinality(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n}, shape={tuple(self.shape)}, dtype={self.dtype})"


class Categorical(_Discrete):
    """An integer in ``[0, n)``, stored as an index (TorchRL's ``Categorical``)."""

    def __init__(self, n: int, shape=None, dtype=torch.int64, device="cpu", mask=None):
        super().__init__(n, () if shape is None else shape, dtype, device, mask)

    def to_torchrl(self):
        return _torchrl_specs().Categorical(self.n, shape=self.shape, dtype=self.dtype, device=self.device)

    def rand(self, shape=None, generator=None) -> torch.Tensor:
        size = (*(shape or ()), *self.shape)
        return torch.randint(0, self.n, size, dtype=self.dtype, device=self.device, generator=generator)

    def is_in(self, value) -> bool:
        return super().is_in(value) and bool(((value >= 0) & (value < self.n)).all())

    def _project(self, value: torch.Tensor) -> torch.Tensor:
        if value.is_floating_point():
            value = value.round()
        return value.clamp(0, self.n - 1)

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """``tensor_to_index`` at the values ``index`` along its last dim (TorchRL's ``spec.index``)."""
        idx = index.expand(tensor_to_index.shape[: -self.ndim] + torch.Size([-1] * self.ndim))
        return tensor_to_index.gather(-1, idx)

    def to_one_hot(self, value: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        return torch.nn.functional.one_hot(value.long(), self.n).bool()

    def to_one_hot_spec(self) -> OneHot:
        return OneHot(self.n, shape=(*self.shape, self.n), device=self.device)

    def to_categorical(self, value: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        return value

    def to_categorical_spec(self) -> Categorical:
        return self


class OneHot(_Discrete):
    """One of ``n`` values as a one-hot vector along the last dim (TorchRL's ``OneHot``).

    Examples:
        >>> from reap.specs import OneHot
        >>> spec = OneHot(2, dtype=torch.int64)
        >>> spec.shape, spec.is_in(torch.tensor([0, 1])), spec.is_in(torch.tensor([1, 1]))
        (torch.Size([2]), True, False)
        >>> spec.to_categorical_spec()
        Categorical(n=2, shape=(), dtype=torch.int64)
    """

    def __init__(self, n: int, shape=None, dtype=torch.bool, device="cpu", mask=None):
        shape = torch.Size((n,) if shape is None else shape)
        if not shape or shape[-1] != n:
            raise ValueError(f"OneHot: the last dim of shape must be n={n}, got shape={tuple(shape)}")
        super().__init__(n, shape, dtype, device, mask)

    def expand(self, *shape) -> OneHot:
        clone = super().expand(*shape)
        if clone.shape[-1] != self.n:
            raise ValueError(f"OneHot.expand: the last dim must stay n={self.n}, got {tuple(clone.shape)}")
        return clone

    def unbatch(self, ndim: int) -> OneHot:
        if ndim >= self.ndim:
            raise ValueError(f"OneHot.unbatch: cannot drop {ndim} dims of shape {tuple(self.shape)}")
        return super().unbatch(ndim)

    def to_torchrl(self):
        return _torchrl_specs().OneHot(self.n, shape=self.shape, dtype=self.dtype, device=self.device)

    def rand(self, shape=None, generator=None) -> torch.Tensor:
        size = (*(shape or ()), *self.shape[:-1])
        index = torch.randint(0, self.n, size, device=self.device, generator=generator)
        eye = self.__dict__.get("_eye")  # rows of an identity: half the time of one_hot()
        if eye is None or (eye.dtype, eye.device) != (self.dtype, self.device):
            eye = self._eye = torch.eye(self.n, dtype=self.dtype, device=self.device)
        return eye[index]

    def is_in(self, value) -> bool:
        if not super().is_in(value):
            return False
        ones = value == 1
        return bool(((value == 0) | ones).all() and (ones.sum(-1) == 1).all())

    def _project(self, value: torch.Tensor) -> torch.Tensor:
        # as TorchRL: the index drawn in proportion to the entries (a one-hot keeps its index)
        flat = value.reshape(-1, self.n).to(torch.get_default_dtype())
        index = torch.multinomial(flat, 1).reshape(value.shape[:-1])
        return torch.nn.functional.one_hot(index, self.n).to(self.dtype)

    def encode(self, value, *, ignore_device: bool = False) -> torch.Tensor:
        """An index (array, number or tensor) as a one-hot tensor, as TorchRL's ``OneHot.encode``."""
        index = torch.as_tensor(value, device=None if ignore_device else self.device).long()
        if ((index < 0) | (index >= self.n)).any():
            raise ValueError(f"OneHot.encode: the index must be in [0, {self.n}), got {value!r}")
        return torch.nn.functional.one_hot(index, self.n).to(self.dtype)

    def to_numpy(self, value: torch.Tensor, safe: bool | None = None):
        """The index of each one-hot vector (what a gymnasium ``Discrete`` space takes)."""
        return value.long().argmax(-1).cpu().numpy()

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """``tensor_to_index`` at the one-hot ``index`` along its last dim (TorchRL's ``spec.index``)."""
        index = index.long().argmax(-1, keepdim=True)
        return tensor_to_index.gather(-1, index.expand(*tensor_to_index.shape[:-1], 1))

    def to_categorical(self, value: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        return value.long().argmax(-1)

    def to_categorical_spec(self) -> Categorical:
        return Categorical(self.n, shape=self.shape[:-1], device=self.device)

    def to_one_hot(self, value: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        return value

    def to_one_hot_spec(self) -> OneHot:
        return self


class Binary(TensorSpec):
    """Boolean flags (done, terminated, truncated)."""

    domain = "discrete"

    def __init__(self, n: int | None = None, shape=None, dtype=torch.bool, device="cpu"):
        if shape is None:
            shape = (1,) if n is None else (n,)
        elif n is not None and tuple(shape)[-1:] != (n,):
            raise ValueError(f"Binary: the last dim of shape must be n={n}, got shape={tuple(shape)}")
        super().__init__(shape, dtype, device)

    @property
    def n(self) -> int:
        return self.shape[-1]

    def rand(self, shape=None, generator=None) -> torch.Tensor:
        u = torch.rand((*(shape or ()), *self.shape), device=self.device, generator=generator)
        return (u < 0.5).to(self.dtype)


class Composite:
    """A mapping of keys to specs, with the batch shape they share.

    An entry may be None (TorchRL's modules set one for an output without a spec).

    Examples:
        >>> from reap.specs import Composite, Unbounded
        >>> spec = Composite(observation=Unbounded(shape=(3,)))
        >>> spec.zero()["observation"].shape
        torch.Size([3])
    """

    def __init__(self, specs: dict | None = None, *, shape=(), device=None, **kwargs):
        self.shape = torch.Size(shape)
        self.device = None if device is None else torch.device(device)
        self._specs: dict[str, TensorSpec | Composite | None] = {**(specs or {}), **kwargs}

    def __getitem__(self, key):
        if isinstance(key, tuple):
            node = self
            for part in key:
                node = node[part]
            return node
        return self._specs[key]

    def __setitem__(self, key, spec) -> None:
        self._specs[key] = spec

    def set(self, key, spec) -> Composite:
        self[key] = spec
        return self

    def __delitem__(self, key) -> None:
        del self._specs[key]

    def __contains__(self, key) -> bool:
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def is_empty(self) -> bool:
        return not self._specs

    def keys(self, include_nested: bool = False, leaves_only: bool = False, *, is_leaf=None):
        """Keys, like TorchRL's (``include_nested`` yields tuples for nested composites).

        ``is_leaf`` is taken for TorchRL's signature: the leaves here are always the leaf specs.
        """
        if not include_nested and not leaves_only:
            return self._specs.keys()
        out = []
        for key, spec in self._specs.items():
            if isinstance(spec, Composite):
                if not leaves_only:
                    out.append(key)
                if include_nested:
                    out.extend((key, *(sub if isinstance(sub, tuple) else (sub,)))
                               for sub in spec.keys(True, leaves_only))
            else:
                out.append(key)
        return out

    def items(self, include_nested: bool = False, leaves_only: bool = False, *, is_leaf=None):
        if not include_nested and not leaves_only:
            return self._specs.items()
        return [(key, self[key]) for key in self.keys(include_nested, leaves_only)]

    def values(self, include_nested: bool = False, leaves_only: bool = False, *, is_leaf=None):
        if not include_nested and not leaves_only:
            return self._specs.values()
        return [self[key] for key in self.keys(include_nested, leaves_only)]

    def get(self, key, default=None):
        return self[key] if key in self else default

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _map(self, fn, shape=None) -> Composite:
        """A Composite of ``fn(spec)`` for every entry (None entries stay None)."""
        specs = {k: None if v is None else fn(v) for k, v in self._specs.items()}
        return Composite(specs, shape=self.shape if shape is None else shape, device=self.device)

    def is_in(self, value: TensorDictBase) -> bool:
        """Whether every entry of ``value`` named by this spec is in its leaf spec."""
        return all(key in value.keys() and spec.is_in(value.get(key))
                   for key, spec in self._specs.items() if spec is not None)

    def expand(self, *shape) -> Composite:
        """This Composite with batch shape ``shape`` (its entries' own dims kept), as TorchRL's."""
        shape = _size(shape)
        if len(shape) < self.ndim or shape[len(shape) - self.ndim:] != self.shape:
            raise ValueError(
                f"Composite.expand: the new shape {tuple(shape)} must end with the Composite's "
                f"shape {tuple(self.shape)}; to add batch dims, pass expand(*batch, *spec.shape)"
            )
        return self._map(lambda v: v.expand(*shape, *v.shape[self.ndim:]), shape)

    def clone(self) -> Composite:
        return self._map(lambda v: v.clone())

    def to(self, dest) -> Composite:
        out = self._map(lambda v: v.to(dest))
        if not isinstance(dest, torch.dtype):
            out.device = torch.device(dest)
        return out

    def unbatch(self, ndim: int) -> Composite:
        """The same specs without their ``ndim`` leading (batch) dimensions."""
        return self._map(lambda v: v.unbatch(ndim), self.shape[ndim:])

    def to_torchrl(self):
        """The equivalent TorchRL ``Composite`` (needs TorchRL installed)."""
        return _torchrl_specs().Composite(
            {k: None if v is None else v.to_torchrl() for k, v in self._specs.items()}, shape=self.shape
        )

    def __eq__(self, other) -> bool:
        if _is_torchrl(other):
            return self.to_torchrl() == other
        return isinstance(other, Composite) and self.shape == other.shape and self._specs == other._specs

    __hash__ = None

    def zero(self, shape=None) -> TensorDict:
        """A TensorDict of zeros; leaf specs already carry the batch dims."""
        shape = () if shape is None else tuple(shape)
        return TensorDict(
            {k: v.zero(shape) for k, v in self._specs.items() if v is not None},
            batch_size=(*shape, *self.shape),
        )

    def rand(self, shape=None, generator=None) -> TensorDict:
        shape = () if shape is None else tuple(shape)
        return TensorDict(
            {k: v.rand(shape, generator) for k, v in self._specs.items() if v is not None},
            batch_size=(*shape, *self.shape),
        )

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._specs.items())
        return f"Composite({inner}, shape={tuple(self.shape)})"
