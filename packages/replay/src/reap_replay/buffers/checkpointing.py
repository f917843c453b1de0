"""A replay buffer's checkpoints: ``rb.dumps(path)`` and ``rb.loads(path)``.

The files are those of :mod:`reap_replay.checkpoint` (raw tensors and JSON, nothing pickled).
``load`` reads and checks everything before it changes anything: :func:`_plan_load` returns
the function that applies a checked checkpoint.

Examples:
    >>> import tempfile, torch
    >>> from reap_replay import LazyTensorStorage, ReplayBuffer
    >>> rb = ReplayBuffer(storage=LazyTensorStorage(8))
    >>> _ = rb.extend(torch.arange(5))
    >>> path = tempfile.mkdtemp()
    >>> dump(rb, path, checksum=True)
    >>> other = ReplayBuffer(storage=LazyTensorStorage(8))
    >>> load(other, path, verify_checksum=True)
    >>> other[:].tolist()
    [0, 1, 2, 3, 4]
"""

from __future__ import annotations

from pathlib import Path

import torch
from tensordict import TensorDictBase

from reap_replay import checkpoint as ckpt
from reap_replay.storages import LazyMemmapStorage, ListStorage, TensorStorage
from reap_replay.torchrl_checkpoint import is_torchrl_checkpoint, read_torchrl_checkpoint


def _check_positive(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer or None, got {name}={value!r}")
    return value


def _split_state(prefix: str, state: dict, tensors: dict) -> dict:
    """JSON part of a component's state; its tensors go to ``tensors`` under ``prefix/key``."""
    out = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor):
            name = f"{prefix}/{key}"
            tensors[name] = value
            out[key] = {"__tensor__": name}
        elif value is None or isinstance(value, (bool, int, float, str)):
            out[key] = value
        else:
            raise TypeError(f"cannot checkpoint {prefix}.{key} of type {type(value).__name__}")
    return out


def _join_state(meta: dict, tensors: dict, where) -> dict:
    if not isinstance(meta, dict):
        raise ValueError(f"the state is {meta!r}, not an object")
    out = {}
    for key, value in meta.items():
        if isinstance(value, dict) and "__tensor__" in value:
            if not isinstance(value["__tensor__"], str) or value["__tensor__"] not in tensors:
                raise ckpt.CheckpointError(f"{where}: tensor {value['__tensor__']!r} is missing")
            out[key] = tensors[value["__tensor__"]]
        else:
            out[key] = value
    return out


def dump(rb, path, checksum: bool) -> None:
    """Writes ``rb``'s checkpoint to ``path`` (:meth:`ReplayBuffer.dumps`)."""
    if not isinstance(checksum, bool):
        raise TypeError(f"checksum must be True or False, got checksum={checksum!r}")
    path = Path(path)
    with rb._lock:
        tensors: dict = {}
        meta = {
            "buffer": type(rb).__name__,
            "batch_size": rb._batch_size,
            "storage": _storage_meta(rb, path, tensors, checksum),
            "sampler": {
                "kind": type(rb._sampler).__name__,
                "state": _split_state("sampler", rb._sampler.state_dict(), tensors),
            },
            "writer": {
                "kind": type(rb._writer).__name__,
                "state": _split_state("writer", rb._writer.state_dict(), tensors),
            },
        }
        if rb._rng is not None:
            tensors["rng_state"] = rb._rng.get_state()
            meta["rng"] = {"device": str(rb._rng.device), "tensor": "rng_state"}
        ckpt.write_checkpoint(path, meta, tensors, checksum=checksum)

def _storage_meta(rb, path: Path, tensors: dict, checksum: bool) -> dict:
    s = rb._storage
    meta = {"kind": type(s).__name__, "max_size": _asked_size(s), "ndim": s.ndim, "len": s._len,
            "items_per_row": s._cells, "last_cursor": s._last_cursor}
    if isinstance(s, ListStorage):
        items = s._storage
        if not all(isinstance(x, torch.Tensor) for x in items):
            raise TypeError(
                "a ListStorage checkpoint holds tensors only (nothing is pickled); store "
                "other objects in a LazyTensorStorage as tensors or TensorDicts"
            )
        meta["items"] = []
        for i, x in enumerate(items):
            tensors[f"storage/item{i}"] = x
            meta["items"].append(f"storage/item{i}")
        return meta
    if not isinstance(s, TensorStorage):
        raise TypeError(f"cannot checkpoint a storage of type {type(s).__name__}")
    meta["initialized"] = s.initialized
    if not s.initialized:
        return meta
    meta["layout"] = "tensordict" if s._leaves is not None else "tensor"
    n = s._len
    if isinstance(s, LazyMemmapStorage) and s.scratch_dir.resolve() == path.resolve():
        layout_id, generation = s._seal()
        bufs = dict(s.leaf_items())
        meta.update(inplace=True, layout_id=layout_id, generation=generation, leaves=[])
        for e in s._layout_leaves:
            rows = bufs[tuple(e["key"])][:n]
            meta["leaves"].append({**e, "checksum": ckpt.crc32_of(rows) if checksum else None})
        return meta
    meta["leaves"] = []
    meta["tds"] = []
    if s._leaves is not None:
        meta["item_dims"] = list(s._storage.batch_size[1:])
        meta["item_names"] = s._item_names
        for key, value in s._storage.items(include_nested=True):
            if isinstance(value, TensorDictBase):
                k = key if isinstance(key, tuple) else (key,)
                meta["tds"].append({"key": list(k), "item_dims": list(value.batch_size[1:])})
    for i, (key, buf) in enumerate(s.leaf_items()):
        name = f"storage/leaf{i}"
        tensors[name] = buf[:n]
        meta["leaves"].append({"key": list(key), "tensor": name})
    return meta

