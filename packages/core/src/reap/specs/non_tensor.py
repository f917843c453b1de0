"""``NonTensor``: an entry that is not a tensor (a string, an object), TorchRL's spec for it.

Its values are tensordict's ``NonTensorData`` (one object for the spec's whole shape) or, once
stacked, ``NonTensorStack``. ``rand()`` and ``zero()`` give ``example_data``; any non-tensor
value of the spec's shape is in it. Envs with such entries are collected one TensorDict per
step (``collector.path == "tensordict"``): the array path holds tensors only.

Examples:
    >>> from reap.specs import Composite, NonTensor
    >>> spec = Composite(text=NonTensor(shape=(), example_data="hello"))
    >>> spec.zero()["text"]
    'hello'
    >>> spec["text"].expand(3).rand().batch_size
    torch.Size([3])
"""

from __future__ import annotations

from typing import Any

from tensordict import NonTensorData, lazy_stack, set_capture_non_tensor_stack
from tensordict.utils import is_non_tensor

from reap.specs.base import TensorSpec, _size, _torchrl_data
from reap.specs.choice import Choice


class NonTensor(TensorSpec):
    """A non-tensor entry of shape ``shape`` (default ``(1,)``, as TorchRL's); ``dtype`` is None
    unless given, ``example_data`` is what ``rand``/``zero``/``one`` return.

    The last ``feature_dims`` dims (default: all of ``shape``; none if ``batched``) hold one
    object; values over the dims before them (and a leading ``shape`` given to ``rand``) are
    ``NonTensorStack``s of it, as TorchRL's. ``expand`` keeps ``feature_dims``.
    """

    def __init__(self, shape=(1,), device=None, dtype=None, example_data: Any = None,
                 batched: bool | None = None, feature_dims: int | None = None, **kwargs):
        if kwargs:
            raise TypeError(f"NonTensor got unexpected keyword arguments {sorted(kwargs)}")
        if batched is not None and feature_dims is not None:
            raise ValueError("NonTensor: give batched or feature_dims, not both")
        super().__init__(_size(shape), None, device, dtype, "")
        self.dtype = dtype  # None stays None (not a tensor)
        self.example_data = example_data
        self.batched = bool(batched)
        self.feature_dims = (0 if batched else len(self.shape)) if feature_dims is None else feature_dims

    def _new(self, shape, *, device=None, dtype=None):
        return NonTensor(shape=shape, device=device or self.device, dtype=dtype or self.dtype,
                         example_data=self.example_data, feature_dims=self.feature_dims)

    def _value(self, shape=None):
        total = (*_size(shape or ()), *self._safe_shape)
        features = 0 if self.batched else self.feature_dims
        split = len(total) - features if features else len(total)
        value = NonTensorData(data=self.example_data, batch_size=total[split:] if features else total,
                              device=self.device)
        with set_capture_non_tensor_stack(False):
            for size in reversed(total[:split] if features else ()):
                value = lazy_stack([value.copy() for _ in range(size)])
        return value

    def rand(self, shape=None, *, generator=None):
        return self._value(shape)

    def zero(self, shape=None):
        return self._value(shape)

    def one(self, shape=None):
        return self._value(shape)

    def is_in(self, val) -> bool:
        """A non-tensor value (or a plain object) whose shape ends with the spec's."""
        if not is_non_tensor(val):
            return not hasattr(val, "shape")  # a plain Python object
        shape = tuple(val.batch_size)
        return shape[len(shape) - len(self.shape):] == tuple(self.shape) if self.shape else True

    def _project(self, val):
        return val

    def encode(self, val, *, ignore_device: bool = False):
        return val if is_non_tensor(val) else NonTensorData(data=val, batch_size=self.shape)

    def to_numpy(self, val, safe: bool | None = None):
        return val.tolist() if is_non_tensor(val) else val

    def cardinality(self) -> int:
        raise RuntimeError("Cannot enumerate a NonTensor spec.")

    def enumerate(self, use_mask: bool = False):
        raise RuntimeError("Cannot enumerate a NonTensor spec.")

    def _eq(self, other) -> bool:
        return (isinstance(other, NonTensor) and (self.shape, self.device, self.dtype) ==
                (other.shape, other.device, other.dtype) and self.example_data == other.example_data)

    def __repr__(self) -> str:
        return (f"NonTensor(\n    shape={self.shape},\n    device={self.device},\n    dtype={self.dtype},\n"
                f"    example_data={self.example_data})")

    def to_torchrl(self):
        return _torchrl_data().NonTensor(shape=self.shape, device=self.device, dtype=self.dtype,
                                         example_data=self.example_data, feature_dims=self.feature_dims)


def holds_non_tensor(spec: TensorSpec) -> bool:
    """Whether values of ``spec`` are not tensors: a ``NonTensor``, or a ``Choice`` of non-tensor values."""
    return isinstance(spec, NonTensor) or (isinstance(spec, Choice) and spec.dtype is None)


def spec_of_non_tensor(value) -> NonTensor:
    """The ``NonTensor`` spec of non-tensor data (its shape; its first item as the example), as
    TorchRL's spec helpers build it.

    Examples:
        >>> from tensordict import NonTensorData
        >>> spec_of_non_tensor(NonTensorData("hi", batch_size=[2])).example_data
        'hi'
    """
    data = value.tolist()
    while isinstance(data, list) and data:
        data = data[0]
    return NonTensor(shape=value.batch_size, device=value.device, example_data=data)


__all__ = ["NonTensor"]
