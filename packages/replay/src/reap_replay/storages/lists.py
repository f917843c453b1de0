""":class:`ListStorage`: a Python list of any objects."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from reap_replay.storages.base import Storage, _check_max_size


class ListStorage(Storage):
    """A storage backed by a Python list: holds any object.

    Args:
        max_size (int, optional): how many items it holds. ``None`` (the default): no limit.

    Keyword Args:
        device: accepted for TorchRL compatibility; items are stored as given.
        compilable (bool): accepted for TorchRL compatibility.

    Examples:
        >>> s = ListStorage(3)
        >>> s.set(torch.tensor([0, 1]), ["a", {"b": 1}])
        >>> len(s), s.get(1)
        (2, {'b': 1})
    """

    def __init__(self, max_size: int | None = None, *, compilable: bool = False, device=None):
        super().__init__(_check_max_size(max_size, allow_none=True))
        self.device = device
        self._storage: list = []

    def set(self, index, data) -> None:
        if isinstance(index, slice):
            index = range(*index.indices(index.stop))
        elif isinstance(index, torch.Tensor):
            if index.ndim == 0:
                index = int(index)
            else:
                index = index.tolist()
        if isinstance(index, int):
            self._set_one(index, data)
            return
        if isinstance(data, (torch.Tensor, TensorDictBase)):
            items = data.unbind(0)
        else:
            items = list(data)
        if len(items) != len(index):
            raise ValueError(f"got {len(items)} items for {len(index)} indices")
        for i, item in zip(index, items):
            self._set_one(i, item)

    def _set_one(self, i: int, item) -> None:
        if i < len(self._storage):
            self._storage[i] = item
        elif i == len(self._storage):
            self._storage.append(item)
        else:
            raise IndexError(f"cannot write at {i}: the storage holds {len(self._storage)} items")
        self._len = len(self._storage)

    def get(self, index):
        if isinstance(index, int):
            return self._storage[index]
        if isinstance(index, slice):
            return self._storage[index]
        index = torch.as_tensor(index)
        if index.ndim == 0:
            return self._storage[int(index)]
        return [self._storage[i] for i in index.reshape(-1).tolist()]

    def state_dict(self) -> dict:
        return {"_storage": list(self._storage), "_len": self._len}

    def load_state_dict(self, state_dict: dict) -> None:
        self._storage = list(state_dict["_storage"])
        self._len = int(state_dict["_len"])

    def _empty(self) -> None:
        super()._empty()
        self._storage = []

    def __repr__(self) -> str:
        return f"ListStorage(max_size={self.max_size}, len={len(self)})"
