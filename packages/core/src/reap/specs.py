"""Tensor specs: shape, dtype and domain of what an environment reads and writes.

The names follow TorchRL (``Unbounded``, ``Bounded``, ``Categorical``, ``Binary``, ``Composite``);
shapes include the environment's batch dimensions.

Examples:
    >>> import torch
    >>> from reap.specs import Bounded
    >>> spec = Bounded(low=-2.0, high=2.0, shape=(1,))
    >>> spec.is_in(spec.rand())
    True
    >>> spec.space.high
    tensor([2.])

TorchRL's ``ProbabilisticActor(spec=env.action_spec, ...)`` takes a reap spec as it is; modules
that type-check their spec (``SafeModule``, ``safe=True``) take ``spec.to_torchrl()``.
"""

from __future__ import annotations

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
    """The domain of a ``Categorical`` spec: ``n`` values, ``0`` to ``n - 1``."""

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


class TensorSpec:
    """Base of the leaf specs: a shape, a dtype and a device."""

    def __init__(self, shape=(), dtype=torch.float32, device="cpu"):
        self.shape = torch.Size(shape)
        self.dtype = dtype
        self.device = torch.device(device)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def space(self):
        """The domain (TorchRL's ``spec.space``); None when unbounded."""
        return None

    def clone(self) -> TensorSpec:
        return self.expand()

    def to(self, dest) -> TensorSpec:
        """The same spec on device ``dest`` (a dtype changes the dtype), as TorchRL's ``spec.to``."""
        clone = self.clone()
        if isinstance(dest, torch.dtype):
            clone.dtype = dest
            for name in ("low", "high"):
                if hasattr(clone, name):
                    setattr(clone, name, getattr(clone, name).to(dest))
            return clone
        clone.device = torch.device(dest)
        for name in ("low", "high"):
            if hasattr(clone, name):
                setattr(clone, name, getattr(clone, name).to(clone.device))
        return clone

    def unbatch(self, ndim: int) -> TensorSpec:
        """The same spec without its ``ndim`` leading (batch) dimensions."""
        clone = self.expand()
        clone.shape = self.shape[ndim:]
        return clone

    def to_torchrl(self):
        """The equivalent TorchRL spec, for TorchRL modules that type-check theirs.

        ``SafeModule(..., spec=env.action_spec.to_torchrl(), safe=True)``. Needs TorchRL installed.
        """
        specs = _torchrl_specs()
        return getattr(specs, type(self).__name__)(shape=self.shape, dtype=self.dtype, device=self.device)

    def __eq__(self, other) -> bool:
        if type(other) is not type(self) or (self.shape, self.dtype, self.device) != (
            other.shape, other.dtype, other.device
        ):
            return False
        space, other_space = self.space, other.space
        if isinstance(space, ContinuousBox):
            return torch.equal(space.low, other_space.low) and torch.equal(space.high, other_space.high)
        return space == other_space

    __hash__ = None

    def zero(self, shape=()) -> torch.Tensor:
        """A tensor of zeros with batch dims ``shape`` prepended."""
        shape = () if shape is None else tuple(shape)
        return torch.zeros((*shape, *self.shape), dtype=self.dtype, device=self.device)

    def rand(self, shape=(), generator=None) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} cannot draw random values")

    def is_in(self, value: torch.Tensor) -> bool:
        """Whether ``value`` has this spec's trailing shape and dtype."""
        n = len(self.shape)
        return value.dtype == self.dtype and (n == 0 or tuple(value.shape[-n:]) == tuple(self.shape))

    def expand(self, *batch) -> TensorSpec:
        """The same spec with leading batch dimensions ``batch``."""
        if len(batch) == 1 and isinstance(batch[0], (tuple, list, torch.Size)):
            batch = tuple(batch[0])
        clone = self.__class__.__new__(self.__class__)
        clone.__dict__.update(self.__dict__)
        clone.shape = torch.Size((*batch, *self.shape))
        return clone

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={tuple(self.shape)}, dtype={self.dtype})"


class Unbounded(TensorSpec):
    """Any real (or integer) value."""

    def rand(self, shape=(), generator=None) -> torch.Tensor:
        size = (*shape, *self.shape)
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
    def space(self) -> ContinuousBox:
        return ContinuousBox(self.low, self.high)

    def expand(self, *batch) -> Bounded:
        clone = super().expand(*batch)
        clone.low = self.low.expand(clone.shape)
        clone.high = self.high.expand(clone.shape)
        return clone

    def unbatch(self, ndim: int) -> Bounded:
        clone = super().unbatch(ndim)
        index = (0,) * ndim
        clone.low, clone.high = self.low[index], self.high[index]
        return clone

    def to_torchrl(self):
        return _torchrl_specs().Bounded(
            low=self.low.clone(), high=self.high.clone(), shape=self.shape, dtype=self.dtype, device=self.device
        )

    def rand(self, shape=(), generator=None) -> torch.Tensor:
        size = (*shape, *self.shape)
        if not self.dtype.is_floating_point:
            span = (self.high - self.low + 1).to(torch.float64)
            u = torch.rand(size, dtype=torch.float64, device=self.device, generator=generator)
            return (self.low + (u * span).floor().to(self.dtype)).clamp(self.low, self.high)
        u = torch.rand(size, dtype=self.dtype, device=self.device, generator=generator)
        return self.low + u * (self.high - self.low)

    def is_in(self, value) -> bool:
        return super().is_in(value) and bool(((value >= self.low) & (value <= self.high)).all())


