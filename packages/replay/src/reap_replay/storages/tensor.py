""":class:`TensorStorage` and :class:`LazyTensorStorage`: rows of tensors or TensorDicts.

A TensorDict storage reads and writes its leaf tensors directly (one ``index_select`` or slice
copy per leaf): no per-item Python work and no generic TensorDict indexing on the hot path.
"""

from __future__ import annotations

import math

import torch
from tensordict import (
    LazyStackedTensorDict,
    TensorDict,
    TensorDictBase,
    is_non_tensor,
    is_tensor_collection,
    is_tensorclass,
)
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from reap_replay.storages.base import (
    Storage,
    _as_index,
    _check_max_size,
    _check_ndim,
    _exact_cast,
    _Leaf,
    _name,
    _new_td,
    _row_reader,
    _Rows,
    _spawning,
)


def _unsqueeze(data):
    """One item as a batch of one."""
    if isinstance(data, (torch.Tensor, TensorDictBase)) or is_tensorclass(data):
        return data.unsqueeze(0)
    if isinstance(data, list):
        return [data]
    return tree_map(lambda x: x.unsqueeze(0), data)


def _rows_in(tree: dict) -> int:
    """The leading dimension of the tensors of a (nested) dict."""
    value = next(iter(tree.values()))
    return _rows_in(value) if isinstance(value, dict) else value.shape[0]


def _dense(data: LazyStackedTensorDict) -> TensorDictBase:
    """A lazy stack as one TensorDict, or an error if its items differ in shape."""
    try:
        return data.contiguous()
    except RuntimeError as err:
        raise ValueError(
            "the data is a lazy stack of TensorDicts whose entries differ in shape; a tensor "
            "storage holds items of one shape: pad them to one shape, or store them in a "
            f"ListStorage ({err})"
        ) from err


def _stack(items: list):
    """A list of items as one batch: stacked tensors, TensorDicts or tensorclasses, or a pytree
    of stacked leaves."""
    first = items[0]
    if isinstance(first, (torch.Tensor, TensorDictBase)) or is_tensorclass(first):
        return torch.stack(items)
    leaves = [tree_flatten(item) for item in items]
    spec = leaves[0][1]
    if any(s != spec for _, s in leaves):
        raise ValueError("the elements do not share one tree structure")
    return tree_unflatten([torch.stack(column) for column in zip(*(x for x, _ in leaves))], spec)



def _plain_tensordict(td: TensorDictBase, owner: str, prefix: tuple = ()) -> tuple[TensorDictBase, dict]:
    """A tensorclass's TensorDict with its nested tensorclasses as TensorDicts, and their classes by
    nested key (to make them again on reads); a non-tensor field is refused, naming it."""
    entries, classes = {}, {}
    for key, value in td.items():
        if is_non_tensor(value) or not isinstance(value, torch.Tensor) and not is_tensor_collection(value):
            raise TypeError(f"{owner} stores tensors: the tensorclass field {'.'.join(prefix + (key,))!r} holds "
                            f"{type(value).__name__} data; keep it out of the stored data, or use ListStorage")
        if is_tensorclass(value):
            classes[prefix + (key,)] = type(value)
            value = value._tensordict
        if isinstance(value, TensorDictBase):
            value, inner = _plain_tensordict(value, owner, prefix + (key,))
            classes.update(inner)
        entries[key] = value
    names = td.names if any(name is not None for name in td.names) else None
    return TensorDict(entries, td.batch_size, device=td.device, names=names), classes

