"""``CollectorDriver``: the driver of every multi-worker collector, whatever carries its messages.

``MultiSyncCollector`` (processes), reap-threads (threads), ``RayCollector`` (Ray actors),
``RPCCollector`` and ``DistributedCollector`` (torch.distributed ranks) are this class plus a
transport. Everything else is here, once: iteration (sync and async), each batch's post-processing
(storing device, ``split_trajs``, ``postproc``, the ``reap_batch_ready`` hook exactly once, the
replay buffer), combining a sync batch (``cat_results``), control calls (seeds, resets, states,
plugin options), weights (carried by each request or pushed out of band, per the scheme), one
progress deadline per worker (``worker_timeout``), and restarts (``on_worker_failure="restart"``,
up to ``max_restarts`` per worker: the worker is replaced, gets the latest weights and its seed,
and redoes the batch lost with it). Each worker runs a
:class:`~reap.collectors.worker.CollectorWorker`.

The driver keeps at most one collect request in flight per worker. ``sync=True`` asks every
worker for its part of each batch and combines the parts in worker order; ``sync=False`` yields
each worker's batch as it arrives, asking that worker for its next one before yielding (after,
with ``update_after_each_batch``, so that the trainer's new weights travel with it).

Prefetching (async): a request also tells the worker to start its next rollout once it has
answered (double buffering), so the next request finds it done or under way. Weights given
while that rollout runs reach the rollout after it, and a batch's ``("collector",
"policy_version")`` (with ``worker_tags=True``; ``"policy_version"`` with TorchRL's
``track_policy_version=True``) always names the weights it was collected with.
``max_weight_update_interval=k`` (fresh weights for a worker that delivered more than ``k``
batches on its own) counts the prefetched rollout. ``update_after_each_batch=True`` and
``max_weight_update_interval=0`` switch prefetching off, as do the last requests of an iteration
(no rollout starts that no request would fetch). ``set_seed``, ``reset`` and ``load_state_dict`` drop prefetched rollouts and the
answers of requests in flight (they predate the change; an async worker is asked again);
``pause()`` waits for them, so inside it no worker collects.

A backend implements the transport: :meth:`_launch_worker` and :meth:`_await_worker` (start a
worker, wait until it is ready), :meth:`_send_collect`, :meth:`_receive` (the next answer, or a
:class:`~reap.errors.WorkerError` naming a worker that failed), :meth:`_call` (a control call),
:meth:`_kill_worker` and :meth:`_close_workers`; it calls :meth:`_init_driver` then
:meth:`_start_workers` in its ``__init__``.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections import deque
from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from reap.collectors.arguments import (
    MAX_RESTARTS,
    START_TIMEOUT,
    WORKER_TIMEOUT,
    checked_flag,
    checked_track_policy_version,
    checked_worker_ids,
)
from reap.collectors.base import BaseCollector, checked_hook, options_for_worker, paired_calls
from reap.collectors.bookkeeping import LatestWeights, WorkerDeadlines, WorkerWeights
from reap.collectors.interruptor import MASK_KEY, Interruptor, collected_steps, mark_collected
from reap.collectors.lifetime import track, untrack
from reap.collectors.trajectories import (
    extend_by_steps,
    mark_time,
    split_trajectories,
    tag_policy_version,
)
from reap.collectors.worker import VERSION_KEY, pickled_hook, without_worker_tags, worker_seed
from reap.errors import WorkerError
from reap.plugins import hook
from reap.weight_update import match_weights, weights_from_update_args

#: Collector arguments every driver acts on itself (a remote collector takes them out of the
#: options it gives its workers' collectors: :func:`driver_options`); all TorchRL's but reap's
#: ``worker_tags``.
DRIVER_OPTIONS = ("pre_collect_hook", "post_collect_hook", "track_policy_version", "worker_tags")


def driver_options(options: dict) -> dict:
    """Take :data:`DRIVER_OPTIONS` out of ``options`` (in place) for :meth:`CollectorDriver._init_driver`.

    Examples:
        >>> options = {"track_policy_version": True, "max_frames_per_traj": 5}
        >>> driver_options(options), options
        ({'track_policy_version': True}, {'max_frames_per_traj': 5})
    """
    return {key: options.pop(key) for key in DRIVER_OPTIONS if key in options}


class CollectorDriver(BaseCollector):
    """Iteration, post-processing, control, weights, deadlines and restarts of a multi-worker
    collector; a subclass adds the transport (see the module docstring).

    Examples:
        A backend whose "workers" answer in the driver's own process (a real one sends the
        requests to other processes, threads or machines and waits for their answers):

        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import Collector, GymEnv
        >>> from reap.collectors.worker import CollectorWorker
        >>> from reap.weight_update import WeightSyncScheme
        >>> class InProcess(CollectorDriver):
        ...     def __init__(self, n, policy):
        ...         self.policy, self.workers, self.answers = policy, [None] * n, []
        ...         self._init_driver(n, sync=True, frames_per_batch=8, total_frames=16, scheme=WeightSyncScheme())
        ...         self._start_workers()
        ...     def _launch_worker(self, idx):
        ...         collector = Collector(GymEnv("Pendulum-v1"), self.policy, frames_per_batch=4)
        ...         self.workers[idx] = CollectorWorker(idx, collector)
        ...     def _await_worker(self, idx):
        ...         return self.workers[idx].ready_info()
        ...     def _send_collect(self, idx, weights, version, prefetch):
        ...         self.answers.append((idx, self.workers[idx].serve_collect(weights, version)))
        ...     def _receive(self, timeout):
        ...         return self.answers.pop(0)
        ...     def _call(self, idx, method, args):
        ...         return getattr(self.workers[idx], method)(*args)
        ...     def _kill_worker(self, idx):
        ...         self.workers[idx].close()
        ...     def _close_workers(self, timeout):
        ...         for worker in self.workers:
        ...             worker.close()
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> with InProcess(2, policy) as collector:
        ...     print([batch.batch_size for batch in collector])  # 2 workers x 4 steps, 16 frames
        ...     collector.update_policy_weights_(policy, worker_ids=[1])
        ...     print(collector.policy_version)
        [torch.Size([2, 4]), torch.Size([2, 4])]
        1
    """

    #: How errors name a worker ("collector worker 1"), and what they are raised as.
    worker_label = "collector worker"
    error_class = WorkerError
    #: ``state_dict()`` as a list with one state per worker (TorchRL's remote collectors); else a
    #: dict ``{"worker0": ..., "frames": ..., "iter": ...}`` (its multi-process collectors).
    _state_as_list = False
    _closed = True  # until the workers are up: __del__ of a half-built collector does nothing
    _failure: WorkerError | None = None
    #: ``trajs_per_batch``'s :class:`~reap.collectors.traj_batches.TrajectoryBatches` (None: off),
    #: which regroups the batches :meth:`_finish` returns, and writes the replay buffer instead
    _trajs = None
    policy = None
    weight_updater = None  # a TorchRL-style updater whose push_weights() calls _push_weights()

    def _init_driver(self, num_workers: int, *, sync: bool, frames_per_batch: int, total_frames: int,
                     scheme, worker_frames: list[int] | None = None, worker_timeout: float = WORKER_TIMEOUT,
                     start_timeout: float = START_TIMEOUT, max_restarts: int = MAX_RESTARTS,
                     on_worker_failure: str = "raise",
                     postproc: Callable | None = None, split_trajs: bool = False, storing_device=None,
                     replay_buffer=None, extend_buffer: bool = True, cat_results="stack",
                     update_at_each_batch: bool = False, update_after_each_batch: bool = False,
                     max_weight_update_interval: int = -1, pre_collect_hook: Callable | None = None,
                     post_collect_hook: Callable | None = None, track_policy_version: bool = False,
                     preemptive_threshold: float = 1.0, worker_tags: bool = False) -> None:
        """The driver's state for ``num_workers`` workers (each asked ``worker_frames[i]`` frames
        a batch; the workers' ready info sets them otherwise); every argument is checked by
        then (:mod:`reap.collectors.arguments`) but ``worker_tags``: keep the workers'
        ``("collector", "worker_id")`` and ``("collector", "policy_version")`` in the batches
        (TorchRL's collectors have neither; they are dropped by default)."""
        self._sync = sync
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.weight_sync_scheme = scheme
        self.worker_timeout = worker_timeout
        self.start_timeout = start_timeout
        self.max_restarts = max_restarts
        self.on_worker_failure = on_worker_failure
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.storing_device = None if storing_device is None else torch.device(storing_device)
        self.replay_buffer = replay_buffer
        self.extend_buffer = extend_buffer
        self.cat_results = cat_results
        self.update_at_each_batch = bool(update_at_each_batch)
        self.update_after_each_batch = bool(update_after_each_batch)
        self._pre_collect_hook = checked_hook(pre_collect_hook, "pre_collect_hook")  # sent as workers start
        self._post_collect_hook = checked_hook(post_collect_hook, "post_collect_hook")
        self.track_policy_version = checked_track_policy_version(track_policy_version, type(self).__name__)
        self.worker_tags = checked_flag(worker_tags, "worker_tags", type(self).__name__)
        #: the share of workers whose rollout ends a sync batch: the others are stopped then (1.0: never)
        self.preemptive_threshold = preemptive_threshold
        self.interruptor = Interruptor() if preemptive_threshold < 1.0 else None
        self._worker_weights = WorkerWeights(
            0, max_interval=0 if update_after_each_batch else max_weight_update_interval)
        self._latest = LatestWeights()  # out-of-band schemes: what a restarted worker is given
        self._deadlines = WorkerDeadlines(0, worker_timeout)
        self._worker_frames: list[int] = []
        self._layouts: list = []  # each worker's policy weights on the meta device (None: no weights)
        self._ahead: list[bool] = []  # a prefetched rollout is under way (or done)
        self._skip: list[bool] = []  # the next batch predates the weights just sent
        self._inflight: set[int] = set()  # workers with a collect request outstanding
        self._ready: deque = deque()  # (worker, answer) drained by pause() or a control call
        self.worker_restarts: list[int] = []
        self.restarts = 0
        self._starts = 0  # worker starts so far: each gets its own block of trajectory ids
        self._frames = 0
        self._iter = 0
        self._seed: tuple[int, bool] | None = None
        self._hook_started = False
        for i in range(num_workers):
            self._add_worker(None if worker_frames is None else worker_frames[i])

    def _add_worker(self, frames: int | None = None) -> int:
        """Bookkeeping for one more worker; returns its index."""
        self._worker_weights.add_worker()
        self._deadlines.add_worker()
        self._worker_frames.append(frames or 0)
        self._layouts.append(None)
        self._ahead.append(False)
        self._skip.append(False)
        self.worker_restarts.append(0)
        return len(self._ahead) - 1

    # ---- the transport (subclasses) --------------------------------------------------------
    def _launch_worker(self, idx: int) -> None:
        """Start worker ``idx`` (again, after a failure) without waiting for it; its
        ``CollectorWorker`` numbers trajectories from :meth:`_traj_id_offset` and takes
        :meth:`_worker_plugin_options`."""
        raise NotImplementedError

    def _await_worker(self, idx: int) -> dict:
        """Wait (at most ``start_timeout`` s) until worker ``idx`` is ready: its
        ``CollectorWorker.ready_info()``. Raise a ``WorkerError`` naming it if it fails to start."""
        raise NotImplementedError

    def _send_collect(self, idx: int, weights, version: int, prefetch: bool) -> None:
        """Send worker ``idx`` a collect request carrying ``weights`` (None: keep its own) and
        ``version``; with ``prefetch`` it starts its next rollout once it answers."""
        raise NotImplementedError

    def _receive(self, timeout: float) -> tuple[int, object] | None:
        """The first answer to a collect request within ``timeout`` s: ``(worker, answer)``, or
        None; raise a ``WorkerError`` naming a worker that raised or died meanwhile."""
        raise NotImplementedError

    def _call(self, idx: int, method: str, args: tuple):
        """``CollectorWorker.<method>(*args)`` in worker ``idx`` (at most ``worker_timeout`` s);
        its answer, or a ``WorkerError``."""
        raise NotImplementedError

    def _kill_worker(self, idx: int) -> None:
        """Stop worker ``idx`` at once, whatever it is doing (it failed, or is replaced)."""
        raise NotImplementedError

    def _close_workers(self, timeout: float) -> None:
        """Stop every worker and the transport, within about ``timeout`` s (shutdown)."""
        raise NotImplementedError

    def _batch_of(self, answer) -> TensorDictBase:
        """The batch an answer holds (read in place; :meth:`_output` copies it if it is reused)."""
        return answer

    def _output(self, answer) -> tuple[int, TensorDictBase | None]:
        """``(frames, batch)`` for one async answer, the batch the driver's own."""
        batch = self._batch_of(answer)
        return batch.numel(), batch

    def _combine(self, answers: list) -> tuple[int, TensorDictBase | None]:
        """``(frames, batch)`` for one sync batch's answers, in worker order: stacked, or
        concatenated along ``cat_results``."""
        parts = [self._batch_of(a) for a in answers]
        if self.interruptor is not None and self.cat_results != "stack":
            parts = [p[..., collected_steps(p)] for p in parts]  # a preempted worker's steps not collected
        if self.cat_results == "stack":
            if len({p.batch_size for p in parts}) > 1:
                raise ValueError(
                    f"{type(self).__name__}: the workers' batches have different shapes "
                    f"{[tuple(p.batch_size) for p in parts]}; cat_results='stack' needs equal ones, "
                    "use cat_results=-1 to concatenate along time")
            batch = torch.stack(parts, 0)
            if self.interruptor is not None:
                return mark_collected(batch), batch
        else:
            batch = torch.cat(parts, self.cat_results)
        return batch.numel(), batch

    # ---- what a worker is started with -------------------------------------------------------
    def _traj_id_offset(self) -> int:
        """The first trajectory id of the worker started now: every start (restarts included)
        gets its own block of ``TRAJ_ID_BLOCK`` ids, so ids never repeat across workers."""
        from reap.collectors.worker import TRAJ_ID_BLOCK

        self._starts += 1
        return (self._starts - 1) * TRAJ_ID_BLOCK

    def _worker_plugin_options(self, idx: int) -> dict:
        """The plugin options worker ``idx`` starts with (``set_plugin_options`` so far)."""
        return {name: options_for_worker(opts, idx) for name, opts in self.plugin_options.items()}

    def _start_workers(self, ids: list[int] | None = None) -> None:
        """Start workers ``ids`` (all) and wait until they are ready; on failure shut everything
        down and raise. Call it last in ``__init__``."""
        ids = list(range(self.num_workers)) if ids is None else ids
        if self.__dict__.get("_closed", True):
            self._closed = False
            track(self)  # shut down at interpreter exit
        try:
            for i in ids:  # one by one: a worker that fails to start leaves the others to shut down
                self._launch_worker(i)
            for i in ids:
                self._worker_ready(i, self._await_worker(i))
        except BaseException:
            self.shutdown()
            raise

    def _worker_ready(self, idx: int, info: dict) -> None:
        self._layouts[idx] = info.get("weights")
        check = getattr(self.weight_sync_scheme, "check_worker_layout", None)  # init_on_sender's model
        if check is not None:
            check(idx, self._layouts[idx])
        self._worker_frames[idx] = info.get("frames_per_batch") or self._worker_frames[idx]
        self.weight_sync_scheme.on_worker_ready(idx, info.get("weights_buffer"))
        self._deadlines.forget(idx)
        if self._pre_collect_hook is not None or self._post_collect_hook is not None:
            self._call(idx, "set_collect_hooks", self._pickled_hooks())

    def _pickled_hooks(self) -> tuple:
        return pickled_hook(self._pre_collect_hook), pickled_hook(self._post_collect_hook)

    def _set_collect_hooks(self, pre, post) -> None:
        """Each worker runs the hooks around its rollouts, so they are sent to every worker (a
        restarted one gets them as it starts)."""
        with self._background_lock():
            super()._set_collect_hooks(pre, post)
            if not self._closed:
                hooks = self._pickled_hooks()
                self._call_all("set_collect_hooks", lambda i: hooks)

    # ---- properties -----------------------------------------------------------------------------
    #: TorchRL's flag: batches come through buffers allocated once (the workers' slots)
    _use_buffers = True

    @property
    def _weight_sync_schemes(self) -> dict:
        """TorchRL's view of the scheme, by model: ``{"policy": weight_sync_scheme}`` (reap's
        collectors sync one model, the policy)."""
        return {"policy": self.weight_sync_scheme}

    @property
    def num_workers(self) -> int:
        return len(self._ahead)

    @property
    def frames(self) -> int:
        """Frames yielded so far."""
        return self._frames

    @property
    def weights_layout(self) -> TensorDictBase | None:
        """The workers' policy weights on the ``meta`` device (what pushes are checked against),
        None when no worker's policy has any: how a node running this collector for a remote
        collector (built with ``policy_factory``, no policy of its own here) describes them."""
        return next((layout for layout in self._layouts if layout is not None), None)

    @property
    def policy_version(self) -> int:
        """The version of the weights pushed last (0: the workers' initial weights)."""
        return self._worker_weights.version

    @property
    def max_weight_update_interval(self) -> int:
        """``k``: no worker collects more than ``k`` batches after its last update (-1: no bound)."""
        return self._worker_weights.max_interval

    @max_weight_update_interval.setter
    def max_weight_update_interval(self, value: int) -> None:
        self._worker_weights.max_interval = value

    def _check_open(self) -> None:
        if self.__dict__.get("_failure") is not None:
            raise self._failure
        super()._check_open()

    # ---- faults and restarts ------------------------------------------------------------------
    def _worker_name(self, idx: int) -> str:
        return f"{self.worker_label} {idx}"

    def _error(self, idx: int, text: str) -> WorkerError:
        return self.error_class(f"{type(self).__name__}: {self._worker_name(idx)} {text}", worker_idx=idx)

    def _fail(self, idx: int, error: WorkerError) -> None:
        """Worker ``idx`` failed: replace it (``on_worker_failure="restart"``, up to
        ``max_restarts`` times), or shut down and raise ``error``. The collector stays failed:
        every later call raises the same error."""
        while self.on_worker_failure == "restart" and not self._closed:
            if self.worker_restarts[idx] >= self.max_restarts:
                error = self.error_class(f"{error}\n(gave up after {self.max_restarts} restarts of this worker)",
                                         worker_idx=idx, remote_traceback=error.remote_traceback,
                                         exitcode=error.exitcode)
                break
            warnings.warn(f"{type(self).__name__}: {self._worker_name(idx)} failed ({str(error).splitlines()[0]}); "
                          f"restarting it ({self.worker_restarts[idx] + 1}/{self.max_restarts}) with the latest "
                          "weights", RuntimeWarning, stacklevel=4)
            try:
                self._restart(idx)
                return
            except WorkerError as again:  # it failed again while starting or taking its work
                error = again
                idx = again.worker_idx
        if not self._closed:
            self._failure = error
            self.shutdown()
        raise error

    def _restart(self, idx: int) -> None:
        """Replace worker ``idx``: a new one with the latest weights and its seed, which redoes
        the batch lost with the old one."""
        lost = idx in self._inflight or any(i == idx for i, _ in self._ready)
        self.worker_restarts[idx] += 1
        self.restarts += 1
        self._inflight.discard(idx)
        self._ready = deque(item for item in self._ready if item[0] != idx)
        self._deadlines.forget(idx)
        self._ahead[idx] = self._skip[idx] = False
        self._kill_worker(idx)
        self._launch_worker(idx)
        self._worker_ready(idx, self._await_worker(idx))
        self._worker_weights.replaced(idx)  # carried: its next request brings its weights again
        if not self.weight_sync_scheme.carried and self._latest.weights is not None:
            self.weight_sync_scheme.push(self._latest.weights, [idx], self._latest.version)
        if self._seed is not None:
            seed, static = self._seed
            self._call(idx, "set_seed", (seed if static else worker_seed(seed, idx, self.worker_restarts[idx]), static))
        if lost:
            self._submit(idx)

    def _control(self, idx: int, method: str, args: tuple, *, again: bool = True):
        """:meth:`_call`, with a failure handled by :meth:`_fail`; after a restart the call is
        made again on the new worker (unless not ``again``: it returns None)."""
        while True:
            try:
                return self._call(idx, method, args)
            except WorkerError as error:
                self._fail(error.worker_idx, error)
                if not again:
                    return None

    # ---- weights ------------------------------------------------------------------------------
    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, model_id=None,
                               weights_dict=None, **kwargs) -> None:
        """Send new weights to every worker (or to ``worker_ids``, 0-based) for its next rollout.

        Accepts a module, a TensorDict, a state dict, ``weights_dict={"policy": ...}`` or the
        keywords ``policy=``/``weights=``; with none, the central ``policy`` is the source (the
        trainer's module, updated in place). ``{worker_index: weights, ...}`` gives workers weights of
        their own (TorchRL's per-worker form). A worker loads them before a rollout, never during one.
        """
        if isinstance(policy_or_weights, dict) and policy_or_weights and all(
                isinstance(k, int) and not isinstance(k, bool) for k in policy_or_weights):
            if worker_ids is not None:
                raise ValueError("update_policy_weights_: pass {worker_index: weights} or worker_ids=, not both")
            checked_worker_ids(list(policy_or_weights), self.num_workers)
            for idx, per_worker in policy_or_weights.items():
                self.update_policy_weights_(per_worker, worker_ids=[idx], model_id=model_id, **kwargs)
            return
        weights = weights_from_update_args(policy_or_weights, model_id=model_id, weights_dict=weights_dict, **kwargs)
        self._check_open()
        if not self.weight_sync_scheme.synchronises:  # NoWeightSyncScheme: workers keep their policy
            return
        if self.weight_updater is None:
            self._push_weights(weights, worker_ids)
        else:
            self.weight_updater.push_weights(weights, worker_ids=worker_ids)

    def _push_weights(self, weights, worker_ids) -> TensorDictBase:
        """The weight updater's push: ``weights`` (None: the central policy) for ``worker_ids``."""
        self._check_open()
        if weights is None:
            weights = self.policy
        if weights is None:
            raise ValueError("update_policy_weights_: no weights given and the collector has no policy to read "
                             "them from (it was built with policy_factory); pass the weights")
        ids = checked_worker_ids(worker_ids, self.num_workers)
        missing = [i for i in ids if self._layouts[i] is None]
        if missing:
            raise ValueError(f"update_policy_weights_: the policy of worker(s) {missing} has no parameters to update")
        try:  # exact keys and shapes, lossless dtype casts only, for each worker's policy
            for i in ids:
                weights = match_weights(self._layouts[i], weights)
        except ValueError as exc:
            raise ValueError(f"update_policy_weights_: {exc}") from None
        scheme = self.weight_sync_scheme
        if scheme.carried:
            self._worker_weights.push(scheme.pack(weights), ids)
            return weights
        version = self._worker_weights.push(None, ids)
        self._latest.remember(self._layouts[ids[0]], weights, version)  # first: a restart meanwhile gets them
        remaining = ids
        while remaining:
            try:
                scheme.push(weights, remaining, version)
                break
            except WorkerError as error:  # restarted with these weights (or raised); on to the rest
                self._fail(error.worker_idx, error)
                remaining = remaining[remaining.index(error.worker_idx) + 1:]
        return weights

    # ---- requests -----------------------------------------------------------------------------
    def _prefetch(self) -> bool:
        """Whether the request about to be sent should start the worker's next rollout after it."""
        # a rollout started now is fetched only if this worker is asked again: in turn, after
        # every other worker, so only while that many more frames are still wanted
        return (not self._sync and not self.update_after_each_batch and self._worker_weights.max_interval != 0
                and self._more(self._in_flight_frames() + sum(self._worker_frames)))

    def _submit(self, idx: int) -> None:
        prefetch = self._prefetch()
        weights = self._worker_weights
        k = weights.max_interval
        # a prefetching request starts one more rollout on the weights it leaves the worker with:
        # the batch after it must not be one too many on them either
        due = (k >= 0 and prefetch and weights.batches_since_update(idx) + 1 > k) or weights.due([idx])
        if self.policy is not None and due:
            self._push_weights(self.policy, [idx])
        payload, version = weights.next_request(idx)
        # the batch this request returns was started before these weights arrive: it does not
        # count as a batch on them
        self._skip[idx] = self._ahead[idx] and payload is not None
        self._ahead[idx] = prefetch
        self._inflight.add(idx)
        self._deadlines.asked(idx)
        try:
            self._send_collect(idx, payload, version, prefetch)
        except WorkerError as error:  # it died since its last answer
            self._fail(error.worker_idx, error)

    def _first_finished(self) -> tuple[int, object]:
        """The first request in flight to finish: ``(worker, answer)``. Every worker that owes a
        batch is held to its own deadline, so one that hangs is found while others deliver."""
        while True:
            deadline = self._deadlines.next_deadline()
            if deadline is None:
                raise RuntimeError(f"{type(self).__name__}: no request in flight (internal error)")
            try:
                got = self._receive(max(0.0, deadline - time.monotonic()))
            except WorkerError as error:
                self._fail(error.worker_idx, error)
                continue
            if got is not None:
                idx, answer = got
                self._deadlines.delivered(idx)
                self._inflight.discard(idx)
                if self._skip[idx]:
                    self._skip[idx] = False
                else:
                    self._worker_weights.delivered(idx)
                return idx, answer
            overdue = self._deadlines.overdue()
            if overdue:  # one at a time: a restart takes a while, the others may deliver meanwhile
                idx = overdue[0]
                self._fail(idx, self._error(
                    idx, f"delivered no batch for {self._deadlines.waited(idx):.1f} s (worker_timeout="
                         f"{self.worker_timeout:g} s); it may be stuck in its env or policy, or far slower than "
                         "expected: raise worker_timeout for slower workers"))

    def _next_result(self) -> tuple[int, object]:
        """The next answer: one drained earlier, else the first request to finish."""
        if self._ready:
            return self._ready.popleft()
        return self._first_finished()

    def _drain(self) -> None:
        """Wait for every request in flight; keep their answers for the next iteration."""
        while self._inflight:
            self._ready.append(self._first_finished())

    def _settle(self, drop: bool = False) -> None:
        """Wait for the workers' prefetched rollouts to end (``drop``: and discard them)."""
        ids = [i for i, ahead in enumerate(self._ahead) if ahead]
        if ids:
            self._call_all("settle", lambda i: (drop,), among=ids)
        if drop:
            for i in ids:
                self._ahead[i] = False

    def _call_all(self, method: str, args_for: Callable[[int], tuple], among=None, *, again: bool = True) -> list:
        """:meth:`_control` on every worker (``among``: those) once no collect request is in
        flight (their answers are kept for the next iteration). Answers in worker order."""
        self._check_open()
        self._drain()
        ids = range(self.num_workers) if among is None else among
        return [self._control(i, method, args_for(i), again=again) for i in ids]

    def _drop_drained(self, ids) -> None:
        """Drop the answers a control call drained from workers ``ids`` (their batches predate the
        change it made); an async collector asks those workers again, so each still owes one."""
        ids = set(ids)
        dropped = [i for i, _ in self._ready if i in ids]
        self._ready = deque(item for item in self._ready if item[0] not in ids)
        if not self._sync:
            for i in dropped:
                self._submit(i)

    # ---- iteration ----------------------------------------------------------------------------
    def _more(self, extra: int = 0) -> bool:
        return self.total_frames == -1 or self._frames + extra < self.total_frames

    def _in_flight_frames(self) -> int:
        return sum(self._worker_frames[i] for i in self._pending())

    def _pending(self) -> set[int]:
        return self._inflight | {i for i, _ in self._ready}

    def iterator(self):
        self._check_open()
        if not self._hook_started:
            self._hook_started = True
            hook().reap_collector_start(collector=self, worker_idx=-1)
        batches = self._sync_iterator() if self._sync else self._async_iterator()
        if self._trajs is None:
            yield from batches
            return
        with contextlib.closing(batches):  # trajs_per_batch: whole trajectories
            for batch in batches:
                yield from self._trajs.regroup(batch, self.replay_buffer)

    def _sync_iterator(self):
        while self._more():
            self._check_open()
            if self.update_at_each_batch:
                self.update_policy_weights_()
            n = self.num_workers
            pending = self._pending()
            if self.interruptor is not None:  # before the requests: a fast worker must not see the last stop
                self.interruptor.start_collection()
                enough = int(n * self.preemptive_threshold)
            for i in range(n):
                if i not in pending:
                    self._submit(i)
            answers = {}
            while len(answers) < n:
                if self.interruptor is not None and len(answers) >= enough:
                    self.interruptor.stop_collection()  # the others end their rollout at their next step
                idx, answer = self._next_result()
                answers[idx] = answer
            frames, batch = self._combine([answers[i] for i in range(n)])
            self._frames += frames
            self._iter += 1
            yield self._finish(batch)

    def _async_iterator(self):
        pending = self._pending()
        for i in range(self.num_workers):
            if i not in pending and self._more(self._in_flight_frames()):
                self._submit(i)
        while self._more():
            self._check_open()
            idx, answer = self._next_result()
            frames, batch = self._output(answer)
            self._frames += frames
            self._iter += 1
            if self.update_after_each_batch:  # the trainer's step first, then the new weights go
                yield self._finish(batch)
                if not self._closed and self._more(self._in_flight_frames()):
                    self._submit(idx)
                continue
            if self.update_at_each_batch:
                self.update_policy_weights_(worker_ids=[idx])
            if self._more(self._in_flight_frames()):
                self._submit(idx)
            yield self._finish(batch)

    def _finish(self, batch: TensorDictBase | None) -> TensorDictBase | None:
        """The driver's post-processing of each batch; the ``reap_batch_ready`` hook fires here,
        once per batch (with None when the workers wrote the batch into a buffer of their own)."""
        if batch is not None:
            if self.storing_device is not None and batch.device != self.storing_device:  # cpu too, as TorchRL
                batch = batch.to(self.storing_device)
            if self.track_policy_version:
                tag_policy_version(batch, batch.get(VERSION_KEY))
            if not self.worker_tags:
                batch = without_worker_tags(batch)
            mark_time(batch)
            if self.split_trajs:
                batch = mark_time(split_trajectories(batch))
            if self.postproc is not None:
                batch = self.postproc(batch)
        hook().reap_batch_ready(collector=self, batch=batch)
        if self.replay_buffer is not None and self._trajs is None:
            if batch is not None:
                # each worker's batch, as TorchRL's workers write theirs (a storage with as many dims as
                # a stacked batch takes it whole); extend_buffer=False: their steps as they came
                stacked = self._sync and self.cat_results == "stack" and not self.split_trajs and self.postproc is None
                whole = getattr(getattr(self.replay_buffer, "storage", None), "ndim", 1) >= batch.batch_dims
                if stacked and self.interruptor is not None:  # preempted: each worker's collected steps
                    parts = [p.exclude(MASK_KEY)[..., collected_steps(p)] for p in batch.unbind(0)]
                else:
                    parts = batch.unbind(0) if stacked and not (whole and self.extend_buffer) else [batch]
                for part in parts:
                    if self.extend_buffer:
                        self.replay_buffer.extend(part)
                    else:
                        extend_by_steps(self.replay_buffer, part)
            return None
        return batch

    @contextlib.contextmanager
    def pause(self):
        """Drain the requests in flight (their batches are kept for the next iteration) and wait
        for prefetched rollouts: inside the block no worker collects (:meth:`start`'s thread
        waits too)."""
        self._check_open()
        with self._background_lock():
            self._drain()
            self._settle()
            yield None

    # ---- control ------------------------------------------------------------------------------
    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed every worker: worker ``i`` gets :func:`~reap.collectors.worker.worker_seed`
        ``(seed, i)``, distinct across workers and reproducible (``seed`` itself with
        ``static_seed=True``). Batches collected before it and not yet yielded (prefetched
        rollouts, requests in flight) are dropped: every later batch is seeded. Returns ``seed + 1`` (``seed``
        when static), a seed for another collector (TorchRL's chains its workers' seeds and
        returns the last one's next seed)."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"set_seed: seed must be an int, got {seed!r}")
        self._check_open()
        if self._trajs is not None:  # trajs_per_batch: the episodes under way never end
            self._trajs.flush()
        self._seed = (seed, static_seed)
        # a worker restarted meanwhile was seeded when it started (a seed of its own): not again
        self._call_all("set_seed", lambda i: (seed if static_seed else worker_seed(seed, i), static_seed), again=False)
        self._ahead = [False] * self.num_workers  # each worker dropped its prefetched rollout
        self._drop_drained(range(self.num_workers))
        return seed if static_seed else seed + 1

    def reset(self, reset_idx=None) -> None:
        """Reset the envs of every worker (or of the workers flagged in ``reset_idx``); the
        batches they collected before and that were not yielded yet are dropped."""
        self._check_open()
        if self._trajs is not None:  # trajs_per_batch: drop what is assembled, as TorchRL does
            self._trajs.flush()
        ids = [i for i in range(self.num_workers) if reset_idx is None or bool(reset_idx[i])]
        self._call_all("reset", lambda i: (None,), among=ids)
        for i in ids:
            self._ahead[i] = False
        self._drop_drained(ids)

    def state_dict(self) -> dict | list:
        """Each worker's state: ``{"worker0": ..., "worker1": ..., "frames": ..., "iter": ...}``,
        or a list with one per worker for TorchRL's remote collectors."""
        states = self._call_all("state_dict", lambda i: ())
        if self._state_as_list:
            return states
        return {**{f"worker{i}": s for i, s in enumerate(states)}, "frames": self._frames, "iter": self._iter}

    def load_state_dict(self, state_dict) -> None:
        """Load what :meth:`state_dict` returned (a list: one state per worker, or one state for
        all); the batches collected before and not yielded yet are dropped."""
        self._check_open()
        if isinstance(state_dict, dict) and any(k.startswith("worker") for k in state_dict):
            states = {i: state_dict[f"worker{i}"] for i in range(self.num_workers) if f"worker{i}" in state_dict}
            self._frames = int(state_dict.get("frames", self._frames))
            self._iter = int(state_dict.get("iter", self._iter))
        else:
            listed = state_dict if isinstance(state_dict, list) else [state_dict] * self.num_workers
            if len(listed) != self.num_workers:
                raise ValueError(f"load_state_dict: got {len(listed)} states for {self.num_workers} workers")
            states = dict(enumerate(listed))
        self._call_all("load_state_dict", lambda i: (states[i],), among=sorted(states))
        for i in states:
            self._ahead[i] = False
        self._drop_drained(states)

    def get_distant_attr(self, attr: str) -> list:
        """Each worker's collector's attribute at path ``attr``, in worker order."""
        return self._call_all("get_distant_attr", lambda i: (attr,))

    def map_fn(self, method_name: str, list_of_args: list | None = None, list_of_kwargs: list | None = None) -> list:
        """Call ``method_name`` on each worker's collector, worker ``i`` with entry ``i`` of
        ``list_of_args``/``list_of_kwargs`` (one entry per worker); the results in worker order."""
        calls = paired_calls(list_of_args, list_of_kwargs, self.num_workers, f"{type(self).__name__}.map_fn")
        return self._call_all("call_method", lambda i: (method_name, *calls[i]))

    def _forward_plugin_options(self, name: str, options) -> None:
        # a worker that restarts later takes them when it starts (_worker_plugin_options)
        self._call_all("set_plugin_options", lambda i: (name, options_for_worker(options, i)))

    def worker_plugin_reports(self, name: str) -> list:
        # also asked from a reap_collector_shutdown hook: the workers still run then
        return self._call_all("plugin_report", lambda i: (name,))

    # ---- shutdown -----------------------------------------------------------------------------
    def shutdown(self, timeout: float | None = None) -> None:
        """Stop every worker (waiting about ``timeout`` s, default 10, for them to end) and release
        the transport; safe to call any number of times."""
        if self.__dict__.get("_closed", True) or self.__dict__.get("_shutting_down"):
            return
        self._shutting_down = True
        untrack(self)
        try:  # plugins may still ask the workers for their reports
            hook().reap_collector_shutdown(collector=self, worker_idx=-1)
        finally:
            self._closed = True
            self._ready.clear()
            self._latest.clear()
            try:  # a transport may let the requests in flight end first
                self._close_workers(10.0 if timeout is None else float(timeout))
            finally:
                self._inflight.clear()
                self.weight_sync_scheme.close()

    def __repr__(self) -> str:
        d = self.__dict__
        return (f"{type(self).__name__}(num_workers={len(d.get('_ahead', []))}, sync={d.get('_sync')}, "
                f"frames_per_batch={d.get('frames_per_batch')}, total_frames={d.get('total_frames')}, "
                f"frames={d.get('_frames', 0)})")


__all__ = ["CollectorDriver"]
