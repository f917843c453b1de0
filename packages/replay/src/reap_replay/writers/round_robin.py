""":class:`RoundRobinWriter`: a ring; the oldest item is overwritten once the storage is full."""

from __future__ import annotations

import torch

from reap_replay.writers.base import Writer, _batch_len


class RoundRobinWriter(Writer):
    """Writes each new item at the cursor, wrapping around once the storage is full.

    ``extend`` of ``n`` rows writes one or two contiguous slices (no per-item work); when
    ``n > max_size`` only the last ``max_size`` rows survive, and the returned index still has
    one entry per row, as in TorchRL.

    Args:
        compilable (bool): accepted for TorchRL compatibility.

    Examples:
        >>> from reap_replay.storages import LazyTensorStorage
        >>> w = RoundRobinWriter()
        >>> w.register_storage(LazyTensorStorage(4))
        >>> w.add(torch.tensor(7)), w.extend(torch.arange(2)).tolist()
        (0, [1, 2])
    """

    def __init__(self, compilable: bool = False, *, track_generations: bool = False):
        super().__init__()
        if track_generations:
            raise NotImplementedError("track_generations=True is not supported by reap-replay")

    def add(self, data) -> int:
        storage = self._storage
        index = self._cursor
        if storage.max_size is None:  # unbounded ListStorage
            index = len(storage)
        storage.set(index, data)
        self._write_count += 1
        if storage.max_size is None:
            self._cursor = index + 1
        else:
            self._cursor = (index + 1) % storage._max_rows
        self._done()
        return index

    def extend(self, data) -> torch.Tensor:
        storage = self._storage
        n = _batch_len(data)
        max_size = storage.max_size
        device = getattr(storage, "device", None) or "cpu"
        if max_size is None:
            start = len(storage)
            index = torch.arange(start, start + n)
            storage.set(index, data)
            self._cursor = start + n
            self._write_count += n
            self._done()
            return index
        start = self._cursor
        if n == 0:
            return torch.zeros(0, dtype=torch.long, device=device)
        rows = storage._checked(data)  # the whole batch, before any part of it is written
        max_size = storage._max_rows  # known once the (lazy) storage holds data
        index = torch.arange(start, start + n, device=device) % max_size
        if n > max_size:  # only the last max_size rows survive
            skip = n - max_size
            rows = rows[skip:]
            first = (start + skip) % max_size
            n_write = max_size
        else:
            first, n_write = start, n
        end = first + n_write
        if end <= max_size:
            storage._write(slice(first, end), rows)
        else:
            # the wrapped head first: a ListStorage grows one item at a time, and before the head
            # is written, an empty one has no room for a tail that starts past its end
            split = max_size - first
            storage._write(slice(0, end - max_size), rows[split:])
            storage._write(slice(first, max_size), rows[:split])
        self._cursor = (start + n) % max_size
        self._write_count += n
        self._done()
        return index


TensorDictRoundRobinWriter = RoundRobinWriter
