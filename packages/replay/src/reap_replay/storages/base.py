"""The base class of storages and the helpers the tensor storages share."""

from __future__ import annotations

import multiprocessing.context

import numpy as np
import torch
from tensordict import TensorDict

from reap_replay._aliases import DumpsAliases


def _check_max_size(max_size, *, allow_none=False):
    if max_size is None and allow_none:
        return None
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size <= 0:
        raise ValueError(f"max_size must be a positive integer, got max_size={max_size!r}")
    return max_size


def _check_ndim(ndim):
    if isinstance(ndim, bool) or not isinstance(ndim, int) or ndim < 1:
        raise ValueError(f"ndim must be a positive integer, got ndim={ndim!r}")
    return ndim


def _spawning() -> bool:
    """Whether the object being pickled is on its way to a new process (spawn, forkserver)."""
    return multiprocessing.context.get_spawning_popen() is not None


def _as_index(index):
    """``index`` as an int, a slice or a LongTensor: ranges, lists and NumPy arrays too."""
    if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
        return int(index)
    if isinstance(index, range) and index.step > 0:
        return slice(index.start, index.stop, index.step)
    if isinstance(index, (slice, torch.Tensor)):
        return index
    if isinstance(index, (range, list, np.ndarray)):
        return torch.as_tensor(np.asarray(index, dtype=np.int64))
    raise TypeError(
        f"cannot index a storage with a {type(index).__name__}: use an int, a slice, a range, a "
        "list or array of ints, or a LongTensor"
    )


def _new_td(source: dict, batch_size, device):
    """A TensorDict over ``source`` without the checks of the public constructor."""
    return TensorDict._new_unsafe(source, batch_size=batch_size, device=device)


def _numpy_view(tensor: torch.Tensor):
    """A NumPy view of ``tensor``'s memory, or None where NumPy cannot read it (off the CPU,
    bfloat16, ...): torch ops read those."""
    try:
        return tensor.numpy()
    except (TypeError, RuntimeError):
        return None


class _Leaf:
    """A stored tensor, with a NumPy view of it where NumPy can read it (CPU, NumPy dtype)."""

    __slots__ = ("array", "tensor")

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor
        self.array = _numpy_view(tensor)

    def __reduce__(self):
        return _Leaf, (self.tensor,)  # the view is of this process's memory: made anew


def _row_reader(index: torch.Tensor):
    """``leaf -> its rows at index`` for a 1-D index.

    A NumPy ``take`` where the leaf has a view: on the CPU it costs a fraction of the dispatch of
    ``index_select``, which reads the other leaves.
    """
    flat = _numpy_view(index) if index.dtype in (torch.int64, torch.int32) else None
    if flat is None:
        return lambda leaf: leaf.tensor.index_select(0, index)

    def read(leaf):
        if leaf.array is None:
            return leaf.tensor.index_select(0, index)
        return torch.from_numpy(leaf.array.take(flat, axis=0))

    return read


class _Rows:
    """Rows checked against a storage's layout (:meth:`TensorStorage._checked`): one tensor per
    stored leaf, in the storage's order, with its shape and dtype. Indexing selects rows."""

    __slots__ = ("values",)

    def __init__(self, values: list):
        self.values = values

    def __len__(self) -> int:
        return self.values[0].shape[0]

    def __getitem__(self, index) -> _Rows:
        return _Rows([v[index] for v in self.values])


def _name(key) -> str:
    return repr(key[0] if isinstance(key, tuple) and len(key) == 1 else key)


def _exact_cast(key, value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``value`` cast to ``dtype`` if that keeps every value (NaN stays NaN), else a ValueError
    naming ``key`` and a value that would change."""
    cast = value.to(dtype)
    same = cast.to(value.dtype) == value
    if value.is_floating_point() and cast.is_floating_point():
        same |= value.isnan() & cast.isnan()
    if bool(same.all()):
        return cast
    first = int(torch.nonzero(~same.reshape(-1))[0, 0])
    was, now = value.reshape(-1)[first].item(), cast.reshape(-1)[first].item()
    raise ValueError(
        f"entry {_name(key)} has dtype {str(value.dtype).removeprefix('torch.')} but the storage "
        f"holds {str(dtype).removeprefix('torch.')}, and the cast changes its values ({was!r} "
        f"becomes {now!r}); cast it yourself (.to(torch.{str(dtype).removeprefix('torch.')})) if "
        "that is what you want"
    )


class Storage(DumpsAliases):
    """Base class of storages: ``set``, ``get``, ``__len__``, ``state_dict``.

    ``storage[index]`` reads as ``get``; ``storage[index] = data`` writes as ``set`` (it never
    moves a writer's cursor); ``for item in storage`` reads the items in order; ``i in storage``
    says whether slot ``i`` holds an item.

    Examples:
        >>> from reap_replay.storages import ListStorage
        >>> s = ListStorage(3)
        >>> s.set(range(2), ["a", "b"])
        >>> isinstance(s, Storage), list(s), 1 in s, 2 in s
        (True, ['a', 'b'], True, False)
    """

    ndim = 1
    _rng: torch.Generator | None = None
    _revision = 0  # counts the changes of the rows, for samplers that cache what they read
    #: Items per row: with ``ndim`` > 1, a row (what a writer writes) holds several items.
    _cells = 1

    def __init__(self, max_size):
        self.max_size = max_size
        self._max_rows = max_size  # how many rows the writers cycle through
        self._len = 0  # rows written
        self._last_cursor = None  # one past the newest write (for trajectory ends)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index):
        return self.get(index)

    def __setitem__(self, index, value) -> None:
        self.set(index, value)

    def __iter__(self):
        for i in range(self._len):
            yield self[i]

    def contains(self, item):
        """Whether row ``item`` (an int, or each of a tensor of ints) holds items."""
        n = self._len
        if isinstance(item, torch.Tensor):
            item = torch.where(item < 0, item + n, item)
            return (item >= 0) & (item < n)
        if isinstance(item, int):
            return 0 <= (item + n if item < 0 else item) < n
        raise TypeError(f"contains() takes an int or a tensor of ints, got {type(item).__name__}")

    def __contains__(self, item) -> bool:
        return bool(self.contains(item))

    def dumps(self, path) -> None:
        """Writes the stored items as a checkpoint at ``path`` (that of a buffer over them)."""
        from reap_replay.buffers import ReplayBuffer

        ReplayBuffer(storage=self).dumps(path)

    def loads(self, path) -> None:
        """Loads the items that :meth:`dumps` wrote at ``path``."""
        from reap_replay.buffers import ReplayBuffer

        ReplayBuffer(storage=self).loads(path)

    def attach(self, buffer) -> None:
        """TorchRL's hook for buffers reading this storage; reap's buffers need none."""

    @property
    def _is_full(self) -> bool:
        return self.max_size is not None and len(self) >= self.max_size

    def flatten(self) -> Storage:
        """This storage (its items are along one dimension)."""
        return self

    def _record_progress(self, cursor: int, write_count: int) -> None:
        self._last_cursor = cursor

    def _checked(self, data):
        """``data`` ready for :meth:`_write`, or an error saying what does not fit (nothing is
        written). Writers check a batch once, then write it in one or more parts."""
        return data

    def _write(self, index, rows) -> None:
        """Writes rows returned by :meth:`_checked`."""
        self.set(index, rows)

    def _restored_progress(self):
        return None

    @property
    def shape(self) -> torch.Size:
        return torch.Size([self._len])

    def _empty(self) -> None:
        self._len = 0
        self._last_cursor = None
        self._revision += 1