def load(rb, path, verify_checksum: bool) -> None:
    """Loads the checkpoint at ``path`` into ``rb``, all or nothing (:meth:`ReplayBuffer.loads`)."""
    if not isinstance(verify_checksum, bool):
        raise TypeError(f"verify_checksum must be True or False, got verify_checksum={verify_checksum!r}")
    path = Path(path)
    if is_torchrl_checkpoint(path):  # TorchRL's dumps(): no checksums to verify
        meta, tensors = read_torchrl_checkpoint(
            path, rb, drop_index=rb._is_tensordict)
        verify_checksum = False
    else:
        meta, tensors = ckpt.read_checkpoint(path, verify=verify_checksum)
    with rb._lock:
        apply = _plan_load(rb, path, meta, tensors, verify_checksum)
        apply()  # every value was checked: assignments and copies between equal layouts
    rb._drop_prefetched()  # batches drawn before the load

def _plan_load(rb, path: Path, meta: dict, tensors: dict, verify: bool):
    """Checks the whole checkpoint against this buffer; returns the function that loads it.

    Nothing changes here; any problem is a CheckpointError saying which part is wrong.
    """
    _check_kinds(rb, path, meta)
    with _invalid(path, "batch_size"):
        batch_size = meta.get("batch_size")
        if batch_size is not None:
            _check_positive("batch_size", batch_size)
    max_size = rb._storage._max_rows
    with _invalid(path, "storage"):
        st = meta["storage"]
        n, last = st["len"], st.get("last_cursor")
        if not _is_size(n) or (max_size is not None and n > max_size):
            raise ValueError(f"len={n!r} is not a row count within max_size={max_size}")
        if last is not None and (not _is_size(last) or (max_size is not None and last > max_size)):
            raise ValueError(f"last_cursor={last!r} is not a position within max_size={max_size}")
    with _invalid(path, "sampler"):
        sampler_state = _join_state(meta["sampler"]["state"], tensors, path)
        items_per_row = st.get("items_per_row", 1)
        if not _is_size(items_per_row) or items_per_row == 0:
            raise ValueError(f"items_per_row={items_per_row!r} is not a positive integer")
        rb._sampler._check_state(sampler_state, n * items_per_row)
    with _invalid(path, "writer"):
        writer_state = _join_state(meta["writer"]["state"], tensors, path)
        rb._writer._check_state(writer_state, n)
    with _invalid(path, "random generator"):
        generator = None
        if meta.get("rng") is not None:
            generator = torch.Generator(device=meta["rng"]["device"])
            generator.set_state(tensors[meta["rng"]["tensor"]])
    with _invalid(path, "storage"):  # last: an in-place storage maps its files here
        load_storage = _plan_storage(rb, path, st, tensors, n, last, verify)

    def apply():
        load_storage()
        rb._sampler.load_state_dict(sampler_state)
        rb._writer.load_state_dict(writer_state)
        if generator is not None:
            rb.set_rng(generator)
        if batch_size is not None:  # else this buffer's own (README's load_run sets one)
            rb._batch_size = batch_size

    return apply

def _check_kinds(rb, path, meta) -> None:
    try:
        pairs = [
            ("storage", meta["storage"]["kind"], type(rb._storage).__name__),
            ("sampler", meta["sampler"]["kind"], type(rb._sampler).__name__),
            ("writer", meta["writer"]["kind"], type(rb._writer).__name__),
        ]
        max_size = meta["storage"]["max_size"]
        ndim = meta["storage"].get("ndim", 1)
    except (KeyError, TypeError, AttributeError) as err:
        raise ckpt.CheckpointError(f"{path}: meta.json lacks {err}") from None
    for what, saved, mine in pairs:
        if saved != mine:
            raise ckpt.CheckpointError(
                f"{path} holds a {what} of kind {saved}, but this buffer uses {mine}"
            )
    if max_size != _asked_size(rb._storage) or isinstance(max_size, bool):
        raise ckpt.CheckpointError(
            f"{path} holds a storage of max_size={max_size!r}, this buffer's is "
            f"{_asked_size(rb._storage)}"
        )
    if ndim != rb._storage.ndim:
        raise ckpt.CheckpointError(f"{path} holds a storage of ndim={ndim!r}, this buffer's is {rb._storage.ndim}")


