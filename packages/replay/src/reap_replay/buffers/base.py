""":class:`ReplayBuffer`: a storage, a sampler and a writer behind TorchRL's interface.

Thread safety: one lock guards the writer, the sampler and the storage reads, so one writer
thread (a collector) and many sampling threads (``prefetch``, learners) can share a buffer; a
sampled batch never mixes rows from before and after a write.

A buffer sent to another process (``multiprocessing`` with spawn or forkserver) shares its
rows (shared memory, or the files of a ``LazyMemmapStorage``), its length and its write cursor
with the buffer it came from, under one lock across the processes: a write on one side is seen
by the other. A ``ListStorage``, a storage never written to, a ``PrioritizedSampler`` and a
``TensorDictMaxValueWriter`` cannot be shared that way, which raises, as in TorchRL.

Examples:
    >>> import pickle, torch
    >>> from reap_replay import LazyTensorStorage, ReplayBuffer
    >>> rb = ReplayBuffer(storage=LazyTensorStorage(8))
    >>> _ = rb.extend(torch.arange(3))
    >>> copy = pickle.loads(pickle.dumps(rb))  # not on its way to a process: a copy
    >>> _ = copy.extend(torch.arange(2))
    >>> len(rb), len(copy)
    (3, 5)
"""

from __future__ import annotations

import multiprocessing
import threading
import warnings
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import torch
from tensordict import TensorDictBase, is_tensor_collection
from torch.utils._pytree import tree_map

from reap_replay._aliases import DumpsAliases
from reap_replay._warn import _warn_once
from reap_replay.buffers import checkpointing
from reap_replay.buffers.checkpointing import _check_positive
from reap_replay.buffers.transforms import TransformChain, inverted
from reap_replay.samplers import RandomSampler, Sampler
from reap_replay.storages import ListStorage, Storage
from reap_replay.storages.base import _spawning
from reap_replay.writers import RoundRobinWriter, Writer


def _build(component, base, name):
    if component is None or isinstance(component, base):
        return component
    if callable(component):
        built = component()
        if isinstance(built, base):
            return built
    raise TypeError(
        f"{name} must be either a {base.__name__} or a callable returning a {name} instance, "
        f"got {component!r}"
    )


def _stack_items(items):
    """The default ``collate_fn`` of a ``ListStorage``: a list of tensors or TensorDicts stacked."""
    if isinstance(items, list) and items and all(
        isinstance(x, (torch.Tensor, TensorDictBase)) for x in items
    ):
        return torch.stack(items)
    return items


def _as_is(data):
    return data


def _refuse_options(name: str, *, sample_unit, checkpointer, consume_after_n_samples,
                    compilable, service_backend, transport, transport_options, dim_extend,
                    prefetch) -> None:
    """Raises for TorchRL options reap-replay cannot honour, naming what to do instead."""
    if sample_unit is not None:
        raise NotImplementedError(
            f"{name}(sample_unit=...): TorchRL's sample units are not in reap-replay; sample "
            "windows of steps with a SliceSampler, or pass sample_unit=None"
        )
    if checkpointer is not None:
        raise NotImplementedError(
            f"{name}(checkpointer=...): reap-replay writes its own checkpoints (rb.dumps(path): raw "
            "tensors and JSON, nothing pickled); pass checkpointer=None"
        )
    if consume_after_n_samples is not None:
        raise NotImplementedError(
            f"{name}(consume_after_n_samples={consume_after_n_samples!r}) is not supported by "
            "reap-replay; a SamplerWithoutReplacement draws each item once per epoch"
        )
    if compilable is not None and not isinstance(compilable, bool):
        raise TypeError(f"compilable must be True, False or None, got compilable={compilable!r}")
    if service_backend == "ray":
        raise NotImplementedError(
            f"{name}(service_backend='ray'): use reap_ray.RayReplayBuffer (reap-collectors-ray), "
            "which runs this buffer in a Ray actor"
        )
    if service_backend != "direct":
        raise ValueError(
            f"Unsupported service backend {service_backend!r}. Expected 'direct' (a buffer in this "
            "process; for one in a Ray actor use reap_ray.RayReplayBuffer)."
        )
    if transport not in ("auto", "direct"):
        raise ValueError("A direct ReplayBuffer only supports transport='auto' or 'direct'.")
    if transport_options:
        raise ValueError("transport_options are only valid for a remote ReplayBuffer.")
    if dim_extend is not None and dim_extend < 0:
        raise ValueError("dim_extend must be a positive value.")
    if prefetch is not None and (isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0):
        raise ValueError(f"prefetch must be None or an integer >= 0, got prefetch={prefetch!r}")


