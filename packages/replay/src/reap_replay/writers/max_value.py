""":class:`TensorDictMaxValueWriter`: keeps the items with the highest rank."""

from __future__ import annotations

import torch
from tensordict import is_tensor_collection

from reap_replay.storages.base import _spawning
from reap_replay.writers.base import Writer


def _check_collection(data) -> None:
    if not is_tensor_collection(data):
        raise RuntimeError(
            "TensorDictMaxValueWriter expects data to be a tensor collection (tensordict or "
            f"tensorclass). Found a {type(data).__name__} instead: use a RoundRobinWriter for other "
            "data."
        )


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
        if storage.ndim > 1:
            raise ValueError(
                "TensorDictMaxValueWriter is not compatible with storages with more than one "
                "dimension: store each trajectory as one item (ndim=1) to rank trajectories"
            )
        super().register_storage(storage)
        self._ranks = torch.full((storage.max_size,), float("-inf"), dtype=torch.float64)
        self._written = torch.zeros(storage.max_size, dtype=torch.bool)

    def _rank(self, data) -> torch.Tensor:
        _check_collection(data)
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
        _check_collection(data)
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

    def __getstate__(self) -> dict:
        if _spawning():
            raise RuntimeError(
                "TensorDictMaxValueWriter cannot be shared between processes: its ranks live in "
                "this process. Keep the buffer in one process"
            )
        return self.__dict__