def _asked_size(storage):
    """The ``max_size`` the storage was built with (with ``ndim`` > 1 it grows to whole rows)."""
    return getattr(storage, "_asked_max_size", storage.max_size)

def _plan_storage(rb, path: Path, meta: dict, tensors: dict, n: int, last, verify: bool):
    s = rb._storage
    if isinstance(s, ListStorage):
        names = meta["items"]
        if not isinstance(names, list) or len(names) != n:
            raise ValueError(f"items lists {names!r}, not {n} tensors")
        items = [tensors[name] for name in names]

        def load_list():
            s._storage, s._len, s._last_cursor = items, n, last
            s._revision += 1

        return load_list
    initialized = meta["initialized"]
    if initialized is not True:
        if initialized is not False or n:
            raise ValueError(f"initialized={initialized!r} with len={n}")

        def load_empty():
            s._empty()
            s._last_cursor = last

        return load_empty
    inplace = meta.get("inplace", False)
    if inplace is not False:
        if inplace is not True:
            raise ValueError(f"inplace={inplace!r}, not true or false")
        if not isinstance(s, LazyMemmapStorage):
            raise ckpt.CheckpointError(f"{path}: in-place data needs a LazyMemmapStorage")
        expect = {k: meta[k] for k in ("layout_id", "generation", "leaves")}
        if not isinstance(expect["layout_id"], str) or not _is_size(expect["generation"]):
            raise ValueError(f"layout_id={expect['layout_id']!r} or generation={expect['generation']!r} is not valid")
        mapped = s._map_existing(path, expect=expect, rows=n, verify=verify)

        def load_inplace():
            s._adopt(mapped)
            s._len, s._last_cursor = n, last

        return load_inplace
    data = _rows_of(meta, tensors, n)
    # A storage holding data takes rows of its own entries, shapes and dtypes (checked
    # here); an empty one is laid out by them when loading.
    rows = s._checked(data) if s.initialized else None

    def load_rows():
        s._empty()
        if n and rows is not None:
            s._write(slice(0, n), rows)
        elif n:
            s.set(slice(0, n), data)
        s._len, s._last_cursor = n, last

    return load_rows

def _rows_of(meta: dict, tensors: dict, n: int):
    """The checkpoint's rows as a tensor or TensorDict of ``n`` rows, shapes checked."""
    from tensordict import TensorDict

    leaves = {}
    for e in meta["leaves"]:
        key = e["key"]
        if not isinstance(key, list) or not all(isinstance(k, str) for k in key):
            raise ValueError(f"leaf key {key!r} is not a list of names")
        value = tensors[e["tensor"]]
        if value.ndim == 0 or value.shape[0] != n:
            raise ValueError(f"leaf {key} holds {list(value.shape)}, not {n} rows")
        leaves[tuple(key)] = value
    if meta["layout"] == "tensor":
        if list(leaves) != [()]:
            raise ValueError("a tensor layout holds one leaf with key []")
        return leaves[()]
    if meta["layout"] != "tensordict" or () in leaves or not leaves:
        raise ValueError(f"layout {meta['layout']!r} with leaves {list(leaves)} is not valid")
    data = TensorDict(batch_size=[n, *meta["item_dims"]])
    for e in sorted(meta["tds"], key=lambda e: len(e["key"])):
        data.set(tuple(e["key"]), TensorDict(batch_size=[n, *e["item_dims"]]))
    for key, value in leaves.items():
        data.set(key, value)
    names = meta.get("item_names")  # absent from checkpoints written before items kept their names
    if names:
        data.names = [None] * (data.batch_dims - len(names)) + names
    return data


class _invalid:
    """Turns a bad value met while checking part of a checkpoint into a CheckpointError."""

    def __init__(self, path, what: str):
        self.path, self.what = path, what

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if kind is None or issubclass(kind, ckpt.CheckpointError):
            return False
        if issubclass(kind, (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError, OverflowError)):
            detail = f"it lacks {err}" if kind is KeyError else str(err)
            raise ckpt.CheckpointError(
                f"{self.path}: the {self.what} in {ckpt.META} cannot be loaded: {detail}"
            ) from None
        return False


def _is_size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def dump_component(component, path) -> None:
    """Writes a sampler's or a writer's ``state_dict()`` as a checkpoint at ``path``."""
    tensors: dict = {}
    meta = {"component": type(component).__name__,
            "state": _split_state("state", component.state_dict(), tensors)}
    ckpt.write_checkpoint(Path(path), meta, tensors)


def load_component(component, path) -> None:
    """Loads into ``component`` the state :func:`dump_component` wrote at ``path``."""
    path = Path(path)
    meta, tensors = ckpt.read_checkpoint(path)
    if meta.get("component") != type(component).__name__:
        raise ckpt.CheckpointError(
            f"{path} holds the state of a {meta.get('component')!r}, not of a {type(component).__name__}"
        )
    with _invalid(path, "state"):
        component.load_state_dict(_join_state(meta["state"], tensors, path))
