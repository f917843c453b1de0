"""A TensorDict of fixed keys, shapes and dtypes packed into one byte buffer, and back.

gloo moves one tensor per message; a batch or a policy's weights travel as one ``uint8``
buffer whose layout both ends know (the driver learns a batch's layout from the worker's first
batch, and the weights' layout from the worker's policy). The first 8 bytes are a header: 0
for data, 1 when the sender failed instead (its error waits in the store).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"a": torch.arange(3), ("b", "c"): torch.ones(3, 2, dtype=torch.bool)}, [3])
    >>> layout = FlatLayout.of(td)
    >>> buf = layout.empty()
    >>> layout.pack(td, buf)
    >>> out = layout.unpack(buf)
    >>> out["a"].tolist(), out["b", "c"].dtype, layout.status(buf)
    ([0, 1, 2], torch.bool, 0)
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

HEADER = 8
_ALIGN = 16


class FlatLayout:
    """Where each leaf of a TensorDict lives in a flat ``uint8`` buffer."""

    def __init__(self, entries: list[tuple], batch_size: torch.Size, nbytes: int):
        self.entries = entries  # (key, shape, dtype, offset, nbytes)
        self.batch_size = torch.Size(batch_size)
        self.nbytes = nbytes

    @classmethod
    def of(cls, td: TensorDictBase) -> FlatLayout:
        """The layout of ``td``'s tensor leaves (any device, the meta device included)."""
        entries, offset = [], HEADER
        for key, value in sorted(td.items(include_nested=True, leaves_only=True), key=lambda kv: str(kv[0])):
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{key!r} is a {type(value).__name__}; only tensors can be sent over gloo")
            n = value.numel() * value.element_size()
            entries.append((key, tuple(value.shape), value.dtype, offset, n))
            offset += -(-n // _ALIGN) * _ALIGN
        return cls(entries, td.batch_size, offset)

    def empty(self) -> torch.Tensor:
        return torch.zeros(self.nbytes, dtype=torch.uint8)

    def _view(self, buf: torch.Tensor, shape, dtype, offset: int, n: int) -> torch.Tensor:
        return buf[offset:offset + n].view(dtype).view(shape)

    def pack(self, td: TensorDictBase, buf: torch.Tensor) -> None:
        """Copy ``td`` (same keys, shapes, dtypes) into ``buf``, header 0."""
        buf[:HEADER].view(torch.int64).fill_(0)
        for key, shape, dtype, offset, n in self.entries:
            value = td.get(key)
            if tuple(value.shape) != shape or value.dtype != dtype:
                raise ValueError(f"{key!r} is {tuple(value.shape)} {value.dtype}; the layout says {shape} {dtype}")
            self._view(buf, shape, dtype, offset, n).copy_(value)

    def unpack(self, buf: torch.Tensor) -> TensorDict:
        """A TensorDict of views into ``buf`` (clone it to keep it past the next message)."""
        out = TensorDict({}, batch_size=self.batch_size)
        for key, shape, dtype, offset, n in self.entries:
            out.set(key, self._view(buf, shape, dtype, offset, n))
        return out

    @staticmethod
    def status(buf: torch.Tensor) -> int:
        return int(buf[:HEADER].view(torch.int64)[0])

    @staticmethod
    def mark_failed(buf: torch.Tensor) -> None:
        buf[:HEADER].view(torch.int64).fill_(1)
