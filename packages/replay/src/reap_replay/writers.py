"""Writers: where in the storage each new item goes.

* :class:`RoundRobinWriter`: a ring; the oldest item is overwritten once the storage is full.
* :class:`TensorDictMaxValueWriter`: keeps the ``max_size`` items with the highest rank.

Examples:
    >>> import torch
    >>> from reap_replay.storages import LazyTensorStorage
    >>> w = RoundRobinWriter()
    >>> w.register_storage(LazyTensorStorage(3))
    >>> w.extend(torch.arange(4)).tolist()
    [0, 1, 2, 0]
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

__all__ = ["RoundRobinWriter", "TensorDictMaxValueWriter", "TensorDictRoundRobinWriter", "Writer"]


def _batch_len(data) -> int:
    if isinstance(data, (torch.Tensor, TensorDictBase)):
        if data.ndim == 0:
            raise ValueError("extend() needs data with a leading batch dimension; use add()")
        return data.shape[0]
    return len(data)


class Writer:
    """Base class of writers: ``add``, ``extend``, a cursor and a write count.

    Examples:
        >>> isinstance(RoundRobinWriter(), Writer)
        True
    """

    def __init__(self):
        self._storage = None
        self._cursor = 0
        self._write_count = 0

    def register_storage(self, storage) -> None:
        self._storage = storage
        restored = storage._restored_progress()
        if restored is not None:
            self._cursor = int(restored["cursor"])
            self._write_count = int(restored["write_count"])

    def _empty(self, empty_write_count: bool = True) -> None:
        self._cursor = 0
        if empty_write_count:
            self._write_count = 0

    def state_dict(self) -> dict:
        return {"_cursor": self._cursor, "_write_count": self._write_count}

    def load_state_dict(self, state_dict: dict) -> None:
        self._cursor = int(state_dict["_cursor"])
        self._write_count = int(state_dict["_write_count"])

    def _check_state(self, state_dict: dict, storage_len: int) -> None:
        """Raises (KeyError, ValueError) if ``state_dict`` does not fit a storage holding
        ``storage_len`` rows; ``load_state_dict`` of a checked state cannot fail."""
        cursor, count = state_dict["_cursor"], state_dict["_write_count"]
        for name, value in (("_cursor", cursor), ("_write_count", count)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r} is not a non-negative integer")
        max_size = self._storage.max_size
        if max_size is not None and cursor >= max_size:
            raise ValueError(f"_cursor={cursor} is past max_size={max_size}")
        if (max_size is None or storage_len < max_size) and cursor > storage_len:
            raise ValueError(
                f"_cursor={cursor} is past the {storage_len} stored rows: the next write would "
                "leave rows never written in between"
            )

    def _done(self) -> None:
        self._storage._record_progress(self._cursor, self._write_count)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cursor={self._cursor}, write_count={self._write_count})"


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
            self._cursor = (index + 1) % storage.max_size
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
        index = torch.arange(start, start + n, device=device) % max_size
        if n == 0:
            return index
        rows = storage._checked(data)  # the whole batch, before any part of it is written
        if n > max_size:  # only the last max_size rows survive
            skip = n - max_size
            rows = rows[skip:]
            first = (start + skip) % max_size
            n_write = max_size
        else:
            first, n_write = start, n
        end = first + n_write
        if not isinstance(data, (torch.Tensor, TensorDictBase)):
            storage._write(index[n - n_write :], rows)
        elif end <= max_size:
            storage._write(slice(first, end), rows)
        else:
            split = max_size - first
            storage._write(slice(first, max_size), rows[:split])
            storage._write(slice(0, end - max_size), rows[split:])
        self._cursor = (start + n) % max_size
        self._write_count += n
        self._done()
        return index


TensorDictRoundRobinWriter = RoundRobinWriter


class TensorDictMaxValueWriter(Writer):
    """Keeps the ``max_size`` items with the highest ``rank_key`` value.

    While the storage has room, items fill it in order; then an item replaces the lowest-ranked
    stored item only if its rank is strictly higher. Items not written get index ``-1`` (``add``
    returns ``None``). A rank with more than one element per item is reduced with ``reduction``.

    Args:
        rank_key (NestedKey, optional): the entry to rank by. Defaults to ``("next", "reward")``.
        reduction (str): ``"sum"``, ``"mean"``, ``"max"``, ``"min"`` or ``"median"``.

    Examples:
        >>> from tensordict import TensorDict
        >>> from reap_replay.storages import LazyTensorStorage
        >>> w = TensorDictMaxValueWriter(rank_key="r")
        >>> w.register_storage(LazyTensorStorage(2))
        >>> w.extend(TensorDict({"r": torch.tensor([1.0, 5.0])}, [2])).tolist()
        [0, 1]
        >>> w.extend(TensorDict({"r": torch.tensor([3.0, 0.0])}, [2])).tolist()
        [0, -1]
    """

    _REDUCTIONS = ("sum", "mean", "max", "min", "median")

    def __init__(self, rank_key=None, reduction: str = "sum", **kwargs):
        super().__init__()
        if reduction not in self._REDUCTIONS:
            raise ValueError(f"reduction must be one of {self._REDUCTIONS}, got reduction={reduction!r}")
        self._rank_key = ("next", "reward") if rank_key is None else rank_key
        self._reduction = reduction
        self._ranks = None

    def register_storage(self, storage) -> None:
        super().register_storage(storage)
        self._ranks = torch.full((storage.max_size,), float("-inf"), dtype=torch.float64)
        self._written = torch.zeros(storage.max_size, dtype=torch.bool)

    def _rank(self, data) -> torch.Tensor:
        if not isinstance(data, TensorDictBase):
            raise TypeError("TensorDictMaxValueWriter writes TensorDicts only")
        rank = data.get(self._rank_key, None)
        if rank is None:
            raise KeyError(f"the data has no rank entry {self._rank_key!r} (rank_key)")
        rank = rank.reshape(data.shape[0], -1).to(torch.float64)
        if rank.shape[1] == 1:
            return rank[:, 0]
        if self._reduction == "median":
            return rank.median(1).values
        if self._reduction in ("max", "min"):
            return getattr(rank, "a" + self._reduction)(1)
        return getattr(rank, self._reduction)(1)

    def add(self, data):
        index = self.extend(data.unsqueeze(0))
        i = int(index[0])
        return None if i < 0 else i

    def extend(self, data) -> torch.Tensor:
        storage = self._storage
        rank = self._rank(data).cpu()
        n = rank.shape[0]
        if n:
            data = storage._checked(data)  # the whole batch, before any part of it is written
        max_size = storage.max_size
        index = torch.full((n,), -1, dtype=torch.long)
        # While there is room, items fill the free slots in order, whatever their rank.
        free = torch.nonzero(~self._written).squeeze(1)
        n_free = min(free.numel(), n)
        if n_free:
            slots = free[:n_free]
            self._write(data[:n_free], rank[:n_free], slots)
            index[:n_free] = slots
        if n > n_free:
            # Full: keep the top max_size of stored + remaining; stored items win ties.
            candidates = torch.cat([self._ranks, rank[n_free:]])
            top = torch.sort(candidates, descending=True, stable=True).indices[:max_size]
            chosen = torch.sort(top[top >= max_size]).values - max_size + n_free
            if chosen.numel():
                kept = torch.zeros(max_size, dtype=torch.bool)
                kept[top[top < max_size]] = True
                slots = torch.nonzero(~kept).squeeze(1)
                self._write(data[chosen], rank[chosen], slots)
                index[chosen] = slots
        self._cursor = int(self._written.sum()) % max_size
        self._done()
        return index

    def _write(self, data, rank, slots) -> None:
        self._storage._write(slots, data)
        self._ranks[slots] = rank
        self._written[slots] = True
        self._write_count += int(slots.numel())

    def _empty(self, empty_write_count: bool = True) -> None:
        super()._empty(empty_write_count)
        if self._ranks is not None:
            self._ranks.fill_(float("-inf"))
            self._written.fill_(False)

    def state_dict(self) -> dict:
        out = super().state_dict()
        out["_ranks"] = self._ranks
        out["_written"] = self._written
        return out

    def _check_state(self, state_dict: dict, storage_len: int) -> None:
        super()._check_state(state_dict, storage_len)
        ranks, written = state_dict.get("_ranks"), state_dict.get("_written")
        if ranks is None and written is None:
            return
        size = (self._storage.max_size,)
        for name, value, dtype in (("_ranks", ranks, torch.float64), ("_written", written, torch.bool)):
            if not isinstance(value, torch.Tensor) or value.shape != size or value.dtype != dtype:
                raise ValueError(f"{name} is not a {dtype} tensor of shape {list(size)}")

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        if state_dict.get("_ranks") is not None:
            self._ranks = state_dict["_ranks"].clone()
            self._written = state_dict["_written"].clone()