class TensorStorage(Storage):
    """A storage over pre-allocated tensors: a tensor or a TensorDict with ``max_size`` rows.

    With ``ndim`` > 1 the first ``ndim`` dimensions index the items, as in TorchRL: a write of
    ``[T, B, ...]`` to an ``ndim=2`` storage adds ``T`` rows of ``B`` items each, ``len`` counts
    items (``rows * B``), ``max_size`` is rounded up to whole rows, ``storage[i]`` reads row
    ``i``, and a sampled item is ``(row, column)`` (a buffer transposes ``[B, T]`` batches, see
    :class:`~reap_replay.ReplayBuffer`).

    Args:
        storage (torch.Tensor or TensorDict): the rows, ``storage.shape[0]`` of them.
        max_size (int, optional): defaults to ``storage.shape[0]``.

    Keyword Args:
        device: where the rows live. Defaults to the storage's device.
        ndim (int): how many leading dimensions index the items. Defaults to 1.

    Examples:
        >>> s = TensorStorage(torch.zeros(4, 2))
        >>> s.set(slice(0, 1), torch.ones(1, 2))
        >>> s.get(torch.tensor([0])).tolist()
        [[1.0, 1.0]]
        >>> grid = LazyTensorStorage(7, ndim=2)
        >>> grid.set(range(2), torch.arange(6).view(2, 3))  # 2 rows of 3 items
        >>> len(grid), grid.max_size, grid.shape, grid.get((torch.tensor([1]), torch.tensor([2]))).tolist()
        (6, 9, torch.Size([2, 3]), [5])
    """

    def __init__(self, storage, max_size=None, *, device="cpu", ndim: int = 1, compilable=False):
        self.ndim = _check_ndim(ndim)
        if storage is None and max_size is None:
            raise ValueError("Expected storage to be non-null.")
        self._codec = None  # how other data (pytrees, tensorclasses) is stored: see _encode
        # TorchRL's TensorStorage(TensorDict(batch_size=[n])): n rows, full, whose entries come
        # with the first write (zeros in the rows it does not write)
        self._rows_without_entries = isinstance(storage, TensorDictBase) and storage.is_empty()
        if self._rows_without_entries:
            if self.ndim != 1:
                raise ValueError(f"TensorStorage: a TensorDict without entries gives the rows of an ndim=1 storage; "
                                 f"for ndim={self.ndim} use LazyTensorStorage(max_size, ndim={self.ndim})")
            max_size, storage = storage.shape[0] if max_size is None else max_size, None
        if storage is not None:
            storage = self._encode(storage)
            if max_size is None:
                max_size = storage.shape[0]
            elif max_size != storage.shape[0]:
                raise ValueError(
                    "The max-size and the storage shape mismatch: got "
                    f"max_size={max_size} for a storage of shape {storage.shape}."
                )
        super().__init__(_check_max_size(max_size))
        self._asked_max_size = max_size  # with ndim > 1, max_size grows to whole rows
        self.device = torch.device(device) if device is not None else None
        self._storage = None
        self._leaves: list | None = None  # [(nested key, tensor)] for TensorDict storages
        self._flat: list = []  # [(name, buffer, row shape, dtype)], in the order _checked reads
        self._spec = None
        self._root: _Leaf | None = None  # the storage itself, when it is one tensor
        self._item_names: list | None = None  # the stored items' dim names, if they have any
        if storage is not None:
            self._attach(storage)
            self._len = self._max_rows  # a given storage is full, as in TorchRL
        elif self._rows_without_entries:
            self._len = max_size  # full too

    def __len__(self) -> int:
        return self._len * self._cells

    @property
    def shape(self) -> torch.Size:
        """``[rows written, *items per row]`` (``[len]`` with ``ndim`` 1)."""
        return torch.Size([self._len, *getattr(self, "_inner", ())])

    # ------------------------------------------------------------------ layout
    @property
    def initialized(self) -> bool:
        return self._storage is not None

    def _attach(self, storage) -> None:
        """Adopts ``storage`` (tensor or TensorDict with ``max_size`` rows) as the data."""
        if storage.shape[0] != self._max_rows:
            raise ValueError(
                f"storage has {storage.shape[0]} rows but max_size={self._max_rows}; they must match"
            )
        self._storage = storage
        names = storage.names[self.ndim:] if isinstance(storage, TensorDictBase) else []
        self._item_names = names if any(name is not None for name in names) else None
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
        if self.ndim > 1:
            self._attach_items(storage)

    def _attach_items(self, storage) -> None:
        """With ``ndim`` > 1: the items per row, and views of the rows as one item per row."""
        inner = tuple(storage.shape[1 : self.ndim])
        if len(inner) != self.ndim - 1:
            raise ValueError(
                f"an ndim={self.ndim} storage needs data with {self.ndim} leading dimensions, got "
                f"rows of shape {list(inner)}"
            )
        self._inner = inner
        self._cells = math.prod(inner)
        self.max_size = self._max_rows * self._cells
        items = storage.flatten(0, self.ndim - 1)
        self._item_spec = self._make_spec(items) if isinstance(items, TensorDictBase) else None
        self._item_root = None if self._item_spec is not None else _Leaf(items)

    def _unravel(self, items: torch.Tensor) -> tuple:
        """Item numbers as ``(row, column, ...)`` index tensors (TorchRL's layout)."""
        return tuple(torch.unravel_index(items, (self._max_rows, *self._inner)))

    def _ravel(self, index) -> torch.Tensor:
        """``(row, column, ...)`` (a tuple, or stacked in the last dimension) as item numbers."""
        if not isinstance(index, tuple):
            index = torch.as_tensor(index).unbind(-1)
        out = torch.zeros_like(torch.as_tensor(index[0]), dtype=torch.long)
        for i, size in zip(index, (self._max_rows, *self._inner)):
            out = out * size + torch.as_tensor(i, device=out.device)
        return out

    def _row_items(self, rows) -> torch.Tensor:
        """The item numbers of whole rows (an int, a slice or a tensor of rows)."""
        rows = torch.arange(self._max_rows)[rows] if not isinstance(rows, torch.Tensor) else rows
        return (rows.reshape(-1, 1) * self._cells + torch.arange(self._cells, device=rows.device)).reshape(-1)

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
        if self._rows_without_entries:  # rows no write reaches are read: zeros, as TorchRL's
            return torch.zeros(shape, dtype=dtype, device=self.device)
        return torch.empty(shape, dtype=dtype, device=self.device)

    def _init_from(self, example) -> None:
        """Allocates rows shaped like ``example`` (one item, without the leading dim)."""
        if self.device is None:
            self.device = example.device if example.device is not None else torch.device("cpu")
        if self.ndim > 1:  # rows of example.shape[:ndim - 1] items: max_size in whole rows
            cells = math.prod(example.shape[: self.ndim - 1])
            self._max_rows = -(-self._asked_max_size // max(cells, 1))
        if isinstance(example, TensorDictBase):
            bufs = {}
            for key, leaf in example.items(include_nested=True, leaves_only=True):
                if not isinstance(leaf, torch.Tensor):
                    raise TypeError(f"entry {key!r} of type {type(leaf).__name__} cannot be stored")
                bufs[key] = self._alloc((self._max_rows, *leaf.shape), leaf.dtype, key)
            storage = TensorDict(
                batch_size=[self._max_rows, *example.batch_size], device=self.device
            )
            self._fill_nested(storage, example, bufs)
            # the item's dim names stay (TorchRL's): a sampled trajectory keeps its "time" dim
            item_names = example.names[self.ndim - 1:]
            if any(name is not None for name in item_names):
                storage.names = [None] * self.ndim + item_names
        elif isinstance(example, torch.Tensor):
            storage = self._alloc((self._max_rows, *example.shape), example.dtype, "_")
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
                sub = TensorDict(batch_size=[self._max_rows, *value.batch_size], device=self.device)
                self._fill_nested(sub, value, bufs, full)
                storage._set_str(key, sub, validated=True, inplace=False)
            else:
                storage._set_str(key, bufs[full if prefix else key], validated=True, inplace=False)

    def _after_init(self) -> None:
        pass

    # ------------------------------------------------------------------ writes
    def set(self, index, data) -> None:
        """Writes ``data`` (rows along dim 0) at ``index``: an int, a slice, a range, a list or
        a LongTensor.

        All or nothing: every entry is checked before any is written. The data must hold
        exactly the storage's entries (those of its first write), each with the storage's row
        shape (nothing is broadcast) and its dtype, or a dtype that casts to it exactly (an
        integral float into an integer entry: yes; 0.9: no). The error names the entry.
        """
        index = _as_index(index)
        if isinstance(index, int):
            index = slice(index, index + 1)
            data = _unsqueeze(data)
        self._write(index, self._checked(data))

    def _checked(self, data) -> _Rows:
        if not isinstance(data, (torch.Tensor, TensorDictBase)):
            data = self._encode(data)
        elif isinstance(data, LazyStackedTensorDict):
            data = _dense(data)
        if self._storage is None:
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

    def _encode(self, data):
        """``data`` as a tensor or a TensorDict, as this storage keeps it.

        A list holds one item per element (they are stacked); a tensorclass is kept as its
        TensorDict; any other pytree (dicts, tuples, ... of tensors) as a TensorDict of its
        leaves. The first such write fixes the structure that reads give back (:meth:`_decode`).
        """
        if isinstance(data, (torch.Tensor, TensorDictBase)):
            return data
        if isinstance(data, list):
            try:
                data = _stack(data)
            except Exception as err:
                raise RuntimeError(
                    "Stacking the elements of the list resulted in an error: "
                    f"{type(self).__name__} expects all elements of a list (one item each) to have "
                    "the same structure and shapes; pass a tuple for a pytree whose leaves hold "
                    f"the items along their first dimension ({err})"
                ) from err
            return self._encode(data)
        if is_tensorclass(data):
            td, nested = _plain_tensordict(data._tensordict, type(self).__name__)
            codec = ("tensorclass", type(data), nested)
        else:
            leaves, spec = tree_flatten(data)
            if not leaves or not all(isinstance(x, torch.Tensor) for x in leaves):
                raise TypeError(
                    f"{type(self).__name__} stores tensors, TensorDicts, tensorclasses and pytrees of "
                    f"tensors, got {type(data).__name__}; use ListStorage for other objects"
                )
            codec = ("pytree", spec)
            td = TensorDict({str(i): x for i, x in enumerate(leaves)}, leaves[0].shape[: self.ndim])
        if self._codec is None:
            self._codec = codec
        elif self._codec != codec:
            raise ValueError(
                f"the data's structure {codec[1]} is not the storage's ({self._codec[1]}): every "
                "write must have the structure of the first one"
            )
        return td

    def _decode(self, out):
        kind, how, *nested = self._codec
        if kind == "tensorclass":
            for key, cls in sorted(nested[0].items(), key=lambda item: -len(item[0])):  # innermost first
                out.set(key, cls._from_tensordict(out.get(key)))
            return how._from_tensordict(out)
        return tree_unflatten([out.get(str(i)) for i in range(how.num_leaves)], how)

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

    def _set_items(self, items: torch.Tensor, data) -> None:
        """Overwrites the items numbered ``items`` (a 1-D LongTensor; ``ndim`` > 1) with ``data``, a
        tensor or TensorDict of one item per row, checked as :meth:`set` checks rows."""
        if self._storage is None:
            raise RuntimeError("Cannot set items of a non-initialized storage: write whole rows with extend() first")
        if not isinstance(data, (torch.Tensor, TensorDictBase)):
            raise TypeError(f"in-place writes of items take a tensor or a TensorDict, got {type(data).__name__}")
        values: list = [data] if self._spec is None else []
        if self._spec is not None:
            self._collect(self._spec, data, (), values)
        n, inner = items.numel(), len(self._inner)
        for (key, buf, row_shape, dtype), value in zip(self._flat, values):
            item_shape = row_shape[inner:]
            if tuple(value.shape) != (n, *item_shape):
                raise ValueError(f"{'entry ' + _name(key) if key != 'the data' else key} has shape {list(value.shape)}, "
                                 f"expected {[n, *item_shape]} for {n} items")
            if value.dtype != dtype:
                value = _exact_cast(key, value, dtype)
            buf.view(-1, *item_shape).index_copy_(0, items.to(buf.device), value.to(buf.device))
        self._revision += 1

    def _write(self, index, rows: _Rows) -> None:
        for leaf, value in zip(self._flat, rows.values):
            self._write_leaf(leaf[1], index, value)
        stop = index.stop if isinstance(index, slice) else int(index.max()) + 1
        if stop > self._len:
            self._len = stop
        self._revision += 1

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
            raise RuntimeError(
                "Cannot get elements out of a non-initialized storage: write to it first"
            )
        if isinstance(index, tuple) and self.ndim > 1:
            return self._get_items(index)
        if not isinstance(index, (int, slice, torch.Tensor)):
            index = _as_index(index)
        if isinstance(index, torch.Tensor) and index.ndim == 0:
            index = int(index)
        if isinstance(index, int):
            i = self._row(index)
            fn = lambda leaf: leaf.tensor[i].clone()  # noqa: E731
            lead = ()
        elif isinstance(index, slice) and (index.step or 1) > 0:
            index = slice(*index.indices(self._len))
            fn = lambda leaf: leaf.tensor[index].clone()  # noqa: E731
            lead = (len(range(index.start, index.stop, index.step)),)
        else:
            if isinstance(index, slice):  # torch slices cannot step backwards
                index = torch.arange(*index.indices(self._len))
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
        out = self._assemble(self._spec, fn, lead)
        return self._named(out if self._codec is None else self._decode(out))

    def _get_items(self, index: tuple):
        """The items at ``(rows, columns, ...)`` (index tensors of one shape)."""
        items = self._ravel(index).to(self.device)
        read, shape = _row_reader(items.reshape(-1)), tuple(items.shape)
        fn = read if len(shape) == 1 else (lambda leaf: read(leaf).view(*shape, *leaf.tensor.shape[1:]))
        if self._item_spec is None:
            return fn(self._item_root)
        out = self._assemble(self._item_spec, fn, shape)
        return self._named(out if self._codec is None else self._decode(out))

    def _named(self, out):
        """``out`` with the stored items' dim names on its last dims."""
        if self._item_names is not None:
            out.names = [None] * (out.batch_dims - len(self._item_names)) + self._item_names
        return out

    def get_item_leaf(self, key):
        """One TensorDict entry with one row per item (a view; with ``ndim`` 1, :meth:`get_leaf`)."""
        leaf = self.get_leaf(key)
        return leaf if leaf is None or self.ndim == 1 else leaf.flatten(0, self.ndim - 1)

    def _row(self, index: int) -> int:
        n = self._len
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
        return {"_storage": storage, "_item_dims": item_dims, "_item_names": self._item_names, "_len": self._len,
                "initialized": self.initialized}

    def load_state_dict(self, state_dict: dict) -> None:
        storage = state_dict["_storage"]
        if isinstance(storage, dict):
            storage = TensorDict(storage, batch_size=[_rows_in(storage), *state_dict.get("_item_dims", [])])
            if state_dict.get("_item_names"):
                storage.names = [None] * self.ndim + state_dict["_item_names"]
        if storage is not None:
            if self._storage is None:
                self._init_from(storage[0])
            if self._leaves is None:
                self._storage.copy_(storage)
            else:
                for key, buf in self._leaves:
                    buf.copy_(storage.get(key))
        self._len = int(state_dict["_len"])
        self._revision += 1

    def __getstate__(self) -> dict:
        if _spawning():
            if self._storage is None:
                raise RuntimeError(
                    f"Cowardly refusing to share a storage of type {type(self).__name__} between "
                    "processes if it has not been initialized yet: populate the buffer with some "
                    "data in the main process before passing it to the other processes (or create "
                    "the buffer with a TensorStorage over allocated tensors)."
                )
            self._share_memory()
        return self.__dict__

    def _share_memory(self) -> None:
        """Moves the rows to shared memory, for a process they are sent to.

        Moving a tensor there gives it new memory, so the NumPy views of the rows are made anew.
        """
        bufs = [buf for _, buf in self.leaf_items()]
        if all(buf.is_shared() or buf.device.type != "cpu" for buf in bufs):
            return
        for buf in bufs:
            buf.share_memory_()
        self._attach(self._storage)

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
