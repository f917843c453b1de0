"""The base class of writers."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase, is_tensorclass
from torch.utils._pytree import tree_leaves


def _batch_len(data) -> int:
    """How many items ``data`` holds: its first dimension, one per element of a list, or the
    first dimension of a pytree's leaves (a dict or tuple of tensors)."""
    if isinstance(data, list):
        return len(data)
    if not isinstance(data, (torch.Tensor, TensorDictBase)) and not is_tensorclass(data):
        leaves = tree_leaves(data)
        if not leaves or not isinstance(leaves[0], torch.Tensor):
            return len(data)
        data = leaves[0]
    if data.ndim == 0:
        raise ValueError("extend() needs data with a leading batch dimension; use add()")
    return data.shape[0]


class Writer:
    """Base class of writers: ``add``, ``extend``, a cursor and a write count.

    Examples:
        >>> from reap_replay.writers import RoundRobinWriter
        >>> isinstance(RoundRobinWriter(), Writer)
        True
    """

    #: TorchRL's flag of writers that stamp slots with a generation; reap's never do.
    tracks_generations = False

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
        max_size = self._storage._max_rows
        if max_size is not None and cursor >= max_size:
            raise ValueError(f"_cursor={cursor} is past max_size={max_size}")
        if (max_size is None or storage_len < max_size) and cursor > storage_len:
            raise ValueError(
                f"_cursor={cursor} is past the {storage_len} stored rows: the next write would "
                "leave rows never written in between"
            )

    def dumps(self, path) -> None:
        """Writes :meth:`state_dict` as a checkpoint at ``path`` (raw tensors and JSON)."""
        from reap_replay.buffers.checkpointing import dump_component

        dump_component(self, path)

    def loads(self, path) -> None:
        """Loads the state that :meth:`dumps` wrote at ``path``."""
        from reap_replay.buffers.checkpointing import load_component

        load_component(self, path)

    def _done(self) -> None:
        self._storage._record_progress(self._cursor, self._write_count)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cursor={self._cursor}, write_count={self._write_count})"
