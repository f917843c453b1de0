"""Weight-sync schemes and the TorchRL-style weight updaters built on them.

A scheme moves policy weights from the trainer (the parent process) to the collector workers.
Each worker keeps its own copy of the policy and swaps in new weights only between two
rollouts, so every batch is produced by exactly one policy version, which the batch records
under ``("collector", "policy_version")`` with ``worker_tags=True``.

* :class:`SharedMemWeightSyncScheme` (``"shared_mem"``, the default for CPU policies): each
  worker owns a shared-memory copy of its weights; the parent writes new weights into it and
  bumps a version counter under a lock; before each rollout the worker compares the counter
  with the version it runs and, when they differ, copies the shared weights into its policy.
* :class:`PipeWeightSyncScheme` (``"pipe"``, the default when ``policy_device`` is not the CPU):
  the weights travel as plain arrays over the worker's pipe and are loaded onto the policy's
  device before the next rollout.

Both are registered through ``reap_register_weight_sync_schemes``; pass one as
``weight_sync_schemes={"policy": SharedMemWeightSyncScheme()}`` (or by name, ``{"policy":
"pipe"}``). :class:`MultiProcessedWeightUpdater` and reap-core's ``VanillaWeightUpdater`` are
accepted as ``weight_updater=`` and push through the collector's scheme.

Examples:
    >>> from reap.plugins import get_weight_sync_scheme
    >>> scheme = get_weight_sync_scheme("shared_mem").cls()
    >>> scheme.name
    'shared_mem'
    >>> type(get_weight_sync_scheme("pipe").cls()).__name__
    'PipeWeightSyncScheme'
"""

from __future__ import annotations

from collections.abc import Callable

from tensordict import TensorDict, TensorDictBase

from reap.errors import WorkerError
from reap.weight_update import (
    VanillaWeightUpdater,
    WeightReceiver,
    WeightSyncScheme,
    WeightUpdaterBase,
    copy_weights,
)


class SharedMemReceiver(WeightReceiver):
    """A worker's shared-memory copy of its weights, loaded when the version counter moved."""

    #: seconds to wait for the weights lock (the parent holds it only while it copies)
    lock_timeout = 60.0

    def __init__(self, counter):
        super().__init__()
        self.counter = counter
        self.shared: TensorDictBase | None = None

    def attach(self, policy) -> TensorDictBase | None:
        super().attach(policy)
        if self.local is None:
            return None
        self.shared = self.local.clone().share_memory_()
        return self.shared

    def poll(self) -> int:
        if self.counter.value != self.version and self.shared is not None:
            lock = self.counter.get_lock()
            if not lock.acquire(timeout=self.lock_timeout):
                raise RuntimeError(
                    f"the shared weights stayed locked for {self.lock_timeout:g} s: the process "
                    "writing them (the trainer) died or hung while pushing weights"
                )
            try:
                copy_weights(self.local, self.shared)
                self.version = self.counter.value
            finally:
                lock.release()
        return self.version


class SharedMemWeightSyncScheme(WeightSyncScheme):
    """Weights through per-worker shared-memory buffers, guarded by a version counter.

    Args:
        lock_timeout: seconds a push waits for a worker's weights lock (a worker holds it only
            while it copies the weights); past it the push raises a ``WorkerError`` naming the
            worker, which died or hung while holding it.

    Examples:
        >>> from reap_mp import SharedMemWeightSyncScheme
        >>> SharedMemWeightSyncScheme().name
        'shared_mem'
    """

    name = "shared_mem"
    carried = False

    def __init__(self, *, lock_timeout: float = 30.0, **options):
        if isinstance(lock_timeout, bool) or not isinstance(lock_timeout, (int, float)) or lock_timeout <= 0:
            raise ValueError(
                f"SharedMemWeightSyncScheme: lock_timeout must be a positive number of seconds, got {lock_timeout!r}"
            )
        super().__init__(**options)
        self.lock_timeout = float(lock_timeout)

    def bind(self, num_workers, send, *, context=None, **transport):
        super().bind(num_workers, send)
        self._ctx = context
        self._counters = [None] * num_workers

    def worker_state(self, idx):
        # a fresh counter (and lock) for every start: a worker killed while holding its lock
        # must not leave the lock held for the worker that replaces it
        self._counters[idx] = self._ctx.Value("q", 0)
        return SharedMemReceiver(self._counters[idx])

    def push(self, weights, worker_ids, version):
        for idx in worker_ids:
            buffer = self._buffers.get(idx)
            if buffer is None:
                continue
            counter = self._counters[idx]
            lock = counter.get_lock()
            if not lock.acquire(timeout=self.lock_timeout):
                raise WorkerError(
                    f"collector worker {idx} held its weights lock for {self.lock_timeout:g} s: it "
                    "died or hung while loading weights", worker_idx=idx)
            try:
                copy_weights(buffer, weights)
                counter.value = version
            finally:
                lock.release()

    def close(self):
        super().close()
        self._counters = []


