""":class:`LazyMemmapStorage`: rows on memory-mapped files that a new process can reopen."""

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
from reap_replay.storages.base import _check_max_size
from reap_replay.storages.tensor import TensorStorage

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
        self._cleanup = None
        if self.auto_cleanup:
            self._cleanup = weakref.finalize(self, shutil.rmtree, str(self.scratch_dir), True)

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
            "max_size": self._max_rows,  # rows: with ndim > 1, each holds several items
            "ndim": self.ndim,
            "asked_max_size": self._asked_max_size,
            "item_dims": item_dims,
            "item_names": self._item_names,
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
            layout.get("asked_max_size", layout["max_size"]),
            scratch_dir=scratch_dir,
            device=device,
            ndim=layout.get("ndim", 1),
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
        max_rows = layout["max_size"]
        theirs = (layout.get("asked_max_size", layout["max_size"]), layout.get("ndim", 1))
        if theirs != (self._asked_max_size, self.ndim):
            raise CheckpointError(
                f"{scratch_dir}: the storage there has max_size={theirs[0]} and ndim={theirs[1]}, "
                f"expected {self._asked_max_size} and {self.ndim}"
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
            elif not (0 <= length <= max_rows and 0 <= cursor < max_rows and count >= 0):
                raise CheckpointError(
                    f"{scratch_dir}: the progress record holds len={length}, cursor={cursor}, "
                    f"write count={count}, which do not fit its {max_rows} rows (corrupt?)"
                )
        except BaseException:
            # A traceback keeps this frame's locals: drop the maps before it leaves.
            leaves.clear()
            progress = leaf = None  # noqa: F841
            raise
        if layout["kind"] == "tensor":
            storage = leaves[next(iter(leaves))]
        else:
            storage = TensorDict(batch_size=[max_rows, *layout["item_dims"]], device="cpu")
            for e in sorted(layout["tds"], key=lambda e: len(e["key"])):
                storage.set(
                    tuple(e["key"]),
                    TensorDict(batch_size=[max_rows, *e["item_dims"]], device="cpu"),
                )
            for key, value in leaves.items():
                storage.set(key, value)
            names = layout.get("item_names")
            if names:
                storage.names = [None] * (storage.batch_dims - len(names)) + names
        return {
            "rows": max_rows,
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
        self._max_rows = mapped["rows"]
        self._attach(mapped["storage"])
        self._progress = mapped["progress"]
        self._layout_id = mapped["layout_id"]
        self._layout_leaves = mapped["layout_leaves"]
        self._generation = mapped["generation"]
        self._sealed = True
        self._len = mapped["len"]
        self._last_cursor = mapped["cursor"]
        self._restored = {"cursor": mapped["cursor"], "write_count": mapped["count"]}
        self._revision += 1

    def get(self, index):
        out = super().get(index)
        if self._mm_device is not None and self._mm_device != torch.device("cpu"):
            out = out.to(self._mm_device)
        return out

    def cleanup(self) -> bool:
        """Deletes ``scratch_dir`` and the files in it (done when the storage is garbage
        collected if ``auto_cleanup``); the storage is empty and unusable after. Returns
        whether there was something to delete."""
        if getattr(self, "_cleaned_up", False):
            return False
        self._cleaned_up = True
        self._storage, self._leaves, self._flat, self._spec, self._root = None, None, [], None, None
        self._progress = None
        self._len = 0
        existed = self.scratch_dir.is_dir()
        if self._cleanup is not None:
            self._cleanup()
        else:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)
        return existed

    def _share_memory(self) -> None:
        """Nothing to move: another process maps the same files."""

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
    for name in ("ndim", "asked_max_size"):  # absent from storages written before ndim > 1
        if name in layout and (not _is_size(layout[name]) or layout[name] == 0):
            raise CheckpointError(f"{file}: {name} is {layout[name]!r}, not a positive integer")
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
        item_dims = sizes(layout.get("item_dims"), "item_dims")
        names = layout.get("item_names")  # absent from storages written before items kept their names
        if names is not None and (not isinstance(names, list) or len(names) > len(item_dims)
                                  or not all(n is None or isinstance(n, str) for n in names)):
            raise CheckpointError(f"{file}: item_names is {names!r}, not a list of dim names")
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