class Categorical(TensorSpec):
    """An integer in ``[0, n)``, stored as an index (TorchRL's ``Categorical``)."""

    def __init__(self, n: int, shape=(), dtype=torch.int64, device="cpu"):
        if n <= 0:
            raise ValueError(f"Categorical: n must be positive, got {n}")
        super().__init__(shape, dtype, device)
        self.n = int(n)

    @property
    def space(self) -> CategoricalBox:
        return CategoricalBox(self.n)

    def to_torchrl(self):
        return _torchrl_specs().Categorical(self.n, shape=self.shape, dtype=self.dtype, device=self.device)

    def rand(self, shape=(), generator=None) -> torch.Tensor:
        size = (*shape, *self.shape)
        return torch.randint(0, self.n, size, dtype=self.dtype, device=self.device, generator=generator)

    def is_in(self, value) -> bool:
        return super().is_in(value) and bool(((value >= 0) & (value < self.n)).all())


class Binary(TensorSpec):
    """Boolean flags (done, terminated, truncated)."""

    def __init__(self, shape=(1,), dtype=torch.bool, device="cpu"):
        super().__init__(shape, dtype, device)

    def rand(self, shape=(), generator=None) -> torch.Tensor:
        u = torch.rand((*shape, *self.shape), device=self.device, generator=generator)
        return (u < 0.5).to(self.dtype)


class Composite:
    """A mapping of keys to specs, with the batch shape they share.

    Examples:
        >>> from reap.specs import Composite, Unbounded
        >>> spec = Composite(observation=Unbounded(shape=(3,)))
        >>> spec.zero()["observation"].shape
        torch.Size([3])
    """

    def __init__(self, specs: dict | None = None, *, shape=(), **kwargs):
        self.shape = torch.Size(shape)
        self._specs: dict[str, TensorSpec | Composite] = {**(specs or {}), **kwargs}

    def __getitem__(self, key):
        if isinstance(key, tuple):
            node = self
            for part in key:
                node = node[part]
            return node
        return self._specs[key]

    def __setitem__(self, key, spec) -> None:
        self._specs[key] = spec

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

    def keys(self, include_nested: bool = False, leaves_only: bool = False):
        """Keys, like TorchRL's (``include_nested`` yields tuples for nested composites)."""
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

    def items(self):
        return self._specs.items()

    def values(self):
        return self._specs.values()

    def get(self, key, default=None):
        return self[key] if key in self else default

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_in(self, value: TensorDictBase) -> bool:
        """Whether every entry of ``value`` named by this spec is in its leaf spec."""
        return all(key in value.keys() and spec.is_in(value.get(key)) for key, spec in self._specs.items())

    def expand(self, *batch) -> Composite:
        if len(batch) == 1 and isinstance(batch[0], (tuple, list, torch.Size)):
            batch = tuple(batch[0])
        return Composite({k: v.expand(*batch) for k, v in self._specs.items()}, shape=(*batch, *self.shape))

    def clone(self) -> Composite:
        return Composite({k: v.clone() for k, v in self._specs.items()}, shape=self.shape)

    def to(self, dest) -> Composite:
        return Composite({k: v.to(dest) for k, v in self._specs.items()}, shape=self.shape)

    def unbatch(self, ndim: int) -> Composite:
        """The same specs without their ``ndim`` leading (batch) dimensions."""
        return Composite({k: v.unbatch(ndim) for k, v in self._specs.items()}, shape=self.shape[ndim:])

    def to_torchrl(self):
        """The equivalent TorchRL ``Composite`` (needs TorchRL installed)."""
        return _torchrl_specs().Composite(
            {k: v.to_torchrl() for k, v in self._specs.items()}, shape=self.shape
        )

    def __eq__(self, other) -> bool:
        return isinstance(other, Composite) and self.shape == other.shape and self._specs == other._specs

    __hash__ = None

    def zero(self, shape=()) -> TensorDict:
        """A TensorDict of zeros; leaf specs already carry the batch dims."""
        shape = () if shape is None else tuple(shape)
        return TensorDict(
            {k: v.zero(shape) for k, v in self._specs.items()}, batch_size=(*shape, *self.shape)
        )

    def rand(self, shape=(), generator=None) -> TensorDict:
        shape = () if shape is None else tuple(shape)
        return TensorDict(
            {k: v.rand(shape, generator) for k, v in self._specs.items()}, batch_size=(*shape, *self.shape)
        )

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self._specs.items())
        return f"Composite({inner}, shape={tuple(self.shape)})"
