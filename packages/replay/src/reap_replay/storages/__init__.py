"""Storages: where a replay buffer keeps its items.

* :class:`ListStorage`: a Python list, any objects.
* :class:`LazyStackStorage`: the same, read back as a lazy stack (items of different shapes).
* :class:`LazyTensorStorage`: tensors (or a TensorDict of tensors) allocated on the first write,
  ``max_size`` rows along the first dimension, on ``device``.
* :class:`LazyMemmapStorage`: the same on memory-mapped files (tensordict
  ``MemoryMappedTensor``) in ``scratch_dir``; a new process can reopen them with
  :meth:`LazyMemmapStorage.open` and sees every write that completed.

Examples:
    >>> import torch
    >>> storage = LazyTensorStorage(4)
    >>> storage.set(slice(0, 3), torch.arange(3))
    >>> len(storage), storage.get(torch.tensor([2, 0])).tolist()
    (3, [2, 0])
"""

from reap_replay.storages.base import Storage
from reap_replay.storages.lazy_stack import LazyStackStorage
from reap_replay.storages.lists import ListStorage
from reap_replay.storages.memmap import LazyMemmapStorage
from reap_replay.storages.tensor import LazyTensorStorage, TensorStorage

__all__ = ["LazyMemmapStorage", "LazyStackStorage", "LazyTensorStorage", "ListStorage", "Storage", "TensorStorage"]
