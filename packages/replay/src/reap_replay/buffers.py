"""Replay buffers: a storage, a sampler and a writer behind TorchRL's interface.

* :class:`ReplayBuffer`: any data; ``extend``, ``add``, ``sample``, iteration, checkpoints.
* :class:`TensorDictReplayBuffer`: TensorDicts; samples carry ``"index"`` (and the sampler's
  info, e.g. ``"priority_weight"``).
* :class:`PrioritizedReplayBuffer` / :class:`TensorDictPrioritizedReplayBuffer`: the same with a
  :class:`~reap_replay.samplers.PrioritizedSampler` built from ``alpha``, ``beta``, ``eps``.

Thread safety: one lock guards the writer, the sampler and the storage reads, so one writer
thread (a collector) and many sampling threads (``prefetch``, learners) can share a buffer; a
sampled batch never mixes rows from before and after a write.

A TensorDict batch with batch dims ``[n_envs, T]`` is stored, as TorchRL does with its default
``ndim=1`` storages, as ``n_envs`` items of ``T`` steps each; samples are then ``[B, T]``.

Examples:
    >>> import torch
    >>> from reap_replay import LazyTensorStorage, ReplayBuffer
    >>> rb = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
    >>> rb.extend(torch.arange(10)).shape
    torch.Size([10])
    >>> len(rb), rb.sample().shape
    (10, torch.Size([4]))
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from tensordict import TensorDictBase

from reap_replay import checkpoint as ckpt
from reap_replay._warn import _warn_once
from reap_replay.samplers import (
    PrioritizedSampler,
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
    SliceSampler,
)
from reap_replay.samplers.base import priority_of
from reap_replay.storages import LazyMemmapStorage, ListStorage, Storage, TensorStorage
from reap_replay.torchrl_checkpoint import is_torchrl_checkpoint, read_torchrl_checkpoint
from reap_replay.writers import RoundRobinWriter, TensorDictMaxValueWriter, Writer

__all__ = [
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
]

_SAMPLERS = {
    c.__name__: c for c in (RandomSampler, SamplerWithoutReplacement, PrioritizedSampler, SliceSampler)
}
_WRITERS = {c.__name__: c for c in (RoundRobinWriter, TensorDictMaxValueWriter)}


def _build(component, base, name):
    if component is None or isinstance(component, base):
        return component
    if callable(component):
        built = component()
        if isinstance(built, base):
            return built
    raise TypeError(f"{name} must be a {base.__name__} (or a callable returning one), got {component!r}")


def _check_positive(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer or None, got {name}={value!r}")
    return value


def _default_collate(items):
    if isinstance(items, list):
        if items and all(isinstance(x, (torch.Tensor, TensorDictBase)) for x in items):
            return torch.stack(items)
    return items


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


class ReplayBuffer:
    """A replay buffer: ``extend``/``add`` write through the writer, ``sample`` reads.

    Keyword Args:
        storage (Storage, optional): defaults to ``ListStorage(1000)``.
        sampler (Sampler, optional): defaults to :class:`RandomSampler`.
        writer (Writer, optional): defaults to :class:`RoundRobinWriter`.
        collate_fn (callable, optional): applied to what the storage returns.
        pin_memory (bool): pin sampled CPU batches (needs CUDA; otherwise warns once).
        prefetch (int, optional): sample this many batches ahead in background threads.
        transform (callable, optional): applied to every sampled batch; its ``inv`` (if any)
            to data being written.
        batch_size (int, optional): the default ``sample()`` size; needed for iteration.
        dim_extend (int, optional): only ``None`` or 0 (the first dim is the item dim).
        generator (torch.Generator, optional): random source of the sampler.

    Examples:
        >>> import torch
        >>> from reap_replay import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
        >>> rb = ReplayBuffer(
        ...     storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(), batch_size=4
        ... )
        >>> _ = rb.extend(torch.arange(10))
        >>> [len(batch) for batch in rb]
        [4, 4, 2]
        >>> batch, info = rb.sample(return_info=True)
        >>> sorted(info)
        ['index']
    """

    def __init__(
        self,
        *,
        storage=None,
        sampler=None,
        writer=None,
        collate_fn=None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform=None,
        transform_factory=None,
        batch_size: int | None = None,
        dim_extend: int | None = None,
        generator: torch.Generator | None = None,
        **unsupported,
    ):
        if unsupported:
            raise NotImplementedError(
                f"{type(self).__name__} options not supported by reap-replay: {sorted(unsupported)}"
            )
        if dim_extend not in (None, 0):
            raise NotImplementedError(f"dim_extend={dim_extend} is not supported (only 0)")
        if transform is not None and transform_factory is not None:
            raise ValueError("give at most one of transform and transform_factory")
        storage = _build(storage, Storage, "storage")
        self._storage = storage if storage is not None else ListStorage(1000)
        self._sampler = _build(sampler, Sampler, "sampler") or self._default_sampler()
        self._writer = _build(writer, Writer, "writer") or self._default_writer()
        self._writer.register_storage(self._storage)
        self._batch_size = _check_positive("batch_size", batch_size)
        self._prefetch = _check_positive("prefetch", prefetch) or 0
        if collate_fn is None:
            collate_fn = (
                _default_collate if isinstance(self._storage, ListStorage) else (lambda x: x)
            )
        self._collate_fn = collate_fn
        self._pin_memory = bool(pin_memory)
        if self._pin_memory and not torch.cuda.is_available():
            _warn_once(
                "pin_memory",
                "ReplayBuffer(pin_memory=True): CUDA is unavailable, so batches are not pinned.",
            )
            self._pin_memory = False
        if transform_factory is not None:
            transform = transform_factory()
        self._transforms = [] if transform is None else [transform]
        if generator is not None:
            self._sampler._rng = generator
        self._lock = threading.RLock()
        self._prefetch_lock = threading.Lock()
        self._prefetch_queue: deque = deque()
        self._executor = None
        if self._prefetch:
            self._executor = ThreadPoolExecutor(
                max_workers=self._prefetch, thread_name_prefix="reap-replay-prefetch"
            )
            weakref.finalize(self, self._executor.shutdown, wait=False, cancel_futures=True)

    def _default_sampler(self):
        return RandomSampler()

    def _default_writer(self):
        return RoundRobinWriter()

    # -------------------------------------------------------------- accessors
    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def sampler(self) -> Sampler:
        return self._sampler

    @property
    def writer(self) -> Writer:
        return self._writer

    @property
    def batch_size(self) -> int | None:
        return self._batch_size

    @property
    def transform(self):
        return self._transforms[0] if len(self._transforms) == 1 else list(self._transforms)

    def append_transform(self, transform) -> ReplayBuffer:
        """Adds a transform applied after the others to sampled batches."""
        self._transforms.append(transform)
        return self

    def insert_transform(self, index: int, transform) -> ReplayBuffer:
        """Inserts a transform at position ``index``."""
        self._transforms.insert(index, transform)
        return self

    def __len__(self) -> int:
        with self._lock:
            return len(self._storage)

    def __getitem__(self, index):
        with self._lock:
            data = self._storage.get(index)
        return self._collate_fn(data) if isinstance(data, list) else data

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(storage={self._storage}, sampler={self._sampler}, "
            f"writer={self._writer}, batch_size={self._batch_size})"
        )

    # ----------------------------------------------------------------- writes
    def _inv_transform(self, data):
        for t in reversed(self._transforms):
            inv = getattr(t, "inv", None)
            if inv is not None:
                data = inv(data)
        return data

    def add(self, data) -> int:
        """Writes one item; returns where it lives."""
        data = self._inv_transform(data)
        with self._lock:
            index = self._writer.add(data)
            if index is not None:
                self._sampler.add(index)
        return index

    def extend(self, data, *, update_priority: bool | None = None) -> torch.Tensor:
        """Writes items along the first dimension of ``data``; returns their indices.

        A list holds one item per element (``ListStorage``); a tensor or TensorDict holds
        ``data.shape[0]`` items.
        """
        if update_priority is not None:
            raise NotImplementedError(
                "update_priority is only supported by TensorDict buffers (it reads priority_key)"
            )
        data = self._inv_transform(data)
        with self._lock:
            index = self._writer.extend(data)
            self._sampler.extend(index)
        return index

    def update_priority(self, index, priority) -> None:
        """Sets the priority of the items at ``index`` (a prioritized sampler only)."""
        if isinstance(index, tuple):
            index = torch.stack(index, -1)
        with self._lock:
            self._sampler.update_priority(index, priority, storage=self._storage)

    def update_priorities(self, index, priority) -> None:
        """Alias of :meth:`update_priority`."""
        self.update_priority(index, priority)

    def empty(self, empty_write_count: bool = True) -> None:
        """Removes every item and resets the cursor (and the write count)."""
        self._drop_prefetched()
        with self._lock:
            self._writer._empty(empty_write_count=empty_write_count)
            self._sampler._empty()
            self._storage._empty()

    # ---------------------------------------------------------------- samples
    def _sample(self, batch_size: int):
        with self._lock:
            index, info = self._sampler.sample(self._storage, batch_size)
            data = self._storage.get(index)
        info["index"] = self._sampler._info_index(index)
        data = self._collate_fn(data)
        for t in self._transforms:
            data = t(data)
        if self._pin_memory and isinstance(data, (torch.Tensor, TensorDictBase)):
            data = data.pin_memory()
        return data, info

    def _output(self, data, info):
        return data

    def _resolve_batch_size(self, batch_size):
        if batch_size is None:
            if self._batch_size is None:
                raise RuntimeError(
                    "batch_size not specified: pass it to sample(batch_size) or to the buffer "
                    "constructor (batch_size=...)"
                )
            return self._batch_size
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got batch_size={batch_size!r}")
        return batch_size

    def sample(self, batch_size: int | None = None, return_info: bool = False):
        """A batch of ``batch_size`` items (default: the constructor's ``batch_size``).

        With ``return_info=True``, returns ``(batch, info)``: ``info["index"]`` holds the storage
        indices, plus the sampler's entries (e.g. ``"priority_weight"``).
        """
        size = self._resolve_batch_size(batch_size)
        if self._prefetch and size == self._batch_size:
            data, info = self._prefetched(size)
        else:
            data, info = self._sample(size)
        data = self._output(data, info)
        return (data, info) if return_info else data

    def _prefetched(self, size):
        with self._prefetch_lock:
            while len(self._prefetch_queue) < self._prefetch + 1:
                self._prefetch_queue.append(self._executor.submit(self._sample, size))
            future = self._prefetch_queue.popleft()
        try:
            return future.result()
        except BaseException:
            self._drop_prefetched()
            raise

    def _drop_prefetched(self) -> bool:
        with self._prefetch_lock:
            pending = list(self._prefetch_queue)
            self._prefetch_queue.clear()
        for future in pending:
            future.cancel()
            try:
                future.result()
            except BaseException:  # noqa: S110 - a dropped batch's error is irrelevant
                pass
        return bool(pending)

    def __iter__(self):
        if self._batch_size is None:
            raise RuntimeError(
                "cannot iterate over a replay buffer without a batch_size: pass batch_size=... "
                "to the constructor"
            )
        if self._drop_prefetched():
            self._sampler._new_epoch()  # batches drawn ahead would be lost from this epoch
        self._sampler.ran_out = False
        while True:
            data, info = self._sample(self._batch_size)
            yield self._output(data, info)
            if self._sampler.ran_out:
                return

    def close(self) -> None:
        """Stops the prefetch threads (also done at garbage collection)."""
        self._drop_prefetched()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
            self._prefetch = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """The buffer's state: plain values and tensors (``torch.save``-able with weights_only)."""
        with self._lock:
            return {
                "_storage": self._storage.state_dict(),
                "_sampler": self._sampler.state_dict(),
                "_writer": self._writer.state_dict(),
                "_batch_size": self._batch_size,
            }

    def load_state_dict(self, state_dict: dict) -> None:
        self._drop_prefetched()
        with self._lock:
            self._storage.load_state_dict(state_dict["_storage"])
            self._sampler.load_state_dict(state_dict["_sampler"])
            self._writer.load_state_dict(state_dict["_writer"])
            self._batch_size = state_dict.get("_batch_size", self._batch_size)

    def dumps(self, path, *, checksum: bool = True) -> None:
        """Writes an untearable checkpoint to the directory ``path`` (see :mod:`reap_replay.checkpoint`).

        A :class:`LazyMemmapStorage` whose ``scratch_dir`` is ``path`` is flushed in place, not
        copied: that checkpoint holds until the next write to the buffer (``loads`` refuses it
        after one; see :class:`LazyMemmapStorage`). Other storages' rows are written as raw
        tensor files.

        Keyword Args:
            checksum (bool): store a CRC-32 of every tensor file and of the rows in place, which
                ``loads`` checks. Costs a read of the data: 0.26 s per GB on an idle core, up to
                0.9 s per GB on a loaded one;
                ``False`` skips it for huge buffers. Defaults to ``True``.
        """
        if not isinstance(checksum, bool):
            raise TypeError(f"checksum must be True or False, got checksum={checksum!r}")
        path = Path(path)
        with self._lock:
            tensors: dict = {}
            meta = {
                "buffer": type(self).__name__,
                "batch_size": self._batch_size,
                "storage": self._storage_meta(path, tensors, checksum),
                "sampler": {
                    "kind": type(self._sampler).__name__,
                    "state": _split_state("sampler", self._sampler.state_dict(), tensors),
                },
                "writer": {
                    "kind": type(self._writer).__name__,
                    "state": _split_state("writer", self._writer.state_dict(), tensors),
                },
            }
            ckpt.write_checkpoint(path, meta, tensors, checksum=checksum)

    def _storage_meta(self, path: Path, tensors: dict, checksum: bool) -> dict:
        s = self._storage
        meta = {"kind": type(s).__name__, "max_size": s.max_size, "len": len(s),
                "last_cursor": s._last_cursor}
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
        n = len(s)
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
            for key, value in s._storage.items(include_nested=True):
                if isinstance(value, TensorDictBase):
                    k = key if isinstance(key, tuple) else (key,)
                    meta["tds"].append({"key": list(k), "item_dims": list(value.batch_size[1:])})
        for i, (key, buf) in enumerate(s.leaf_items()):
            name = f"storage/leaf{i}"
            tensors[name] = buf[:n]
            meta["leaves"].append({"key": list(key), "tensor": name})
        return meta

    def loads(self, path, *, verify_checksum: bool = True) -> None:
        """Loads a checkpoint written by :meth:`dumps` into this buffer, all or nothing.

        A directory written by TorchRL's ``ReplayBuffer.dumps`` loads too (data, the
        prioritized or without-replacement sampler's state, the write cursor), without
        unpickling anything: see :mod:`reap_replay.torchrl_checkpoint` for what is skipped.

        The buffer must have the same kinds of storage, sampler and writer and the same
        ``max_size`` (and, if its storage holds data, the same entries). Everything is read and
        checked before anything changes: a missing, torn, foreign, corrupt or inconsistent
        checkpoint, or an in-place one whose rows were written after its ``dumps``, raises
        :class:`~reap_replay.checkpoint.CheckpointError` naming the path, and the buffer is left
        as it was.

        Keyword Args:
            verify_checksum (bool): check the CRC-32 that ``dumps`` stored for every tensor
                file and the rows in place (a read of the data, 0.26 to 0.9 s per GB).
                ``False`` trusts the bytes, for huge buffers. Defaults to ``True``.
        """
        if not isinstance(verify_checksum, bool):
            raise TypeError(f"verify_checksum must be True or False, got verify_checksum={verify_checksum!r}")
        path = Path(path)
        if is_torchrl_checkpoint(path):  # TorchRL's dumps(): no checksums to verify
            meta, tensors = read_torchrl_checkpoint(
                path, self, drop_index=isinstance(self, TensorDictReplayBuffer))
            verify_checksum = False
        else:
            meta, tensors = ckpt.read_checkpoint(path, verify=verify_checksum)
        with self._lock:
            apply = self._plan_load(path, meta, tensors, verify_checksum)
            apply()  # every value was checked: assignments and copies between equal layouts
        self._drop_prefetched()  # batches drawn before the load

    def _plan_load(self, path: Path, meta: dict, tensors: dict, verify: bool):
        """Checks the whole checkpoint against this buffer; returns the function that loads it.

        Nothing changes here; any problem is a CheckpointError saying which part is wrong.
        """
        self._check_kinds(path, meta)
        with _invalid(path, "batch_size"):
            batch_size = meta.get("batch_size")
            if batch_size is not None:
                _check_positive("batch_size", batch_size)
        max_size = self._storage.max_size
        with _invalid(path, "storage"):
            st = meta["storage"]
            n, last = st["len"], st.get("last_cursor")
            if not _is_size(n) or (max_size is not None and n > max_size):
                raise ValueError(f"len={n!r} is not a row count within max_size={max_size}")
            if last is not None and (not _is_size(last) or (max_size is not None and last > max_size)):
                raise ValueError(f"last_cursor={last!r} is not a position within max_size={max_size}")
        with _invalid(path, "sampler"):
            sampler_state = _join_state(meta["sampler"]["state"], tensors, path)
            self._sampler._check_state(sampler_state, n)
        with _invalid(path, "writer"):
            writer_state = _join_state(meta["writer"]["state"], tensors, path)
            self._writer._check_state(writer_state, n)
        with _invalid(path, "storage"):  # last: an in-place storage maps its files here
            load_storage = self._plan_storage(path, st, tensors, n, last, verify)

        def apply():
            load_storage()
            self._sampler.load_state_dict(sampler_state)
            self._writer.load_state_dict(writer_state)
            if batch_size is not None:  # else this buffer's own (README's load_run sets one)
                self._batch_size = batch_size

        return apply

    def _check_kinds(self, path, meta) -> None:
        try:
            pairs = [
                ("storage", meta["storage"]["kind"], type(self._storage).__name__),
                ("sampler", meta["sampler"]["kind"], type(self._sampler).__name__),
                ("writer", meta["writer"]["kind"], type(self._writer).__name__),
            ]
            max_size = meta["storage"]["max_size"]
        except (KeyError, TypeError) as err:
            raise ckpt.CheckpointError(f"{path}: meta.json lacks {err}") from None
        for what, saved, mine in pairs:
            if saved != mine:
                raise ckpt.CheckpointError(
                    f"{path} holds a {what} of kind {saved}, but this buffer uses {mine}"
                )
        if max_size != self._storage.max_size or isinstance(max_size, bool):
            raise ckpt.CheckpointError(
                f"{path} holds a storage of max_size={max_size!r}, this buffer's is "
                f"{self._storage.max_size}"
            )

    def _plan_storage(self, path: Path, meta: dict, tensors: dict, n: int, last, verify: bool):
        s = self._storage
        if isinstance(s, ListStorage):
            names = meta["items"]
            if not isinstance(names, list) or len(names) != n:
                raise ValueError(f"items lists {names!r}, not {n} tensors")
            items = [tensors[name] for name in names]

            def load_list():
                s._storage, s._len, s._last_cursor = items, n, last

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
        data = self._rows_of(meta, tensors, n)
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

    @staticmethod
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


class TensorDictReplayBuffer(ReplayBuffer):
    """A replay buffer of TensorDicts; samples carry ``"index"`` and the sampler's info.

    ``extend`` takes a TensorDict of batch dims ``[N]`` (N items) or ``[N, T, ...]`` (N items of
    shape ``[T, ...]``). With a prioritized sampler, ``priority_key`` entries of the data set the
    priorities on ``extend`` and :meth:`update_tensordict_priority`. Unlike TorchRL, ``extend``
    does not write an ``"index"`` entry into the caller's TensorDict (collectors reuse theirs).

    Keyword Args:
        priority_key (NestedKey): where priorities are read. Defaults to ``"td_error"``.
        **kwargs: as :class:`ReplayBuffer`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap_replay import LazyTensorStorage, TensorDictReplayBuffer
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=8)
        >>> _ = rb.extend(TensorDict({"obs": torch.randn(4, 10, 3)}, [4, 10]))  # [n_envs, T]
        >>> len(rb), rb.sample()["obs"].shape, rb.sample()["index"].shape
        (4, torch.Size([8, 10, 3]), torch.Size([8, 10]))
    """

    def __init__(self, *, priority_key="td_error", **kwargs):
        super().__init__(**kwargs)
        self.priority_key = priority_key

    def _output(self, data, info):
        if not isinstance(data, TensorDictBase):
            raise RuntimeError(
                f"{type(self).__name__} sampled a {type(data).__name__}, not a TensorDict; "
                "use ReplayBuffer for other data"
            )
        ndim = data.batch_dims
        for key, value in info.items():
            if isinstance(value, tuple) and value and all(isinstance(v, torch.Tensor) for v in value):
                value = torch.stack(value, -1)  # an index per storage dim (SliceSampler), as TorchRL
            if isinstance(value, torch.Tensor):
                if value.ndim < ndim:
                    value = value.reshape(*value.shape, *([1] * (ndim - value.ndim))).expand(
                        *value.shape, *data.batch_size[value.ndim :]
                    )
                if isinstance(key, str) and value.shape[:ndim] == data.batch_size:
                    data._set_str(key, value, validated=True, inplace=False)  # checked above
                else:
                    data.set(key, value)
        return data

    def _reduce_priority(self, data, n):
        reduction = getattr(self._sampler, "reduction", "max")
        return priority_of(data, self.priority_key, reduction, n)

    def add(self, data) -> int:
        if not isinstance(data, TensorDictBase):
            raise ValueError(f"{type(self).__name__}.add takes a TensorDict, got {type(data).__name__}")
        priority = None
        if isinstance(self._sampler, PrioritizedSampler):
            priority = self._reduce_priority(data.unsqueeze(0), 1)
            if priority is not None:  # refused before the item is written
                self._sampler._check_priority(priority)
        index = super().add(data)
        if index is not None and priority is not None:
            self.update_priority(torch.tensor([index]), priority)
        return index

    def extend(self, tensordicts, *, update_priority: bool | None = None) -> torch.Tensor:
        if not isinstance(tensordicts, TensorDictBase):
            raise ValueError(
                f"{type(self).__name__}.extend takes a TensorDict, got {type(tensordicts).__name__}; "
                "use ReplayBuffer for other data"
            )
        priority = None
        if update_priority is not False and isinstance(self._sampler, PrioritizedSampler):
            data = self._inv_transform(tensordicts)
            priority = self._reduce_priority(data, data.shape[0])
            if priority is not None:  # refused before any row is written
                self._sampler._check_priority(priority)
        index = super().extend(tensordicts)
        if priority is not None:
            self.update_priority(index, priority)
        return index

    def update_priority(self, index, priority=None) -> None:
        """Sets priorities by index, or ``update_priority(td)`` reads ``td``'s index and priority."""
        if isinstance(index, TensorDictBase) and priority is None:
            self.update_tensordict_priority(index)
            return
        super().update_priority(index, priority)

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        """Reads ``data["index"]`` and ``data[priority_key]`` and updates the priorities."""
        if not isinstance(self._sampler, PrioritizedSampler):
            return
        if data.batch_dims == 0:
            data = data.unsqueeze(0)
        n = data.shape[0]
        priority = self._reduce_priority(data, n)
        if priority is None:
            raise KeyError(f"the TensorDict has no {self.priority_key!r} entry (priority_key)")
        index = data.get("index").reshape(n, -1)[:, 0]
        super().update_priority(index, priority)


class PrioritizedReplayBuffer(ReplayBuffer):
    """A replay buffer with a :class:`PrioritizedSampler` (``alpha``, ``beta``, ``eps``).

    Keyword Args:
        alpha (float): prioritisation exponent.
        beta (float): importance-sampling exponent.
        eps (float): added to ``|priority|``. Defaults to 1e-8.
        dtype (torch.dtype): dtype of the trees. Defaults to ``torch.float32``.
        sampler_device: where the trees live (defaults to the storage's device).
        **kwargs: as :class:`ReplayBuffer` (no ``sampler``).

    Examples:
        >>> import torch
        >>> from reap_replay import LazyTensorStorage, PrioritizedReplayBuffer
        >>> rb = PrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(10))
        >>> _ = rb.extend(torch.arange(4.0))
        >>> rb.update_priority(torch.tensor([0, 1, 2, 3]), torch.tensor([0.0, 0.0, 0.0, 5.0]))
        >>> batch, info = rb.sample(3, return_info=True)
        >>> sorted(info)
        ['index', 'priority_weight']
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float32,
        storage=None,
        sampler=None,
        sampler_device=None,
        **kwargs,
    ):
        if sampler is not None:
            raise ValueError(f"{type(self).__name__} builds its own sampler: do not pass sampler=")
        storage = _build(storage, Storage, "storage")
        if storage is None:
            storage = ListStorage(1000)
        if storage.max_size is None:
            raise ValueError("a prioritized buffer needs a storage with a finite max_size")
        reduction = kwargs.pop("reduction", "max")
        sampler = PrioritizedSampler(
            storage.max_size, alpha, beta, eps, dtype, reduction=reduction, device=sampler_device
        )
        super().__init__(storage=storage, sampler=sampler, **kwargs)


class TensorDictPrioritizedReplayBuffer(TensorDictReplayBuffer):
    """:class:`TensorDictReplayBuffer` with a :class:`PrioritizedSampler`.

    Samples carry ``"index"`` and ``"priority_weight"``; ``priority_key`` entries (default
    ``"td_error"``) set priorities on ``extend`` and :meth:`update_tensordict_priority`.

    Keyword Args:
        alpha (float): prioritisation exponent.
        beta (float): importance-sampling exponent.
        priority_key (NestedKey): defaults to ``"td_error"``.
        eps (float): added to ``|priority|``. Defaults to 1e-8.
        reduction (str): per-item reduction of multi-element priorities. Defaults to ``"max"``.
        sampler_device: where the trees live (defaults to the storage's device).
        **kwargs: as :class:`ReplayBuffer` (no ``sampler``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap_replay import LazyTensorStorage, TensorDictPrioritizedReplayBuffer
        >>> rb = TensorDictPrioritizedReplayBuffer(
        ...     alpha=0.7, beta=0.5, storage=LazyTensorStorage(10), batch_size=4
        ... )
        >>> _ = rb.extend(TensorDict({"obs": torch.randn(6, 3)}, [6]))
        >>> sample = rb.sample()
        >>> sample["td_error"] = torch.rand(4)
        >>> rb.update_tensordict_priority(sample)
        >>> sorted(sample.keys())
        ['index', 'obs', 'priority_weight', 'td_error']
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        priority_key="td_error",
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float32,
        storage=None,
        sampler=None,
        reduction: str = "max",
        sampler_device=None,
        **kwargs,
    ):
        if sampler is not None:
            raise ValueError(f"{type(self).__name__} builds its own sampler: do not pass sampler=")
        storage = _build(storage, Storage, "storage")
        if storage is None:
            storage = ListStorage(1000)
        if storage.max_size is None:
            raise ValueError("a prioritized buffer needs a storage with a finite max_size")
        sampler = PrioritizedSampler(
            storage.max_size, alpha, beta, eps, dtype, reduction=reduction, device=sampler_device
        )
        super().__init__(priority_key=priority_key, storage=storage, sampler=sampler, **kwargs)
