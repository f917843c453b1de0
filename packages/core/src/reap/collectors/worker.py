"""What one remote worker does, whatever carries its messages (processes, Ray actors,
torch.distributed ranks): every multi-worker backend runs a :class:`CollectorWorker` and adds
only its transport. The driver's side is :mod:`reap.collectors.bookkeeping`.

A worker owns one reap collector. Weights it receives are kept and loaded only at the next
rollout boundary (never during a rollout); each batch says which weights made it
(``("collector", "policy_version")``) and which worker (``("collector", "worker_id")``); the
worker counts the batches it collected since its last weights; an exception becomes a
``(text, traceback)`` pair that names the worker, picklable whatever the exception was.

Examples:
    >>> import torch
    >>> from tensordict.nn import TensorDictModule
    >>> from reap import Collector, GymEnv
    >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    >>> worker = CollectorWorker(1, Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=4))
    >>> worker.receive_weights({"module.weight": torch.ones(1, 3), "module.bias": torch.zeros(1)}, version=3)
    >>> batch = worker.collect()  # the weights are loaded first, then one batch is collected
    >>> batch["collector", "policy_version"].tolist(), batch["collector", "worker_id"].tolist()
    ([3, 3, 3, 3], [1, 1, 1, 1])
    >>> worker.batches_since_update
    1
    >>> worker.close()
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import traceback as _traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import numpy as np
import torch
from tensordict import TensorDictBase

from reap.collectors.base import resolve_attr
from reap.plugins import hook
from reap.weight_update import policy_weights

VERSION_KEY = ("collector", "policy_version")
WORKER_KEY = ("collector", "worker_id")
TRAJ_KEY = ("collector", "traj_ids")
#: Trajectory ids each worker process may use: process ``k`` of a driver gets ``traj_id_offset=
#: k * TRAJ_ID_BLOCK``, so ids never repeat across workers (or a worker and its replacement)
#: without a counter shared across machines.
TRAJ_ID_BLOCK = 2**40


def without_worker_tags(batch: TensorDictBase) -> TensorDictBase:
    """``batch`` less the tags a worker writes (:data:`VERSION_KEY`, :data:`WORKER_KEY`), and less
    a ``"collector"`` entry they leave empty: the keys TorchRL's collectors give. No data is
    copied. A driver hands its batches out through this unless asked for ``worker_tags=True``.

    Examples:
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({"collector": {"worker_id": torch.zeros(2), "traj_ids": torch.zeros(2)}}, [2])
        >>> sorted(without_worker_tags(batch).keys(True, True))
        [('collector', 'traj_ids')]
        >>> list(without_worker_tags(batch.exclude(TRAJ_KEY)).keys())
        []
    """
    batch = batch.exclude(VERSION_KEY, WORKER_KEY)
    tags = batch.get("collector", None)
    if tags is not None and tags.is_empty():
        batch = batch.exclude("collector")
    return batch


def format_worker_error(exc: BaseException, worker_idx: int, label: str = "collector worker") -> tuple[str, str]:
    """``(text, traceback)`` for ``exc`` raised in worker ``worker_idx``: plain strings, so they
    cross any transport whatever the exception's class (which the driver may not be able to
    import or unpickle).

    Examples:
        >>> try:
        ...     raise ValueError("bad step")
        ... except ValueError as exc:
        ...     text, tb = format_worker_error(exc, 2)
        >>> text
        'collector worker 2 raised ValueError: bad step'
        >>> tb.splitlines()[-1]
        'ValueError: bad step'
    """
    text = f"{label} {worker_idx} raised {type(exc).__name__}: {exc}"
    return text, "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))


class CollectorWorker:
    """One remote worker's collector: weights between rollouts, batch tags, seeds, plugin options.

    Args:
        worker_idx: the worker's index in its driver; tags batches and names errors.
        collector: the collector this worker runs (a reap ``Collector``, or a multi-worker
            collector, whose batches carry their own sub-workers' ids).

    Keyword Args:
        receiver: weights that arrive by another channel (e.g. shared memory): an object whose
            ``poll()`` loads any pending weights into the policy and returns the version the
            next rollout runs. Without it, weights come through :meth:`receive_weights`.
        apply_weights: how received weights are loaded (``collector.update_policy_weights_``).
        tag_worker_id: write ``("collector", "worker_id")`` (default: when ``collector`` runs
            its own rollouts, i.e. has ``collect_into``).
        traj_id_offset: added to ``("collector", "traj_ids")`` of every batch :meth:`collect`
            returns (e.g. ``k * TRAJ_ID_BLOCK`` for the driver's ``k``-th worker process), so
            workers whose collectors count from 0 give distinct ids.

    Examples:
        >>> from reap import Collector, GymEnv
        >>> worker = CollectorWorker(0, Collector(GymEnv("CartPole-v1"), None, frames_per_batch=3))
        >>> worker.set_seed(5, static_seed=True)  # torch.manual_seed(5), then the collector's set_seed
        5
        >>> slot = worker.new_slot()  # the mp path: one preallocated batch, filled in place
        >>> worker.collect_into(slot) is slot, worker.version, worker.batches_since_update
        (True, 0, 1)
        >>> worker.close()
    """

    def __init__(self, worker_idx: int, collector, *, receiver=None,
                 apply_weights: Callable | None = None, tag_worker_id: bool | None = None,
                 traj_id_offset: int = 0):
        if isinstance(worker_idx, bool) or not isinstance(worker_idx, int) or worker_idx < 0:
            raise ValueError(f"CollectorWorker: worker_idx must be a non-negative int, got {worker_idx!r}")
        self.worker_idx = worker_idx
        self.collector = collector
        self.receiver = receiver
        self._apply = apply_weights
        self.tag_worker_id = hasattr(collector, "collect_into") if tag_worker_id is None else bool(tag_worker_id)
        self.version = 0 if receiver is None else receiver.poll()
        self.traj_id_offset = int(traj_id_offset)
        #: batches collected since the weights last changed (or since the start)
        self.batches_since_update = 0
        self._pending: tuple | None = None  # (weights, version) received, not yet loaded
        self._iterator = None
        self._ahead: Future | None = None  # the rollout serve_collect started ahead
        self._thread: ThreadPoolExecutor | None = None
        #: what ``receiver.attach`` returned (set by :meth:`build`): the driver writes weights there
        self.weights_buffer = None

    @classmethod
    def build(cls, worker_idx: int, collector_class, kwargs: dict, *, traj_id_offset: int = 0,
              plugin_options: dict | None = None, receiver=None, applier: Callable | None = None,
              **options) -> CollectorWorker:
        """Worker ``worker_idx`` running ``collector_class(**kwargs)``, as every backend starts one.

        A reap ``Collector`` (or subclass) is told its ``worker_idx`` and numbers its trajectories
        from ``traj_id_offset``; another collector's ids are shifted by it. ``receiver`` (an
        out-of-band scheme's) is attached to the collector's policy; ``applier(collector)`` (a
        carried scheme's ``applier``) gives how its payloads are loaded; ``plugin_options``
        (``{name: options}``) are set before the first batch.

        Examples:
            >>> from reap import Collector, GymEnv
            >>> worker = CollectorWorker.build(1, Collector, {"create_env_fn": GymEnv("CartPole-v1"),
            ...                                "policy": None, "frames_per_batch": 4}, traj_id_offset=2**40)
            >>> int(worker.collect()["collector", "traj_ids"][0]) == 2**40, worker.ready_info()["frames_per_batch"]
            (True, 4)
            >>> worker.close()
        """
        from reap.collectors.collector import Collector
        from reap.collectors.trajectories import TrajIdCounter

        kwargs = dict(kwargs)
        if isinstance(collector_class, type) and issubclass(collector_class, Collector):
            kwargs.setdefault("worker_idx", worker_idx)
            kwargs.setdefault("traj_id_counter", TrajIdCounter(traj_id_offset))
            traj_id_offset = 0
        collector = collector_class(**kwargs)
        try:
            if getattr(collector, "trajs_per_batch", None) is not None:  # a worker's batches are raw
                raise ValueError(f"collector worker {worker_idx}: trajs_per_batch regroups what a collector yields, and "
                                 "a worker hands its driver raw batches; pass trajs_per_batch to MultiSyncCollector or "
                                 "MultiAsyncCollector, not in collector_kwargs")
            buffer = None if receiver is None else receiver.attach(collector.policy)
            if applier is not None:
                options["apply_weights"] = applier(collector)
            worker = cls(worker_idx, collector, receiver=receiver, traj_id_offset=traj_id_offset, **options)
            worker.weights_buffer = buffer
            for name, value in (plugin_options or {}).items():  # also after a restart
                worker.set_plugin_options(name, value)
        except BaseException:
            collector.shutdown()
            raise
        return worker

    # ---- weights -------------------------------------------------------------------------------
    def receive_weights(self, weights, version: int) -> None:
        """Keep ``weights`` (any form ``update_policy_weights_`` takes) to load before the next
        rollout, which then runs as ``version``. A newer push replaces one not yet loaded."""
        self._pending = (weights, int(version))

    def _load_pending(self) -> int:
        """Load what was received since the last rollout; the version the next rollout runs."""
        if self.receiver is not None:
            hook().reap_worker_phase(collector=self.collector, worker_idx=self.worker_idx, phase="weight_sync")
            version = self.receiver.poll()
        elif self._pending is not None:
            hook().reap_worker_phase(collector=self.collector, worker_idx=self.worker_idx, phase="weight_sync")
            weights, version = self._pending
            self._pending = None
            if self._apply is not None:
                self._apply(self.collector, weights)
            else:
                self.collector.update_policy_weights_(weights)
        else:
            return self.version
        if version != self.version:
            self.version = version
            self.batches_since_update = 0
        return version

    # ---- collection ----------------------------------------------------------------------------
    def collect(self) -> TensorDictBase | None:
        """Load pending weights, collect one batch (a reap ``Collector``'s own post-processing
        included, its ``reap_batch_ready`` hook not: the driver fires it) and tag it; ``None``
        when the collector feeds a replay buffer."""
        version = self._load_pending()
        worker_batch = getattr(self.collector, "_worker_batch", None)
        if worker_batch is not None:
            batch = worker_batch()
        else:
            if self._iterator is None:
                self._iterator = iter(self.collector)
            batch = next(self._iterator)
        self.batches_since_update += 1
        if batch is not None:
            batch.set(VERSION_KEY, torch.full(batch.batch_size, version, dtype=torch.int64))
            if self.tag_worker_id:
                batch.set(WORKER_KEY, torch.full(batch.batch_size, self.worker_idx, dtype=torch.int64))
            if self.traj_id_offset:
                ids = batch.get(TRAJ_KEY, None)
                if ids is not None:
                    ids.add_(self.traj_id_offset)  # a fresh batch: the collector keeps no reference
        return batch

    def new_slot(self) -> TensorDictBase:
        """A zeroed batch for :meth:`collect_into`, its worker id already written (a reap
        ``Collector`` only: ``collector.empty_batch()`` plus the two tags)."""
        slot = self.collector.empty_batch()
        slot.set(WORKER_KEY, torch.full(slot.batch_size, self.worker_idx, dtype=torch.int64))
        slot.set(VERSION_KEY, torch.zeros(slot.batch_size, dtype=torch.int64))
        return slot

    def collect_into(self, slot: TensorDictBase) -> TensorDictBase:
        """Load pending weights and collect one raw batch into ``slot`` (from :meth:`new_slot`),
        in place: only its version is written, the worker id is already there."""
        version = self._load_pending()
        self.collector.collect_into(slot)
        self.batches_since_update += 1
        slot.get(VERSION_KEY).fill_(version)
        return slot

    def waiting(self) -> None:
        """Tell plugins (profiling) the worker now waits for the driver, until its next call."""
        hook().reap_worker_phase(collector=self.collector, worker_idx=self.worker_idx, phase="wait")

    # ---- one request of a remote driver (reap.collectors.remote) -------------------------------
    def serve_collect(self, weights=None, version: int = 0, *, prefetch: bool = False,
                      timeout: float | None = None) -> TensorDictBase | None:
        """Answer a collect request: ``weights`` (None: none new) run as ``version``.

        Without a rollout started ahead, ``weights`` are loaded and one batch is collected (as
        :meth:`collect`). With one (the previous request's ``prefetch``), its batch is the answer
        (waiting at most ``timeout`` s for it) and ``weights`` go to the rollout after it. With
        ``prefetch``, the next rollout starts in a background thread before this returns; any
        error in it is raised by the next request. Batches are fresh: the rollout running ahead
        never writes into one already returned.
        """
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            if weights is not None:
                self.receive_weights(weights, version)
            batch = self.collect()
        else:
            try:
                batch = ahead.result(timeout=timeout)
            except FutureTimeout:
                self._ahead = ahead  # still running: a later request or close() waits for it again
                raise TimeoutError(f"the rollout started ahead did not end within {timeout:g} s") from None
            if weights is not None:
                self.receive_weights(weights, version)
        if prefetch:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"reap-prefetch-{self.worker_idx}")
            self._ahead = self._thread.submit(self.collect)
        else:
            self.waiting()
        return batch

    def settle(self, drop: bool = False, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` s) for a rollout started ahead to end; keep its batch (or
        its error) for the next request unless ``drop``."""
        ahead = self._ahead
        if ahead is None:
            return
        if not ahead.cancelled():
            ahead.exception(timeout=timeout)  # its error stays in it, for the next request
        if drop:
            self._ahead = None

    # ---- control -------------------------------------------------------------------------------
    def ready_info(self) -> dict:
        """What the driver learns when the worker is ready: its process, its batch size
        (``frames_per_batch``), its policy's weights on the ``meta`` device (``weights``: their
        layout, which pushes are checked against; None without parameters) and what its weight
        receiver exposes to the driver (``weights_buffer``)."""
        weights = policy_weights(getattr(self.collector, "policy", None))
        if weights is None:  # a multi-worker collector of policy_factory's policies: its workers' layout
            weights = getattr(self.collector, "weights_layout", None)
        return {"pid": os.getpid(), "host": socket.gethostname(),
                "frames_per_batch": getattr(self.collector, "frames_per_batch", None),
                "weights": None if weights is None else weights.to("meta"), "weights_buffer": self.weights_buffer}

    def set_seed(self, seed: int, static_seed: bool = False):
        """``torch.manual_seed(seed)`` (the policy's sampling), then the collector's ``set_seed``;
        a rollout started ahead is dropped (it predates the seed)."""
        self.settle(drop=True)
        torch.manual_seed(seed)
        return self.collector.set_seed(seed, static_seed=static_seed)

    def reset(self, index=None) -> None:
        """Reset the collector's envs (those at ``index``); a rollout started ahead is dropped."""
        self.settle(drop=True)
        self.collector.reset(index)

    def state_dict(self):
        self.settle()
        return self.collector.state_dict()

    def load_state_dict(self, state) -> None:
        """Load the collector's state; a rollout started ahead is dropped (it predates the state)."""
        self.settle(drop=True)
        self.collector.load_state_dict(state)

    def get_distant_attr(self, attr: str):
        """The collector's attribute at path ``attr`` (:func:`~reap.collectors.base.resolve_attr`)."""
        self.settle()
        return resolve_attr(self.collector, attr)

    def call_method(self, method_name: str, args: tuple, kwargs: dict):
        """``collector.<method_name>(*args, **kwargs)`` (a path, as :meth:`get_distant_attr`'s)."""
        self.settle()
        return self.collector.map_fn(method_name, [args], [kwargs])[0]

    def set_collect_hooks(self, pre: bytes | None, post: bytes | None) -> None:
        """Give the collector run here the driver's ``pre_collect_hook`` and ``post_collect_hook``
        (each cloudpickled, or None: :func:`pickled_hook`)."""
        self.settle()
        self.collector._set_collect_hooks(*(None if fn is None else pickle.loads(fn) for fn in (pre, post)))

    def set_plugin_options(self, name: str, options) -> None:
        self.settle()
        self.collector.set_plugin_options(name, options)

    def plugin_report(self, name: str):
        self.settle()
        return self.collector.plugin_report(name)

    def format_error(self, exc: BaseException, label: str = "collector worker") -> tuple[str, str]:
        """:func:`format_worker_error` for this worker."""
        return format_worker_error(exc, self.worker_idx, label)

    def close(self, timeout: float | None = 60.0) -> None:
        """Wait (at most ``timeout`` s) for a rollout started ahead, then shut the collector down
        (once; later calls do nothing)."""
        if self._ahead is not None:
            self._ahead.cancel()
            with contextlib.suppress(TimeoutError):
                self.settle(drop=True, timeout=timeout)
            self._ahead = None
        if self._thread is not None:
            self._thread.shutdown(wait=False)
            self._thread = None
        collector, self.collector = self.collector, None
        self._iterator = None
        if collector is not None:
            collector.shutdown()


#: The names a remote collector's ``collector_class`` may be given as.
COLLECTOR_CLASSES = ("single", "sync", "async")


def pickled_hook(fn) -> bytes | None:
    """``fn`` by value (cloudpickle: a lambda or a local function too), as
    :meth:`CollectorWorker.set_collect_hooks` takes it; None stays None.

    Examples:
        >>> import pickle
        >>> pickle.loads(pickled_hook(lambda x: x + 1))(1), pickled_hook(None)
        (2, None)
    """
    import cloudpickle  # gymnasium's dependency: wherever reap-core is

    return None if fn is None else cloudpickle.dumps(fn)


def worker_seed(seed: int, idx: int, restarts: int = 0) -> int:
    """Worker ``idx``'s seed for a collector's ``set_seed(seed)``: distinct per worker (and per
    restart of that worker), reproducible.

    Derived through ``numpy.random.SeedSequence([seed, idx, restarts])``, so runs seeded ``seed``
    and ``seed + 1`` give unrelated worker seeds (whose ``n_envs`` consecutive env seeds do not
    overlap) instead of shifted copies of each other.

    Examples:
        >>> worker_seed(0, 0) != worker_seed(0, 1) != worker_seed(1, 0)
        True
        >>> worker_seed(7, 1) == worker_seed(7, 1)
        True
    """
    state = np.random.SeedSequence([seed, idx, restarts]).generate_state(1, dtype=np.uint32)
    return int(state[0] & 0x7FFFFFFF)


def per_collector(value, n: int, name: str, owner: str) -> list:
    """``value`` once per remote collector: a list must have ``n`` entries, anything else repeats.

    Examples:
        >>> per_collector({"a": 1}, 2, "collector_kwargs", "RayCollector")
        [{'a': 1}, {'a': 1}]
    """
    if isinstance(value, list):
        if len(value) != n:
            raise ValueError(f"{owner}: {name} has {len(value)} entries but there are {n} collectors")
        return list(value)
    return [value] * n


def resolve_collector_class(collector_class, owner: str):
    """What a remote worker runs: reap's ``Collector`` (``None`` or ``"single"``),
    ``MultiSyncCollector`` / ``MultiAsyncCollector`` (``"sync"`` / ``"async"``, from the plugin
    that provides them), or a subclass of a reap collector; else an error naming ``owner``.

    Examples:
        >>> resolve_collector_class("single", "RayCollector").__name__
        'Collector'
        >>> resolve_collector_class("threads", "RayCollector")
        Traceback (most recent call last):
        ...
        ValueError: RayCollector: collector_class must be a collector class or one of ('single', 'sync', 'async'), got 'threads'
    """
    from reap.collectors.base import BaseCollector
    from reap.collectors.collector import Collector

    if collector_class is None or collector_class == "single":
        return Collector
    if collector_class in ("sync", "async"):
        from reap.plugins import resolve_export

        return resolve_export("MultiSyncCollector" if collector_class == "sync" else "MultiAsyncCollector")
    if isinstance(collector_class, str):
        raise ValueError(f"{owner}: collector_class must be a collector class or one of {COLLECTOR_CLASSES}, "
                         f"got {collector_class!r}")
    if not (isinstance(collector_class, type) and issubclass(collector_class, BaseCollector)):
        raise TypeError(
            f"{owner}: collector_class must be reap's Collector, MultiSyncCollector, "
            f"MultiAsyncCollector (or a subclass), or one of {COLLECTOR_CLASSES}; got {collector_class!r}"
        )
    return collector_class


__all__ = ["per_collector", "worker_seed", "without_worker_tags", "COLLECTOR_CLASSES", "TRAJ_ID_BLOCK", "TRAJ_KEY", "VERSION_KEY", "WORKER_KEY", "CollectorWorker", "format_worker_error",
           "resolve_collector_class"]
