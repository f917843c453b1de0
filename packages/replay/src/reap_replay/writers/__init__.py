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

from reap_replay.writers.base import Writer
from reap_replay.writers.max_value import TensorDictMaxValueWriter
from reap_replay.writers.round_robin import RoundRobinWriter, TensorDictRoundRobinWriter

__all__ = ["RoundRobinWriter", "TensorDictMaxValueWriter", "TensorDictRoundRobinWriter", "Writer"]
