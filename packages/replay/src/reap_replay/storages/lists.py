""":class:`ListStorage`: a Python list of any objects."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase

from reap_replay.storages.base import Storage, _as_index, _check_max_size, _spawning


class ListStorage(Storage):
    """A storage backed by a Python list: holds any object.

    Args:
        max_size (int, optional): how many items it holds. ``None`` (the default): no limit.

    Keyword Args:
        device (optional): items that have a ``.to`` are moved there when written; ``None``
            (the default) stores them as given.
        compilable (bool): accepted for TorchRL compatibility (a list needs nothing).

    A ``ListStorage`` cannot be sent to another process with its buffer (a list is not shared
    memory): that raises, as in TorchRL; use a ``LazyTensorStorage`` or ``LazyMemmapStorage``.

    Examples:
        >>> s = ListStorage(3)
        >>> s.set(torch.tensor([0, 1]), ["a", {"b": 1}])
        >>> len(s), s.get(1), s.get([1, 0])
        (2, {'b': 1}, [{'b': 1}, 'a'])
    """

    def __init__(self, max_size: int | None = None, *, compilable: bool = False, device=None):
        super().__init__(_check_max_size(max_size, allow_none=True))
        self.device = device
        self._storage: list = []

    def set(self, index, data) -> None:
        """Writes ``data`` at ``index``: one item at an int, else one item per index (``data``
        a list, tuple, range, array, tensor or TensorDict along its first dimension)."""
        index = _as_index(index)
        if isinstance(index, torch.Tensor) and index.ndim == 0:
            index = int(index)
        if isinstance(index, int):
            self._set_one(index, data)
            return
        if isinstance(index, slice):
            index = range(*index.indices(max(len(self._storage), index.stop or 0)))
        else:
            index = index.reshape(-1).tolist()
        if isinstance(data, (torch.Tensor, TensorDictBase)):
            items = data.unbind(0)
        elif isinstance(data, (list, tuple, range, set, np.ndarray)):
            items = list(data)
        else:
            raise TypeError(
                f"Cannot extend a ListStorage with data of type {type(data).__name__}. Provide a "
                "list, tuple, set, range, np.ndarray, tensor or tensordict instead."
            )
        if len(items) != len(index):
            raise ValueError(f"got {len(items)} items for {len(index)} indices")
        for i, item in zip(index, items):
            self._set_one(i, item)

    def _set_one(self, i: int, item) -> None:
        n = len(self._storage)
        if i > n:
            raise RuntimeError(
                "Cannot append data located more than one item away from the storage size: the "
                f"storage size is {n} and the index of the item to be set is {i}."
            )
        if self.max_size is not None and i >= self.max_size:
            raise RuntimeError(
                f"Cannot append data to the list storage: maximum capacity is {self.max_size} "
                f"and the index of the item to be set is {i}."
            )
        if self.device is not None and hasattr(item, "to"):
            item = item.to(self.device)
        self._revision += 1
        if i < n:
            self._storage[i] = item
        else:
            self._storage.append(item)
            self._len = n + 1

    def get(self, index):
        """The item at an int; a list of items at a slice, a list, a range or a tensor."""
        if isinstance(index, tuple):
            if len(index) != 1:
                raise RuntimeError("ListStorage can only be indexed with one-length tuples.")
            index = index[0]
        index = _as_index(index)
        if isinstance(index, torch.Tensor) and index.ndim == 0:
            index = int(index)
        if isinstance(index, (int, slice)):
            return self._storage[index]
        return [self._storage[i] for i in index.reshape(-1).tolist()]

    def state_dict(self) -> dict:
        return {"_storage": list(self._storage), "_len": self._len}

    def load_state_dict(self, state_dict: dict) -> None:
        self._storage = list(state_dict["_storage"])
        self._len = len(self._storage)
        self._revision += 1

    def _empty(self) -> None:
        super()._empty()
        self._storage = []

    def __getstate__(self) -> dict:
        if _spawning():
            raise RuntimeError(
                "Cannot share a storage of type ListStorage between processes: its items are "
                "a Python list. Use a LazyTensorStorage or LazyMemmapStorage to share a buffer."
            )
        return self.__dict__

    def __repr__(self) -> str:
        return f"ListStorage(max_size={self.max_size}, len={len(self)})"
