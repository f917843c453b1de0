"""Checkpoints that cannot be torn: raw tensor files plus a ``meta.json``, swapped in atomically.

Layout of a checkpoint directory ``path``::

    path/meta.json          {"format": "reap-replay-checkpoint", "version": 1, "data": "data-…", …}
    path/data-000003-…/     raw little-endian tensor files named in meta.json
    path/storage/           (memmap buffers whose scratch_dir is ``path``: the live data, not copied)

``dumps`` writes a new data directory under a temporary name, fsyncs every file, renames it, then
replaces ``meta.json`` with ``os.replace`` (atomic) and only then deletes the previous data
directory. A crash at any point leaves ``meta.json`` naming a complete data directory: the old
checkpoint or the new one. Nothing is unpickled when loading: tensors are raw bytes read back
with their dtype and shape from the JSON.

Examples:
    >>> import tempfile, torch
    >>> d = tempfile.mkdtemp()
    >>> write_checkpoint(d, {"kind": "demo"}, {"x": torch.arange(3)})
    >>> meta, tensors = read_checkpoint(d)
    >>> meta["kind"], tensors["x"].tolist()
    ('demo', [0, 1, 2])
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import torch

__all__ = ["CheckpointError", "FORMAT", "VERSION", "read_checkpoint", "write_checkpoint"]

FORMAT = "reap-replay-checkpoint"
VERSION = 1
META = "meta.json"


class CheckpointError(RuntimeError):
    """A checkpoint directory is missing, torn, foreign or of an unknown version."""


def dtype_to_str(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def str_to_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, str(name), None)
    if not isinstance(dtype, torch.dtype):
        raise CheckpointError(f"unknown dtype {name!r}")
    return dtype


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (directories: where the OS allows it)."""
    flags = os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() and hasattr(os, "O_DIRECTORY") else 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def save_raw(tensor: torch.Tensor, file: Path) -> dict:
    """Writes ``tensor``'s bytes to ``file`` and returns its JSON description."""
    t = tensor.detach().to("cpu").contiguous()
    with open(file, "wb") as f:
        if t.numel():
            f.write(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        f.flush()
        os.fsync(f.fileno())
    return {"file": file.name, "dtype": dtype_to_str(t.dtype), "shape": list(t.shape)}


def load_raw(directory: Path, desc: dict, *, mmap: bool = False) -> torch.Tensor:
    """Reads a tensor written by :func:`save_raw` (``mmap=True``: a shared memory map)."""
    try:
        file = directory / desc["file"]
        dtype = str_to_dtype(desc["dtype"])
        shape = [int(s) for s in desc["shape"]]
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{directory}: malformed tensor entry {desc!r} in {META}") from err
    if Path(desc["file"]).name != desc["file"]:
        raise CheckpointError(f"{directory}: tensor file name {desc['file']!r} is not a plain name")
    numel = 1
    for s in shape:
        numel *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    if not file.is_file():
        raise CheckpointError(f"{directory}: tensor file {file.name} is missing (torn checkpoint?)")
    actual = file.stat().st_size
    if actual != numel * itemsize:
        raise CheckpointError(
            f"{directory}: tensor file {file.name} holds {actual} bytes, expected "
            f"{numel * itemsize} for shape {shape} and dtype {desc['dtype']} (torn checkpoint?)"
        )
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    if mmap:
        from tensordict import MemoryMappedTensor

        return MemoryMappedTensor.from_filename(str(file), dtype=dtype, shape=torch.Size(shape))
    return torch.from_file(str(file), shared=False, size=numel, dtype=dtype).view(shape)


def _read_meta(path: Path) -> dict:
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}: the directory does not exist")
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint at {path}: it is not a directory")
    meta_file = path / META
    if not meta_file.is_file():
        raise CheckpointError(
            f"{path} is not a reap-replay checkpoint: {META} is missing "
            "(a foreign directory, or a dumps() that never completed)"
        )
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path}: {META} is not valid JSON ({err})") from err
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is not a reap-replay checkpoint: {META} has format "
            f"{meta.get('format') if isinstance(meta, dict) else None!r}, expected {FORMAT!r}"
        )
    if meta.get("version") != VERSION:
        raise CheckpointError(
            f"{path}: checkpoint version {meta.get('version')!r} is not supported "
            f"(this reap-replay reads version {VERSION})"
        )
    return meta


def is_checkpoint(path) -> bool:
    try:
        _read_meta(Path(path))
    except CheckpointError:
        return False
    return True


def _hook(name: str) -> None:
    """A no-op between the steps of a dump; tests patch it to simulate a crash at ``name``."""


def write_checkpoint(path, meta: dict, tensors: dict[str, torch.Tensor]) -> None:
    """Atomically replaces the checkpoint at ``path`` with ``meta`` plus ``tensors``.

    ``meta`` must be JSON-serialisable; tensors are stored as raw files and listed in
    ``meta["tensors"]``. Other files already in ``path`` (for instance a memmap storage's live
    ``storage/`` folder) are left alone.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"cannot write a checkpoint at {path}: it is a file")
    path.mkdir(parents=True, exist_ok=True)
    old = None
    if (path / META).exists():
        old = _read_meta(path).get("data")
    tag = uuid.uuid4().hex[:12]
    tmp = path / f".tmp-data-{tag}"
    final = path / f"data-{tag}"
    tmp.mkdir()
    described = {}
    for i, (name, tensor) in enumerate(tensors.items()):
        described[name] = save_raw(tensor, tmp / f"t{i:04d}.bin")
        _hook("tensor")
    fsync_path(tmp)
    os.rename(tmp, final)
    fsync_path(path)
    _hook("data_renamed")
    full = dict(meta)
    full.update({"format": FORMAT, "version": VERSION, "data": final.name, "tensors": described})
    meta_tmp = path / f".tmp-meta-{tag}.json"
    with open(meta_tmp, "w") as f:
        json.dump(full, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    _hook("meta_written")
    os.replace(meta_tmp, path / META)
    fsync_path(path)
    _hook("meta_replaced")
    # The new checkpoint is live: remove the previous data and any leftovers of crashed dumps.
    for child in path.iterdir():
        stale = child.name.startswith(".tmp-") or (
            child.name.startswith("data-") and child.name != final.name
        )
        if stale or (old is not None and child.name == old and old != final.name):
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)


def read_checkpoint(path, *, mmap: bool = False) -> tuple[dict, dict[str, torch.Tensor]]:
    """Reads ``(meta, tensors)`` from ``path``; a clear :class:`CheckpointError` if it is not one."""
    path = Path(path)
    meta = _read_meta(path)
    data = meta.get("data")
    if not isinstance(data, str) or Path(data).name != data or not (path / data).is_dir():
        raise CheckpointError(f"{path}: data directory {data!r} named in {META} is missing")
    tensors = {}
    for name, desc in (meta.get("tensors") or {}).items():
        tensors[name] = load_raw(path / data, desc, mmap=mmap)
    return meta, tensors