def _process_lock():
    """A lock that holds across processes (those spawned, forkserved or forked alike)."""
    return multiprocessing.get_context("spawn").RLock()



def _on_leaves(data, fn):
    """``fn(data)`` for a tensor or TensorDict, ``fn`` of each leaf for another pytree (a dict, ...)."""
    if isinstance(data, (torch.Tensor, TensorDictBase)) or is_tensor_collection(data):
        return fn(data)
    return tree_map(fn, data)

class _SharedLock:
    """The lock of a buffer shared with other processes.

    Entering it takes a lock held across the processes and reads the storage's length and the
    writer's cursor from shared memory; leaving it writes them back. Buffers never shared keep
    a plain ``threading.RLock`` and pay nothing for this.
    """

    def __init__(self, lock, progress: torch.Tensor, storage: Storage, writer: Writer):
        self.lock, self.progress, self.storage, self.writer = lock, progress, storage, writer
        self.depth = 0  # re-entries by the holding thread read and write the counters once

    def __enter__(self):
        self.lock.acquire()
        self.depth += 1
        if self.depth == 1:
            length, last, cursor, count = self.progress.tolist()
            self.storage._len, self.storage._last_cursor = length, (None if last < 0 else last)
            self.writer._cursor, self.writer._write_count = cursor, count
        return self

    def __exit__(self, *exc):
        self.depth -= 1
        if self.depth == 0:
            last = self.storage._last_cursor
            self.progress.copy_(torch.tensor([
                self.storage._len, -1 if last is None else last, self.writer._cursor,
                self.writer._write_count,
            ]))
        self.lock.release()

    def __getstate__(self):
        return {**self.__dict__, "depth": 0}


