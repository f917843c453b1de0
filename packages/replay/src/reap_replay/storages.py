"""Storages: where a replay buffer keeps its items.

* :class:`ListStorage`: a Python list, any objects.
* :class:`LazyTensorStorage`: tensors (or a TensorDict of tensors) allocated on the first write,
  ``max_size`` rows along the first dimension, on ``device``.
* :class:`LazyMemmapStorage`: the same on memory-mapped files (tensordict
  ``MemoryMappedTensor``) in ``scratch_dir``; a new process can reopen them with
  :meth:`LazyMemmapStorage.open` and sees every write that completed.

A TensorDict storage reads and writes its leaf tensors directly (one ``index_select`` or slice
copy per leaf): no per-item Python work and no generic TensorDict indexing on the hot path.

Examples:
    >>> import torch
    >>> storage = LazyTensorStorage(4)
    >>> storage.set(slice(0, 3), torch.arange(3))
    >>> len(storage), storage.get(torch.tensor([2, 0])).tolist()
    (3, [2, 0])
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
import weakref
from pathlib import Path

import torch
from tensordict import MemoryMappedTensor, TensorDict, TensorDictBase

from reap_replay.checkpoint import (
    CheckpointError,
    check_crc,
    checked_dir,
    crc32_of,
    dtype_to_str,
    fsync_path,
    load_raw,
    plain_name,
    read_json,
    str_to_dtype,
)

__all__ = ["LazyMemmapStorage", "LazyTensorStorage", "ListStorage", "Storage", "TensorStorage"]


def _check_max_size(max_size, *, allow_none=False):
    if max_size is None and allow_none:
        return None
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size <= 0:
        raise ValueError(f"max_size must be a positive integer, got max_size={max_size!r}")
    return max_size


def _check_ndim(ndim):
    if ndim != 1:
        raise NotImplementedError(
            f"ndim={ndim} is not supported: reap-replay storages hold items along their first "
            "dimension only (ndim=1). A [n_envs, T] batch is stored as n_envs items of length T."
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


class Storage:
    """Base class of storages: ``set``, ``get``, ``__len__``, ``state_dict``.

    Examples:
        >>> isinstance(ListStorage(3), Storage)
        True
    """

    ndim = 1

    def __init__(self, max_size):
        self.max_size = max_size
        self._len = 0
        self._last_cursor = None  # one past the newest write (for trajectory ends)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index):
        return self.get(index)

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


class TensorStorage(Storage):
    """A storage over pre-allocated tensors: a tensor or a TensorDict with ``max_size`` rows.

    Args:
        storage (torch.Tensor or TensorDict): the rows, ``storage.shape[0]`` of them.
        max_size (int, optional): defaults to ``storage.shape[0]``.

    Keyword Args:
        device: where the rows live. Defaults to the storage's device.
        ndim (int): only 1 is supported.

    Examples:
        >>> s = TensorStorage(torch.zeros(4, 2))
        >>> s.set(slice(0, 1), torch.ones(1, 2))
        >>> s.get(torch.tensor([0])).tolist()
        [[1.0, 1.0]]
    """

    def __init__(self, storage, max_size=None, *, device="cpu", ndim: int = 1, compilable=False):
        _check_ndim(ndim)
        if storage is not None and max_size is None:
            max_size = storage.shape[0]
        super().__init__(_check_max_size(max_size))
        self.device = torch.device(device) if device is not None else None
        self._storage = None
        self._leaves: list | None = None  # [(nested key, tensor)] for TensorDict storages
        self._flat: list = []  # [(name, buffer, row shape, dtype)], in the order _checked reads
        self._spec = None
        self._root: _Leaf | None = None  # the storage itself, when it is one tensor
        if storage is not None:
            self._attach(storage)

    # ------------------------------------------------------------------ layout
    @property
    def initialized(self) -> bool:
        return self._storage is not None

    def _attach(self, storage) -> None:
        """Adopts ``storage`` (tensor or TensorDict with ``max_size`` rows) as the data."""
        if storage.shape[0] != self.max_size:
            raise ValueError(
                f"storage has {storage.shape[0]} rows but max_size={self.max_size}; they must match"
            )
        self._storage = storage
        if isinstance(storage, TensorDictBase):
            self._leaves = list(storage.items(include_nested=True, leaves_only=True))
            self._spec = self._make_spec(storage)
            self._root = None
        else:
            self._leaves = None
            self._spec = None
            self._root = _Leaf(storage)
        self._flat = []
        self._flatten(self._spec, ())

    def _flatten(self, spec, prefix) -> None:
        if spec is None:
            buf = self._storage
            self._flat.append(("the data", buf, tuple(buf.shape[1:]), buf.dtype))
            return
        for key, entry in spec[1]:
            if isinstance(entry, tuple):
                self._flatten(entry, prefix + (key,))
            else:
                buf = entry.tensor
                self._flat.append((prefix + (key,), buf, tuple(buf.shape[1:]), buf.dtype))

    def _make_spec(self, td: TensorDictBase):
        """A nested description used to assemble output TensorDicts quickly."""
        entries = []
        for key, value in td.items():
            if isinstance(value, TensorDictBase):
                entries.append((key, self._make_spec(value)))
            elif isinstance(value, torch.Tensor):
                entries.append((key, _Leaf(value)))
            else:
                raise TypeError(f"entry {key!r} of type {type(value).__name__} cannot be stored")
        return (tuple(td.batch_size[1:]), entries)

    def _assemble(self, spec, fn, lead: tuple):
        item_dims, entries = spec
        source = {}
        for key, value in entries:
            source[key] = self._assemble(value, fn, lead) if isinstance(value, tuple) else fn(value)
        return _new_td(source, torch.Size(lead + item_dims), self.device)

    def _alloc(self, shape, dtype, key):
        return torch.empty(shape, dtype=dtype, device=self.device)

    def _init_from(self, example) -> None:
        """Allocates rows shaped like ``example`` (one item, without the leading dim)."""
        if self.device is None:
            self.device = example.device if example.device is not None else torch.device("cpu")
        if isinstance(example, TensorDictBase):
            bufs = {}
            for key, leaf in example.items(include_nested=True, leaves_only=True):
                if not isinstance(leaf, torch.Tensor):
                    raise TypeError(f"entry {key!r} of type {type(leaf).__name__} cannot be stored")
                bufs[key] = self._alloc((self.max_size, *leaf.shape), leaf.dtype, key)
            storage = TensorDict(
                batch_size=[self.max_size, *example.batch_size], device=self.device
            )
            self._fill_nested(storage, example, bufs)
        elif isinstance(example, torch.Tensor):
            storage = self._alloc((self.max_size, *example.shape), example.dtype, "_")
        else:
            raise TypeError(
                f"{type(self).__name__} stores tensors or TensorDicts, got {type(example).__name__}; "
                "use ListStorage for other objects"
            )
        self._attach(storage)
        self._after_init()

    def _fill_nested(self, storage, example, bufs, prefix=()) -> None:
        # Nested TensorDicts keep their own batch sizes (their item dims may exceed the parent's).
        for key, value in example.items():
            full = prefix + (key,)
            if isinstance(value, TensorDictBase):
                sub = TensorDict(batch_size=[self.max_size, *value.batch_size], device=self.device)
                self._fill_nested(sub, value, bufs, full)
                storage._set_str(key, sub, validated=True, inplace=False)
            else:
                storage._set_str(key, bufs[full if prefix else key], validated=True, inplace=False)

    def _after_init(self) -> None:
        pass

    # ------------------------------------------------------------------ writes
    def set(self, index, data) -> None:
        """Writes ``data`` (rows along dim 0) at ``index``: a ``slice`` or a 1-D LongTensor.

        All or nothing: every entry is checked before any is written. The data must hold
        exactly the storage's entries (those of its first write), each with the storage's row
        shape (nothing is broadcast) and its dtype, or a dtype that casts to it exactly (an
        integral float into an integer entry: yes; 0.9: no). The error names the entry.
        """
        if isinstance(index, int):
            index = slice(index, index + 1)
            data = data.unsqueeze(0)
        self._write(index, self._checked(data))

    def _checked(self, data) -> _Rows:
        if self._storage is None:
            if not isinstance(data, (torch.Tensor, TensorDictBase)):
                self._init_from(data)  # raises the type error
            self._init_from(data[0])
        if self._spec is None:
            if not isinstance(data, torch.Tensor):
                raise TypeError(f"this storage holds tensors, got {type(data).__name__}")
            return _Rows([self._fit(self._flat[0], data, data.shape[0])])
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"this storage holds TensorDicts, got {type(data).__name__}")
        values: list = []
        self._collect(self._spec, data, (), values)
        n = data.shape[0]
        return _Rows([self._fit(leaf, value, n) for leaf, value in zip(self._flat, values)])

    def _collect(self, spec, td, prefix, out: list) -> None:
        """Appends ``td``'s leaves to ``out`` in the order of ``spec``, refusing missing and extra
        entries. A plain TensorDict's own dict is read directly (a dict lookup per entry; the
        public ``get`` costs some microseconds each, ``keys(True, True)`` tens)."""
        src = td._tensordict if type(td) is TensorDict else dict(td.items())
        entries = spec[1]
        if len(src) != len(entries) or any(key not in src for key, _ in entries):
            self._refuse_keys(entries, src, prefix)
        for key, entry in entries:
            value = src[key]
            if isinstance(entry, tuple):
                if not isinstance(value, TensorDictBase):
                    raise TypeError(
                        f"entry {_name(prefix + (key,))} is a {type(value).__name__}; the storage "
                        "holds a TensorDict there"
                    )
                self._collect(entry, value, prefix + (key,), out)
            elif not isinstance(value, torch.Tensor):
                raise TypeError(
                    f"entry {_name(prefix + (key,))} is a {type(value).__name__}; the storage "
                    "holds a tensor there"
                )
            else:
                out.append(value)

    @staticmethod
    def _refuse_keys(entries, src, prefix) -> None:
        mine = [key for key, _ in entries]
        missing = [_name(prefix + (k,)) for k in mine if k not in src]
        if missing:
            raise KeyError(
                f"the data has no entry {', '.join(missing)}, which the storage holds; every "
                "write must carry the keys of the first one"
            )
        extra = [_name(prefix + (k,)) for k in src if k not in mine]
        raise KeyError(
            f"the data has entries the storage does not hold: {', '.join(extra)}; every write "
            "must carry exactly the keys of the first one (drop them, or store them from the "
            "first write on)"
        )

    @staticmethod
    def _fit(leaf, value: torch.Tensor, n: int) -> torch.Tensor:
        key, _, row_shape, dtype = leaf
        if value.shape[0] != n or value.shape[1:] != row_shape:
            raise ValueError(
                f"{'entry ' + _name(key) if key != 'the data' else key} has shape "
                f"{list(value.shape)}, expected {[n, *row_shape]}: shapes must match the "
                "storage's rows exactly (nothing is broadcast)"
            )
        if value.dtype != dtype:
            value = _exact_cast(key, value, dtype)
        return value

    def _write(self, index, rows: _Rows) -> None:
        for leaf, value in zip(self._flat, rows.values):
            self._write_leaf(leaf[1], index, value)
        stop = index.stop if isinstance(index, slice) else int(index.max()) + 1
        if stop > self._len:
            self._len = stop

    @staticmethod
    def _write_leaf(buf, index, value) -> None:
        """Writes checked rows (same row shape and dtype) into ``buf``."""
        if isinstance(index, slice):
            buf[index].copy_(value, non_blocking=True)
        else:
            if value.device != buf.device:
                value = value.to(buf.device)
            buf.index_copy_(0, index.to(buf.device), value)

    # ------------------------------------------------------------------- reads
    def get(self, index):
        """Rows at ``index`` (int, slice or LongTensor of any shape), as new tensors.

        An int or a slice counts over the rows written so far, as a list would: ``get(-1)`` is
        the last written row and ``get(slice(None))`` every written row, never the unwritten
        tail of the buffer.
        """
        if self._storage is None:
            raise RuntimeError("cannot read from a storage that was never written to")
        if isinstance(index, torch.Tensor) and index.ndim == 0:
            index = int(index)
        if isinstance(index, int):
            i = self._row(index)
            fn = lambda leaf: leaf.tensor[i].clone()  # noqa: E731
            lead = ()
        elif isinstance(index, slice) and (index.step or 1) > 0:
            index = slice(*index.indices(len(self)))
            fn = lambda leaf: leaf.tensor[index].clone()  # noqa: E731
            lead = (len(range(index.start, index.stop, index.step)),)
        else:
            if isinstance(index, slice):  # torch slices cannot step backwards
                index = torch.arange(*index.indices(len(self)))
            if not isinstance(index, torch.Tensor) or index.device != self.device:
                index = torch.as_tensor(index, device=self.device)
            if index.ndim == 1:
                fn = _row_reader(index)
            else:
                read, shape = _row_reader(index.reshape(-1)), index.shape
                fn = lambda leaf: read(leaf).view(*shape, *leaf.tensor.shape[1:])  # noqa: E731
            lead = tuple(index.shape)
        if self._leaves is None:
            return fn(self._root)
        return self._assemble(self._spec, fn, lead)

    def _row(self, index: int) -> int:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"index {index} is out of range: the storage holds {n} rows")
        return index % n

    def get_leaf(self, key):
        """The full buffer of one TensorDict entry (a view; for samplers reading flags)."""
        return self._storage.get(key, None)

    # ------------------------------------------------------------------- state
    def _empty(self) -> None:
        super()._empty()

    def state_dict(self) -> dict:
        """Plain values and (nested dicts of) tensors, loadable with ``weights_only=True``."""
        storage = self._storage
        item_dims = []
        if isinstance(storage, TensorDictBase):
            item_dims = list(storage.batch_size[1:])
            storage = storage.to_dict()
        return {"_storage": storage, "_item_dims": item_dims, "_len": self._len,
                "initialized": self.initialized}

    def load_state_dict(self, state_dict: dict) -> None:
        storage = state_dict["_storage"]
        if isinstance(storage, dict):
            storage = TensorDict(
                storage, batch_size=[self.max_size, *state_dict.get("_item_dims", [])]
            )
        if storage is not None:
            if self._storage is None:
                self._init_from(storage[0])
            if self._leaves is None:
                self._storage.copy_(storage)
            else:
                for key, buf in self._leaves:
                    buf.copy_(storage.get(key))
        self._len = int(state_dict["_len"])

    def leaf_items(self):
        """``[(name, tensor)]`` of the stored buffers (one entry ``"_"`` for a tensor storage)."""
        if self._storage is None:
            return []
        if self._leaves is None:
            return [((), self._storage)]
        return [(k if isinstance(k, tuple) else (k,), v) for k, v in self._leaves]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_size={self.max_size}, len={len(self)}, device={self.device})"


class LazyTensorStorage(TensorStorage):
    """Tensors allocated on the first write: ``max_size`` rows on ``device``.

    Args:
        max_size (int): how many items it holds.

    Keyword Args:
        device (torch.device or str): where the rows live. Defaults to ``"cpu"``.
        ndim (int): only 1 is supported (items along the first dimension).
        compilable, consolidated, shared_init, cleanup_memmap: accepted for TorchRL compatibility.

    Examples:
        >>> from tensordict import TensorDict
        >>> s = LazyTensorStorage(10)
        >>> s.set(slice(0, 2), TensorDict({"obs": torch.zeros(2, 3)}, [2]))
        >>> s.get(torch.tensor([1]))["obs"].shape
        torch.Size([1, 3])
    """

    def __init__(
        self,
        max_size: int,
        *,
        device="cpu",
        ndim: int = 1,
        compilable: bool = False,
        consolidated: bool = False,
        shared_init: bool = False,
        cleanup_memmap: bool = True,
    ):
        super().__init__(None, _check_max_size(max_size), device=device, ndim=ndim)


_LAYOUT = "layout.json"
_PROGRESS = "progress.bin"
_MEMMAP_FORMAT = "reap-replay-memmap"
_MEMMAP_VERSION = 2
_LEN, _CURSOR, _COUNT, _GENERATION = range(4)  # the fields of the progress record


class LazyMemmapStorage(TensorStorage):
    """Memory-mapped tensors (tensordict ``MemoryMappedTensor``) allocated on the first write.

    Files live in ``scratch_dir/storage/``: one per entry, a ``layout.json`` (an id, entries,
    dtypes, shapes) written atomically at allocation, and a small memory-mapped progress record
    (length, cursor, write count, generation) updated after each completed write. A process
    that crashes leaves files from which :meth:`open` rebuilds the storage with every completed
    write.

    A checkpoint in place (``dumps(scratch_dir)``) does not copy the rows, so it stays valid
    only until the next write. The generation records that: ``dumps`` stores it in the
    checkpoint, and the first write after a ``dumps``, :meth:`open` or ``loads`` first increments
    it and fsyncs the record, before any row changes. ``loads`` then accepts the checkpoint
    only if the generations agree, that is only if no row has changed since that ``dumps``
    completed, even by a write a crash cut short; otherwise it refuses and says so. This keeps
    ``reap collect --out`` zero-copy (gigabytes are not duplicated, and writes cost nothing
    more); a copy-on-write scheme would have to copy every row a later write touches.

    Args:
        max_size (int): how many items it holds.

    Keyword Args:
        scratch_dir (str or Path, optional): where the files go. Defaults to a new temporary
            directory.
        device: where sampled batches go (the files are on CPU). Defaults to ``"cpu"``.
        ndim (int): only 1 is supported.
        existsok (bool): allow overwriting a storage already in ``scratch_dir``.
        auto_cleanup (bool, optional): delete the files when the storage is garbage collected.
            Defaults to ``True`` for a temporary directory, ``False`` for a given ``scratch_dir``.

    Examples:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> s = LazyMemmapStorage(8, scratch_dir=d)
        >>> s.set(slice(0, 3), torch.arange(3.0))
        >>> s._record_progress(3, 3)
        >>> LazyMemmapStorage.open(d).get(torch.tensor([2])).tolist()
        [2.0]
    """

    def __init__(
        self,
        max_size: int,
        *,
        scratch_dir=None,
        device="cpu",
        ndim: int = 1,
        existsok: bool = False,
        compilable: bool = False,
        shared_init: bool = False,
        auto_cleanup: bool | None = None,
    ):
        _check_max_size(max_size)
        super().__init__(None, max_size, device=device, ndim=ndim)
        self._mm_device = self.device
        if scratch_dir is None:
            scratch_dir = tempfile.mkdtemp(prefix="reap-replay-")
            if auto_cleanup is None:
                auto_cleanup = True
        self.scratch_dir = Path(scratch_dir)
        self.auto_cleanup = bool(auto_cleanup)
        self.existsok = existsok
        self._progress = None
        self._restored = None
        self._layout_id = None
        self._layout_leaves = []
        self._generation = 0
        self._sealed = True  # the next write must first move the generation on
        if (self._dir / _LAYOUT).exists() and not existsok:
            raise FileExistsError(
                f"scratch_dir={str(self.scratch_dir)!r} already holds a memmap storage; reopen it "
                "with LazyMemmapStorage.open(scratch_dir), or pass existsok=True to overwrite it"
            )
        if self.auto_cleanup:
            weakref.finalize(self, shutil.rmtree, str(self.scratch_dir), True)

    @property
    def _dir(self) -> Path:
        return self.scratch_dir / "storage"

    def _alloc(self, shape, dtype, key):
        name = f"leaf{len(self._pending):04d}.memmap"
        self._pending.append((key, name, shape, dtype))
        return MemoryMappedTensor.empty(shape, dtype=dtype, filename=str(self._dir / name))

    def _init_from(self, example) -> None:
        d = self._dir
        if d.is_symlink():
            d.unlink()
        elif d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        self._pending = []
        self.device = torch.device("cpu")
        super()._init_from(example)
        self.device = torch.device("cpu")

    def _after_init(self) -> None:
        item_dims = None
        kind = "tensor" if self._leaves is None else "tensordict"
        tds = []
        if kind == "tensordict":
            item_dims = list(self._storage.batch_size[1:])
            for key, value in self._storage.items(include_nested=True):
                if isinstance(value, TensorDictBase):
                    k = key if isinstance(key, tuple) else (key,)
                    tds.append({"key": list(k), "item_dims": list(value.batch_size[1:])})
        self._layout_id = uuid.uuid4().hex
        layout = {
            "format": _MEMMAP_FORMAT,
            "version": _MEMMAP_VERSION,
            "id": self._layout_id,
            "kind": kind,
            "max_size": self.max_size,
            "item_dims": item_dims,
            "tds": tds,
            "leaves": [
                {
                    "key": list(k) if isinstance(k, tuple) else [k],
                    "file": name,
                    "dtype": dtype_to_str(dtype),
                    "shape": list(shape),
                }
                for k, name, shape, dtype in self._pending
            ],
        }
        self._layout_leaves = layout["leaves"]
        self._progress = MemoryMappedTensor.zeros(
            (4,), dtype=torch.int64, filename=str(self._dir / _PROGRESS)
        )
        self._generation = 0
        self._sealed = True
        tmp = self._dir / (_LAYOUT + ".tmp")
        tmp.write_text(json.dumps(layout, indent=1))
        with open(tmp) as f:
            os.fsync(f.fileno())
        os.replace(tmp, self._dir / _LAYOUT)
        fsync_path(self._dir)

    def _write(self, index, rows) -> None:
        if self._sealed:
            self._unseal()
        super()._write(index, rows)

    def _unseal(self) -> None:
        """Moves the generation on, durably, before the first row changes after a seal."""
        self._generation += 1
        if self._progress is not None:
            self._progress[_GENERATION] = self._generation
            fsync_path(self._dir / _PROGRESS)
        self._sealed = False

    def _seal(self) -> tuple[str, int]:
        """Flushes everything for a checkpoint in place; returns ``(layout id, generation)``.

        The next write moves the generation on first, which invalidates that checkpoint.
        """
        self.flush()
        self._sealed = True
        return self._layout_id, self._generation

    def _record_progress(self, cursor: int, write_count: int) -> None:
        super()._record_progress(cursor, write_count)
        if self._progress is not None:
            self._progress.copy_(torch.tensor([self._len, cursor, write_count, self._generation]))

    def _restored_progress(self):
        return self._restored

    def flush(self) -> None:
        """Flushes the memory maps and the progress record to disk (fsync)."""
        if self._storage is None:
            return
        for file in self._dir.iterdir():
            fsync_path(file)
        fsync_path(self._dir)

    @classmethod
    def open(cls, scratch_dir, *, device="cpu", auto_cleanup: bool = False) -> LazyMemmapStorage:
        """Reopens the storage in ``scratch_dir``, with every write that completed there.

        Raises a :class:`~reap_replay.checkpoint.CheckpointError` naming the path if there is no
        storage, its files are torn, or one is a symlink or hard link.
        """
        layout = _read_layout(Path(scratch_dir))
        self = cls(
            layout["max_size"],
            scratch_dir=scratch_dir,
            device=device,
            existsok=True,
            auto_cleanup=auto_cleanup,
        )
        self._adopt(self._map_existing(scratch_dir, layout))
        return self

    def _map_existing(self, scratch_dir, layout=None, *, expect=None, rows=None, verify=True) -> dict:
        """Maps the files of the storage in ``scratch_dir`` (which must be this one's), checking
        them; changes nothing in this storage (:meth:`_adopt` does).

        ``expect``: the checkpoint's view of them (``layout_id``, ``generation``, ``leaves``
        with their checksums over the first ``rows`` rows, checked unless ``verify=False``).
        """
        scratch_dir = Path(scratch_dir)
        if scratch_dir.resolve() != self.scratch_dir.resolve():
            raise CheckpointError(
                f"{scratch_dir}: in-place memmap data belongs to a storage with that scratch_dir, "
                f"this one uses {self.scratch_dir}"
            )
        layout = layout or _read_layout(scratch_dir)
        if layout["max_size"] != self.max_size:
            raise CheckpointError(
                f"{scratch_dir}: the storage there has max_size={layout['max_size']}, "
                f"expected {self.max_size}"
            )
        d = self._dir
        if expect is not None:
            _match_checkpoint(scratch_dir, layout, expect)
        leaves = {}
        progress = leaf = None
        try:
            for e in layout["leaves"]:
                leaves[tuple(e["key"])] = load_raw(d, e, mmap=True)
            progress = load_raw(d, {"file": _PROGRESS, "dtype": "int64", "shape": [4]}, mmap=True)
            length, cursor, count, generation = (int(x) for x in progress.tolist())
            if expect is not None:
                if generation != expect["generation"]:
                    raise CheckpointError(
                        f"{scratch_dir}: the data in storage/ changed after the last completed "
                        f"dumps() (it is at generation {generation}, the checkpoint was taken at "
                        f"{expect['generation']}): a memory-mapped checkpoint in place is not a "
                        "copy, and rows were written since (or a write was cut short). Call "
                        "dumps() after the last write, or dumps() to another directory to keep "
                        "a copy"
                    )
                if verify:
                    for e, leaf in zip(expect["leaves"], leaves.values()):
                        check_crc(scratch_dir, f"storage/{e['file']}", e.get("checksum"),
                                  crc32_of(leaf[:rows]))
            elif not (0 <= length <= self.max_size and 0 <= cursor < self.max_size and count >= 0):
                raise CheckpointError(
                    f"{scratch_dir}: the progress record holds len={length}, cursor={cursor}, "
                    f"write count={count}, which do not fit max_size={self.max_size} (corrupt?)"
                )
        except BaseException:
            # A traceback keeps this frame's locals: drop the maps before it leaves.
            leaves.clear()
            progress = leaf = None  # noqa: F841
            raise
        if layout["kind"] == "tensor":
            storage = leaves[next(iter(leaves))]
        else:
            storage = TensorDict(batch_size=[self.max_size, *layout["item_dims"]], device="cpu")
            for e in sorted(layout["tds"], key=lambda e: len(e["key"])):
                storage.set(
                    tuple(e["key"]),
                    TensorDict(batch_size=[self.max_size, *e["item_dims"]], device="cpu"),
                )
            for key, value in leaves.items():
                storage.set(key, value)
        return {
            "storage": storage,
            "progress": progress,
            "layout_id": layout["id"],
            "layout_leaves": layout["leaves"],
            "len": length,
            "cursor": cursor,
            "count": count,
            "generation": generation,
        }

    def _adopt(self, mapped: dict) -> None:
        """Makes the files mapped by :meth:`_map_existing` this storage's data."""
        self.device = torch.device("cpu")
        self._attach(mapped["storage"])
        self._progress = mapped["progress"]
        self._layout_id = mapped["layout_id"]
        self._layout_leaves = mapped["layout_leaves"]
        self._generation = mapped["generation"]
        self._sealed = True
        self._len = mapped["len"]
        self._last_cursor = mapped["cursor"]
        self._restored = {"cursor": mapped["cursor"], "write_count": mapped["count"]}

    def get(self, index):
        out = super().get(index)
        if self._mm_device is not None and self._mm_device != torch.device("cpu"):
            out = out.to(self._mm_device)
        return out

    def _write_leaf(self, buf, index, value) -> None:  # noqa: D401 - same as the parent
        if value.device != buf.device:
            value = value.to(buf.device)
        TensorStorage._write_leaf(buf, index, value)