class PipeWeightSyncScheme(WeightSyncScheme):
    """Weights as plain arrays over each worker's pipe (for policies on another device).

    Examples:
        >>> from reap_mp import PipeWeightSyncScheme
        >>> PipeWeightSyncScheme().name
        'pipe'
    """

    name = "pipe"
    carried = False

    def worker_state(self, idx):
        return WeightReceiver()

    def on_worker_ready(self, idx, buffer):
        self._buffers[idx] = TensorDict() if buffer is None else buffer

    def has_weights(self, idx):
        return True

    def push(self, weights, worker_ids, version):
        flat = weights.flatten_keys(".")
        arrays = {k: v.detach().cpu().numpy() for k, v in flat.items()}
        for idx in worker_ids:
            self._send(idx, ("weights", arrays, version))


class MultiProcessedWeightUpdater(WeightUpdaterBase):
    """TorchRL's updater for multi-process collectors, pushing through the collector's scheme.

    Args:
        get_server_weights: returns the weights to push when ``push_weights()`` gets none; without
            it the collector's own ``policy`` (the trainer's module) is the source.
        policy_weights: optional ``{key: TensorDict}`` of extra local copies (TorchRL's
            per-device weights) that are updated in place on every push too.

    Examples:
        >>> from reap_mp import MultiProcessedWeightUpdater
        >>> updater = MultiProcessedWeightUpdater(get_server_weights=None, policy_weights={})
        >>> updater.all_worker_ids() is None
        True
    """

    def __init__(self, *, get_server_weights: Callable | None = None, policy_weights: dict | None = None):
        self.weights_getter = get_server_weights
        self._policy_weights = dict(policy_weights or {})

    def all_worker_ids(self):
        collector = self.collector
        return None if collector is None else list(range(collector.num_workers))

    def push_weights(self, weights=None, worker_ids=None) -> None:
        if weights is None and self.weights_getter is not None:
            weights = self.weights_getter()
        if self.collector is None:
            raise RuntimeError("MultiProcessedWeightUpdater: not registered with a collector yet")
        pushed = self.collector._push_weights(weights, worker_ids)
        for local in self._policy_weights.values():
            copy_weights(local, pushed)


class _VanillaAdapter(MultiProcessedWeightUpdater):
    """Lets reap-core's ``VanillaWeightUpdater`` drive a multi-process collector."""

    def __init__(self, vanilla: VanillaWeightUpdater):
        super().__init__(get_server_weights=vanilla.weight_getter)
        self.vanilla = vanilla

    def register_collector(self, collector) -> None:
        super().register_collector(collector)
        self.vanilla.register_collector(collector)  # the user's vanilla.push_weights() comes here

    def push_weights(self, weights=None, worker_ids=None) -> None:
        if weights is None and self.weights_getter is None and self.vanilla.policy_weights is not None:
            weights = self.vanilla.policy_weights
        super().push_weights(weights, worker_ids)


def adapt_updater(updater, owner: str) -> WeightUpdaterBase:
    """The updater a multi-process collector uses for ``weight_updater=`` (None, class or instance)."""
    if updater is None:
        return MultiProcessedWeightUpdater()
    if isinstance(updater, type):
        if issubclass(updater, VanillaWeightUpdater):
            return _VanillaAdapter(updater())
        updater = updater()
    elif callable(updater) and not isinstance(updater, WeightUpdaterBase):
        updater = updater()
    if isinstance(updater, VanillaWeightUpdater):
        return _VanillaAdapter(updater)
    if not isinstance(updater, WeightUpdaterBase):
        raise TypeError(f"{owner}: weight_updater must be a WeightUpdaterBase, got {updater!r}")
    return updater


#: TorchRL's name for the scheme that sends weights over each worker's pipe.
MultiProcessWeightSyncScheme = PipeWeightSyncScheme

__all__ = [
    "MultiProcessWeightSyncScheme",
    "MultiProcessedWeightUpdater",
    "PipeWeightSyncScheme",
    "SharedMemWeightSyncScheme",
    "SharedMemReceiver",
    "adapt_updater",
]