class ReplayBuffer(DumpsAliases):
    """A replay buffer: ``extend``/``add`` write through the writer, ``sample`` reads.

    Keyword Args:
        storage (Storage or callable, optional): defaults to ``ListStorage(1000)``.
        sampler (Sampler or callable, optional): defaults to :class:`RandomSampler`.
        writer (Writer or callable, optional): defaults to :class:`RoundRobinWriter`.
        collate_fn (callable, optional): applied to what the storage returns (defaults to
            stacking the items of a ``ListStorage``).
        pin_memory (bool): pin sampled CPU batches (needs CUDA; otherwise warns once).
        prefetch (int, optional): sample this many batches ahead in background threads
            (``None`` or 0: none). Needs ``batch_size``.
        transform (callable, optional): applied to every batch read (``sample``, ``rb[i]``);
            its ``inv`` (if any) to data being written.
        transform_factory (callable, optional): builds ``transform``.
        batch_size (int, optional): the default ``sample()`` size; needed for iteration.
        dim_extend (int, optional): only ``None`` or 0 (items along the first dimension).
        generator (torch.Generator, optional): random source of the sampler.
        shared (bool): guard writes and samples with a lock across processes, for a buffer
            used by several processes. A buffer sent to another process shares its rows and
            counters either way.
        compilable, delayed_init, service_backend, service_backend_options, transport,
            transport_options: TorchRL's, taken at the values of a local buffer built at once
            (``service_backend='ray'`` is ``reap_ray.RayReplayBuffer``).
        sample_unit, checkpointer, consume_after_n_samples: TorchRL's, only ``None``.

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
        >>> rb[2:4] = torch.tensor([20, 30])  # in place: the cursor does not move
        >>> rb[:5].tolist(), rb.write_count
        ([0, 1, 20, 30, 4], 10)
    """

    _is_tensordict = False

    def __init__(
        self,
        *,
        storage=None,
        sampler=None,
        sample_unit=None,
        writer=None,
        collate_fn=None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform=None,
        transform_factory=None,
        batch_size: int | None = None,
        dim_extend: int | None = None,
        checkpointer=None,
        generator: torch.Generator | None = None,
        consume_after_n_samples: int | None = None,
        shared: bool = False,
        compilable: bool | None = None,
        delayed_init: bool | None = None,
        service_backend: str = "direct",
        service_backend_options: dict | None = None,
        transport: str = "auto",
        transport_options: dict | None = None,
    ):
        name = type(self).__name__
        _refuse_options(
            name, sample_unit=sample_unit, checkpointer=checkpointer,
            consume_after_n_samples=consume_after_n_samples, compilable=compilable,
            service_backend=service_backend, transport=transport,
            transport_options=transport_options, dim_extend=dim_extend, prefetch=prefetch,
        )
        if transform is not None and transform_factory is not None:
            raise TypeError(
                "transform and transform_factory are mutually exclusive: give at most one"
            )
        self._batch_size = _check_positive("batch_size", batch_size)
        self._prefetch_cap = prefetch or 0
        if self._prefetch_cap and self._batch_size is None:
            raise ValueError(
                "Dynamic batch-size specification is incompatible with multithreaded sampling. "
                "When using prefetch, the batch-size must be specified in advance: pass "
                "batch_size=... to the constructor."
            )
        if shared and self._prefetch_cap:
            raise ValueError(
                "Cannot share prefetched replay buffers. Pass prefetch=0 or shared=False."
            )
        storage = _build(storage, Storage, "storage")
        self._storage = storage if storage is not None else ListStorage(1000)
        self._sampler = _build(sampler, Sampler, "sampler") or self._default_sampler()
        self._writer = _build(writer, Writer, "writer") or self._default_writer()
        self._writer.register_storage(self._storage)
        if dim_extend not in (None, self._storage.ndim - 1):
            raise NotImplementedError(
                f"dim_extend={dim_extend} is not supported: reap-replay extends along the storage's "
                f"last item dimension (dim_extend=storage.ndim - 1 = {self._storage.ndim - 1}); "
                "transpose the data before extend()"
            )
        if self._batch_size is None and getattr(self._sampler, "drop_last", False):
            raise ValueError(
                "Samplers with drop_last=True must work with a predictable batch-size. "
                "Please pass the batch-size to the ReplayBuffer constructor."
            )
        if collate_fn is None:
            collate_fn = _stack_items if isinstance(self._storage, ListStorage) else _as_is
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
        self._transform = TransformChain()
        if transform is not None:
            self.append_transform(transform)
        self._rng = None
        if generator is not None:
            self.set_rng(generator)
        self.shared = bool(shared)
        self._shared_progress = None
        self._lock = _process_lock() if self.shared else threading.RLock()
        self._warned_batch_size_conflict = False
        self._start_prefetch()

    def _start_prefetch(self) -> None:
        self._prefetch_lock = threading.Lock()
        self._prefetch_queue: deque = deque()
        self._executor = None
        if self._prefetch_cap:
            self._executor = ThreadPoolExecutor(
                max_workers=self._prefetch_cap, thread_name_prefix="reap-replay-prefetch"
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
    def _prefetch(self) -> bool:
        return bool(self._prefetch_cap)

    @property
    def dim_extend(self) -> int:
        """The dimension of the data ``extend`` writes rows along: ``storage.ndim - 1`` (0 but
        for ``ndim`` > 1 storages, whose ``[B, T]`` batches are written as ``T`` rows)."""
        return self._storage.ndim - 1

    def _transpose(self, data):
        """``[B, T, ...]`` data as ``[T, B, ...]`` rows (``dim_extend`` swapped with 0)."""
        return _on_leaves(data, lambda x: x.transpose(self.dim_extend, 0))

    @property
    def initialized(self) -> bool:
        """Whether the components are built: always (reap builds them at construction)."""
        return True

    @property
    def write_count(self) -> int:
        """How many items were written through ``add`` and ``extend``."""
        with self._lock:
            return self._writer._write_count

    @property
    def transform(self) -> TransformChain:
        """The transforms, in the order they apply to batches read (a list; calling it applies
        them)."""
        return self._transform

    def share(self, shared: bool = True) -> ReplayBuffer:
        """Guards writes and samples with a lock across processes (``True``) or a thread lock."""
        if shared and self._prefetch_cap:
            raise ValueError("Cannot share prefetched replay buffers. Pass prefetch=0 or shared=False.")
        with self._lock:
            if bool(shared) != self.shared and self._shared_progress is None:
                self._lock = _process_lock() if shared else threading.RLock()
            self.shared = bool(shared)
        return self

    def set_rng(self, generator: torch.Generator | None) -> None:
        """Makes ``generator`` the random source of the sampler (and the storage and writer)."""
        self._rng = generator
        self._storage._rng = generator
        self._sampler._rng = generator
        self._writer._rng = generator

    def set_storage(self, storage: Storage, collate_fn=None) -> Storage:
        """Replaces the storage (the writer writes to it from now on); returns the former one."""
        with self._lock:
            previous, self._storage = self._storage, storage
            self._writer.register_storage(storage)
            if collate_fn is None:
                collate_fn = _stack_items if isinstance(storage, ListStorage) else _as_is
            self._collate_fn = collate_fn
            storage._rng = self._rng
        self._drop_prefetched()
        return previous

    def set_sampler(self, sampler: Sampler) -> Sampler:
        """Replaces the sampler; returns the former one."""
        with self._lock:
            previous, self._sampler = self._sampler, sampler
            sampler._rng = self._rng
        self._drop_prefetched()
        return previous

    def set_writer(self, writer: Writer) -> Writer:
        """Replaces the writer (registered with the storage); returns the former one."""
        with self._lock:
            previous, self._writer = self._writer, writer
            writer.register_storage(self._storage)
            writer._rng = self._rng
        return previous

    def append_transform(self, transform, *, invert: bool = False) -> ReplayBuffer:
        """Adds a transform applied after the others to batches read; with ``invert=True`` it
        applies to data written instead (and its ``inv``, if any, to data read)."""
        self._transform.append(self._prepared(transform, invert))
        return self

    def insert_transform(self, index: int, transform, *, invert: bool = False) -> ReplayBuffer:
        """Inserts a transform at position ``index`` (``ValueError`` past the end)."""
        self._transform.insert(index, self._prepared(transform, invert))
        return self

    @staticmethod
    def _prepared(transform, invert: bool):
        if not callable(transform):
            raise RuntimeError(
                f"transform must be either a Transform instance or a callable, got {transform!r}"
            )
        if callable(getattr(transform, "eval", None)):
            transform.eval()  # as TorchRL: a buffer's transforms do not update statistics
        return inverted(transform) if invert else transform

    def __len__(self) -> int:
        with self._lock:
            return len(self._storage)

    def stats(self) -> dict:
        """A snapshot of the buffer's counters: size, write_count, prefetch_queue_size,
        initialized, capacity and utilization (the last two with a bounded storage)."""
        with self._lock:
            size, count = len(self._storage), self._writer._write_count
        out = {"size": size, "write_count": count, "prefetch_queue_size": len(self._prefetch_queue),
               "initialized": True}
        if self._storage.max_size is not None:
            out["capacity"] = self._storage.max_size
            out["utilization"] = size / self._storage.max_size
        return out

    def can_sample(self, batch_size: int | None = None) -> bool:
        """Whether ``sample(batch_size)`` can draw a batch now."""
        if batch_size is None:
            batch_size = self._batch_size
        if batch_size is None:
            raise RuntimeError(
                "batch_size not specified. Configure it on the replay buffer or pass it to "
                "can_sample()."
            )
        with self._lock:
            n = len(self._storage)
        return n >= batch_size if getattr(self._sampler, "drop_last", False) else n > 0

    def __repr__(self) -> str:
        transform = f"transform={list(self._transform)}, " if self._transform else ""
        return (
            f"{type(self).__name__}(storage={self._storage}, sampler={self._sampler}, "
            f"writer={self._writer}, {transform}batch_size={self._batch_size})"
        )

    # ------------------------------------------------------------ indexing
    def __getitem__(self, index):
        """Stored items read in place of a sample: an int, a slice, indices, or a key
        (``rb["obs"]`` is ``rb[:]["obs"]``); the transforms apply, as to samples."""
        if isinstance(index, str) or (isinstance(index, tuple) and index and isinstance(index[0], str)):
            return self[:][index]
        if isinstance(index, tuple):
            if len(index) == 1:
                return self[index[0]]
            return self[:][index]
        with self._lock:
            if self._storage.ndim > 1:  # the [B, T] layout extend() took
                data = _on_leaves(self._transpose(self._storage.get(slice(None))), lambda x: x[index])
            else:
                data = self._storage.get(index)
        if isinstance(data, list):
            data = self._collate_fn(data)
        return self._transform(data) if self._transform else data

    def __setitem__(self, index, value) -> None:
        """Overwrites stored items in place (``rb[3:4] = td``): the cursor, the length and the
        sampler's state do not move; the transforms' ``inv`` applies, as to writes."""
        if isinstance(index, str) or (isinstance(index, tuple) and index and isinstance(index[0], str)):
            raise NotImplementedError(
                "rb[key] = value is not supported: write whole items (rb[index] = data), or "
                "rb.set_(key, value) for one entry of every item"
            )
        if self._transform:
            value = self._transform.inv(value)
        with self._lock:
            if self._storage.ndim > 1:  # index the [B, T] layout extend() took, item by item
                self._set_items(index, value)
            else:
                self._storage[index] = value
        self._drop_prefetched()

    def _set_items(self, index, value) -> None:
        storage = self._storage
        rows = storage._len
        items = self._transpose(torch.arange(rows * storage._cells).view(rows, *storage._inner))[index]
        if isinstance(value, TensorDictBase):
            value = value.expand(*items.shape) if value.batch_size != items.shape else value
            value = value.reshape(-1)
        elif isinstance(value, torch.Tensor) and storage._flat:
            item_shape = storage._flat[0][2][len(storage._inner):]
            value = value.expand(*items.shape, *item_shape).reshape(-1, *item_shape)
        storage._set_items(items.reshape(-1), value)

    def read_all_in_order(self, end: int | None = None):
        """The stored items in storage order (``rb[:end]``)."""
        return self[:] if end is None else self[:end]

    def write_all(self, data, end: int | None = None) -> None:
        """Overwrites the first items in storage order (``rb[:end] = data``)."""
        if end is None:
            end = data.shape[0] if isinstance(data, (torch.Tensor, TensorDictBase)) else len(data)
        self[:end] = data

    def set_(self, key, value) -> ReplayBuffer:
        """Overwrites entry ``key`` of every stored item with ``value`` (rows in storage order)."""
        return self.set_at_(key, value, slice(0, len(self)))

    def set_at_(self, key, value, index) -> ReplayBuffer:
        """Overwrites entry ``key`` of the items at ``index``."""
        with self._lock:
            rows = self._storage.get(index)
            rows.set_(key, value)
            self._storage.set(index, rows)
        self._drop_prefetched()
        return self

    def update_(self, input_dict_or_td, clone: bool = False, *, keys_to_update=None) -> ReplayBuffer:
        """Overwrites entries of every stored item in place with those of ``input_dict_or_td``."""
        with self._lock:
            rows = self._storage.get(slice(None))
            rows.update_(input_dict_or_td, clone=clone, keys_to_update=keys_to_update)
            self._storage.set(slice(0, rows.shape[0]), rows)
        self._drop_prefetched()
        return self

    # ----------------------------------------------------------------- writes
    def add(self, data) -> int:
        """Writes one item; returns where it lives."""
        if self._transform:
            data = self._inv_one(data)
            if data is None:
                return torch.zeros((0, 1), dtype=torch.long)
        with self._lock:
            index = self._writer.add(data)
            if index is not None:
                self._sampler_add(index)
        return index

    def _sampler_add(self, row: int) -> None:
        if self._storage.ndim > 1:  # a row of several items
            self._sampler.extend(self._storage._row_items(torch.tensor([row])))
        else:
            self._sampler.add(row)

    def _inv_one(self, data):
        """The inverse transforms of one item, seen as a batch of one (as TorchRL's)."""
        if not is_tensor_collection(data):
            return self._transform.inv(data)
        out = self._transform.inv(data.unsqueeze(-1))
        return None if out is None else out.squeeze(-1)

    def extend(self, data, *, update_priority: bool | None = None) -> torch.Tensor:
        """Writes items along the first dimension of ``data``; returns their indices.

        A list holds one item per element; a tensor, a TensorDict or a tuple or dict of tensors
        (a pytree) holds ``shape[0]`` items.
        """
        if update_priority is not None:
            raise NotImplementedError(
                "update_priority is not supported in this class: see "
                "TensorDictReplayBuffer.extend, which reads priorities from the data"
            )
        if self._transform:
            data = self._transform.inv(data)
            if data is None:
                return torch.zeros((0, 1), dtype=torch.long)
        return self._write(data)

    def _write(self, data) -> torch.Tensor:
        """Writes a batch; returns the indices of its items (``[n, ndim]`` with ``ndim`` > 1)."""
        if self._storage.ndim == 1:
            with self._lock:
                index = _outside_graphs(self._writer.extend, data)
                self._sampler.extend(index)
            return index
        with self._lock:
            items = self._storage._row_items(self._writer.extend(self._transpose(data)))
            self._sampler.extend(items)
        return torch.stack(self._storage._unravel(items), -1)

    def update_priority(self, index, priority) -> None:
        """Sets the priority of the items at ``index`` (a prioritized sampler only)."""
        ndim = self._storage.ndim
        if ndim > 1:  # (row, column) indices to item numbers; [B, T] priorities to rows first
            if isinstance(index, tuple) or (torch.as_tensor(index).ndim > 1 and index.shape[-1] == ndim):
                index = self._storage._ravel(index)
            priority = torch.as_tensor(priority)
            if priority.ndim > 1:
                priority = self._transpose(priority).flatten()
        elif isinstance(index, tuple):
            index = torch.stack(index, -1)
        with self._lock:
            self._sampler.update_priority(index, priority, storage=self._storage)

    def update_priorities(self, index, priority) -> None:
        """Alias of :meth:`update_priority`."""
        self.update_priority(index, priority)

    def mark_update(self, index) -> None:
        """Tells the sampler that the items at ``index`` were rewritten (a prioritized sampler
        gives them the default priority)."""
        with self._lock:
            self._sampler.mark_update(index, storage=self._storage)

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
            index, info = _outside_graphs(self._sampler.sample, self._storage,
                                          batch_size * self._sampler._batch_size_multiplier)
            if self._storage.ndim > 1:
                index = self._storage._unravel(index)  # item numbers to (row, column)
            data = self._storage.get(index)
        info["index"] = self._sampler._info_index(index)
        data = self._collate_fn(data)
        if self._transform:
            data = self._transform(data)
        if self._pin_memory and isinstance(data, (torch.Tensor, TensorDictBase)):
            data = data.pin_memory()
        return data, info

    def _output(self, data, info):
        return data

    def _resolve_batch_size(self, batch_size):
        if batch_size is None:
            if self._batch_size is None:
                raise RuntimeError(
                    "batch_size not specified. You can specify the batch_size when constructing "
                    "the replay buffer (batch_size=...), or pass it to the sample method."
                )
            return self._batch_size
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got batch_size={batch_size!r}")
        if self._batch_size is not None and batch_size != self._batch_size and not self._warned_batch_size_conflict:
            self._warned_batch_size_conflict = True
            warnings.warn(
                f"Got conflicting batch_sizes in constructor ({self._batch_size}) and `sample` "
                f"({batch_size}). The batch-size provided to the sample method will prevail.",
                stacklevel=4,
            )
        return batch_size

    def sample(self, batch_size: int | None = None, return_info: bool = False):
        """A batch of ``batch_size`` items (default: the constructor's ``batch_size``).

        With ``return_info=True``, returns ``(batch, info)``: ``info["index"]`` holds the storage
        indices, plus the sampler's entries (e.g. ``"priority_weight"``).
        """
        data, info = self._draw(batch_size)
        data = self._output(data, info)
        return (data, info) if return_info else data

    def _draw(self, batch_size):
        """``(batch, info)``: prefetched when ``batch_size`` is the buffer's own."""
        size = self._resolve_batch_size(batch_size)
        if self._prefetch_cap and size == self._batch_size:
            return self._prefetched(size)
        return self._sample(size)

    def _prefetched(self, size):
        with self._prefetch_lock:
            while len(self._prefetch_queue) < self._prefetch_cap + 1:
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
                "Cannot iterate over the replay buffer. Batch_size was not specified during "
                "construction of the replay buffer: pass batch_size=... to the constructor."
            )
        if self._drop_prefetched():
            self._sampler._new_epoch()  # batches drawn ahead would be lost from this epoch
        self._sampler.ran_out = False
        while True:
            data, info = self._sample(self._batch_size)
            yield self._output(data, info)
            if self._sampler.ran_out:
                return

    def next(self):
        """The next batch of an iteration over the buffer (``None`` after the last one)."""
        if getattr(self, "_iterator", None) is None:
            self._iterator = iter(self)
        try:
            return next(self._iterator)
        except StopIteration:
            self._iterator = None
            return None

    # --------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Stops the prefetch threads (also done at garbage collection)."""
        self._drop_prefetched()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
            self._prefetch_cap = 0

    def shutdown(self, timeout: float | None = None) -> None:
        """TorchRL's name for :meth:`close`."""
        self.close()

    def synchronize(self) -> None:
        """Waits for the batches being prefetched (their errors raise here)."""
        with self._prefetch_lock:
            pending = list(self._prefetch_queue)
        for future in pending:
            future.result()

    def start(self) -> ReplayBuffer:
        """This buffer (a local buffer is always started)."""
        return self

    def client(self) -> ReplayBuffer:
        """This buffer (a local buffer is its own client)."""
        return self

    @property
    def is_alive(self) -> bool:
        return True

    @property
    def service_backend(self) -> str:
        return "direct"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self) -> dict:
        """What pickling keeps: everything but the threads and the locks.

        On its way to a new process the buffer moves its counters and lock into shared memory
        first, and the copy there shares them; any other pickle is an independent copy.
        """
        spawning = _spawning()
        if spawning:
            self._share_with_processes()
        with self._lock:  # counters read under the lock are those of every process
            state = {k: v for k, v in self.__dict__.items()
                     if k not in ("_prefetch_lock", "_prefetch_queue", "_executor", "_iterator")}
        if not spawning:
            state["_lock"], state["_shared_progress"] = None, None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._lock is None:
            self._lock = _process_lock() if self.shared else threading.RLock()
        self._start_prefetch()

    def _share_with_processes(self) -> None:
        """Keeps the length, the write cursor and the lock in shared memory from now on."""
        if self._shared_progress is not None:
            return
        for part in (self._storage, self._sampler, self._writer):
            part.__getstate__()  # raises, before anything changes, for a part that cannot go
        with self._lock:
            last = self._storage._last_cursor
            self._shared_progress = torch.tensor([
                self._storage._len, -1 if last is None else last, self._writer._cursor,
                self._writer._write_count,
            ]).share_memory_()
            lock = self._lock if self.shared else _process_lock()
            self._lock = _SharedLock(lock, self._shared_progress, self._storage, self._writer)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """The buffer's state: plain values and tensors (``torch.save``-able with weights_only)."""
        with self._lock:
            return {
                "_storage": self._storage.state_dict(),
                "_sampler": self._sampler.state_dict(),
                "_writer": self._writer.state_dict(),
                "_transforms": self._transform.state_dict(),
                "_batch_size": self._batch_size,
                "_rng": None if self._rng is None else (self._rng.get_state(), str(self._rng.device)),
            }

    def load_state_dict(self, state_dict: dict) -> None:
        self._drop_prefetched()
        with self._lock:
            self._storage.load_state_dict(state_dict["_storage"])
            self._sampler.load_state_dict(state_dict["_sampler"])
            self._writer.load_state_dict(state_dict["_writer"])
            self._transform.load_state_dict(state_dict.get("_transforms", []))
            self._batch_size = state_dict.get("_batch_size", self._batch_size)
            rng = state_dict.get("_rng")
            if rng is not None:
                generator = torch.Generator(device=rng[1])
                generator.set_state(rng[0])
                self.set_rng(generator)

    def dumps(self, path, *, checksum: bool = True) -> None:
        """Writes an untearable checkpoint to the directory ``path`` (see :mod:`reap_replay.checkpoint`).

        A :class:`LazyMemmapStorage` whose ``scratch_dir`` is ``path`` is flushed in place, not
        copied: that checkpoint holds until the next write to the buffer (``loads`` refuses it
        after one; see :class:`LazyMemmapStorage`). Other storages' rows are written as raw
        tensor files. The state of the buffer's ``generator`` (if any) is kept too.

        Keyword Args:
            checksum (bool): store a CRC-32 of every tensor file and of the rows in place, which
                ``loads`` checks. Costs a read of the data: 0.26 s per GB on an idle core, up to
                0.9 s per GB on a loaded one;
                ``False`` skips it for huge buffers. Defaults to ``True``.
        """
        checkpointing.dump(self, path, checksum)

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
        checkpointing.load(self, path, verify_checksum)


@torch.compiler.disable
def _outside_graphs(fn, *args):
    """``fn(*args)`` run eagerly inside ``torch.compile``d code: the writers' cursors and the
    storages' lengths are Python ints, which a graph would specialise on (a recompile per value)."""
    return fn(*args)