def _match_checkpoint(scratch_dir: Path, layout: dict, expect: dict) -> None:
    """The storage's layout is the one the checkpoint was taken of (same id, same leaves)."""
    if layout["id"] != expect["layout_id"]:
        raise CheckpointError(
            f"{scratch_dir}: storage/ holds another storage (id {layout['id']}) than the one the "
            f"checkpoint was taken of ({expect['layout_id']!r}): it was re-created after dumps()"
        )
    mine = [(e["key"], e["file"], e["dtype"], e["shape"]) for e in layout["leaves"]]
    theirs = expect["leaves"]
    if not isinstance(theirs, list) or mine != [
        (e.get("key"), e.get("file"), e.get("dtype"), e.get("shape")) if isinstance(e, dict) else None
        for e in theirs
    ]:
        raise CheckpointError(
            f"{scratch_dir}: storage/layout.json describes other entries than the checkpoint's "
            "meta.json (changed after dumps()?)"
        )


def _read_layout(scratch_dir: Path) -> dict:
    """``storage/layout.json``, every field checked (a CheckpointError names what is wrong)."""
    d = scratch_dir / "storage"
    file = d / _LAYOUT
    if not os.path.lexists(file):
        raise CheckpointError(f"no memmap storage in {scratch_dir}: {file} is missing")
    checked_dir(d)
    layout = read_json(file, _LAYOUT)
    if not isinstance(layout, dict) or layout.get("format") != _MEMMAP_FORMAT:
        raise CheckpointError(f"{scratch_dir} does not hold a reap-replay memmap storage ({file})")
    if layout.get("version") != _MEMMAP_VERSION:
        raise CheckpointError(
            f"{file}: memmap storage version {layout.get('version')!r} is not supported (this "
            f"reap-replay reads version {_MEMMAP_VERSION})"
        )

    def sizes(value, what):
        if not isinstance(value, list) or not all(_is_size(v) for v in value):
            raise CheckpointError(f"{file}: {what} is {value!r}, not a list of sizes")
        return value

    max_size = layout.get("max_size")
    if not _is_size(max_size) or max_size == 0:
        raise CheckpointError(f"{file}: max_size is {max_size!r}, not a positive integer")
    if layout.get("kind") not in ("tensor", "tensordict") or not isinstance(layout.get("id"), str):
        raise CheckpointError(f"{file}: kind {layout.get('kind')!r} or id is not valid")
    leaves = layout.get("leaves")
    if not isinstance(leaves, list) or not leaves or (layout["kind"] == "tensor" and len(leaves) != 1):
        raise CheckpointError(f"{file}: leaves is {leaves!r}, not a list of entries")
    files = set()
    for e in leaves:
        if not isinstance(e, dict):
            raise CheckpointError(f"{file}: leaf entry {e!r} is not an object")
        key = e.get("key")
        if not isinstance(key, list) or not key or not all(isinstance(k, str) for k in key):
            raise CheckpointError(f"{file}: leaf key {key!r} is not a list of names")
        files.add(plain_name(d, e.get("file"), "leaf file"))
        str_to_dtype(e.get("dtype"))
        shape = sizes(e.get("shape"), "a leaf's shape")
        if not shape or shape[0] != max_size:
            raise CheckpointError(f"{file}: leaf {key} has shape {shape}, not [{max_size}, ...]")
    if len(files) != len(leaves) or _PROGRESS in files or _LAYOUT in files:
        raise CheckpointError(f"{file}: leaves name the same or reserved files")
    if layout["kind"] == "tensordict":
        sizes(layout.get("item_dims"), "item_dims")
        tds = layout.get("tds")
        if not isinstance(tds, list):
            raise CheckpointError(f"{file}: tds is {tds!r}, not a list")
        for e in tds:
            if not isinstance(e, dict) or not isinstance(e.get("key"), list) or not all(
                isinstance(k, str) for k in e["key"]
            ):
                raise CheckpointError(f"{file}: nested entry {e!r} is not valid")
            sizes(e.get("item_dims"), "a nested entry's item_dims")
    return layout


def _is_size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
