"""``MultiSyncCollector`` and ``MultiAsyncCollector``: collection in worker processes.

Each worker runs reap's single-process ``Collector`` (the same allocation-free stepping loop)
and writes every batch into a shared-memory TensorDict it allocated once at start-up. The
parent receives a small ``("batch", slot, policy_version)`` message and reads the slot in
place: no batch is ever pickled.

Layout (TorchRL's): a worker with an env of batch ``[*env_batch]`` yields ``[*env_batch, T]``.
``MultiSyncCollector`` with ``cat_results="stack"`` (the default) stacks the workers' batches:
``[n_workers, *env_batch, T]``; ``cat_results="cat"`` (or ``0``) concatenates along the first
dim (``[n_workers * n_envs, T]`` for batched envs, ``[n_workers * T]`` for single envs);
``cat_results=-1`` concatenates along time (``[*env_batch, n_workers * T]``).
``MultiAsyncCollector`` yields one worker's batch at a time, ``[*env_batch, T]``.

Every batch carries ``("collector", "worker_id")`` and ``("collector", "policy_version")``
(batch-shaped int64): which worker produced it and with which weights (0 for the weights the
workers started with, then the number of ``update_policy_weights_`` calls that reached it).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType

from reap.collectors.arguments import (
    check_int,
    check_postproc_and_buffer,
    check_torchrl_kwargs,
    checked_cat_results,
    checked_device,
    checked_exploration_type,
    checked_init_random_frames,
    checked_total_frames,
    checked_worker_ids,
    checked_worker_timeout,
    env_constructors,
    frames_per_worker,
    per_worker,
    policy_factories,
)
from reap.collectors.base import BaseCollector, options_for_worker
from reap.collectors.bookkeeping import LatestWeights, WorkerDeadlines
from reap.collectors.lifetime import ForkserverUse, track, untrack
from reap.collectors.multi import MultiCollector
from reap.collectors.trajectories import TrajIdCounter, split_trajectories
from reap.collectors.worker import worker_seed
from reap.plugins import hook
from reap.weight_update import as_weights, match_weights, weights_from_update_args
from reap_mp._procs import Payload, WorkerError, WorkerHandle, get_context, wait_any
from reap_mp._worker import ReplicatedEnv, collector_worker
from reap_mp.weight_sync import (
    PipeWeightSyncScheme,
    SharedMemWeightSyncScheme,
    adapt_updater,
    resolve_scheme,
)

FAILURE_MODES = ("raise", "restart")
#: The least time a worker is given to start (import torch, build its env and policy), in seconds;
#: a longer ``worker_timeout`` gives it longer.
STARTUP_TIMEOUT = 60.0

def _cpu_only_env(env_device, owner: str) -> None:
    for dev in env_device if isinstance(env_device, (list, tuple)) else [env_device]:
        if dev is not None and torch.device(dev).type != "cpu":
            raise ValueError(
                f"{owner}: env_device={str(dev)!r}: reap envs step on the CPU; leave env_device "
                "unset and use storing_device to place batches on another device"
            )


class _MultiCollector(BaseCollector):
    _sync = True
    _slots_per_worker = 1
    _closed = True  # until the workers exist: __del__ of a half-built collector does nothing
    _forkserver = None  # a ForkserverUse while the workers start from the forkserver

    def __init__(
        self,
        create_env_fn: Sequence[Callable] | Callable,
        policy=None,
        *,
        num_workers: int | None = None,
        policy_factory: Callable | Sequence[Callable] | None = None,
        frames_per_batch: int | Sequence[int],
        total_frames: int | None = -1,
        device=None,
        storing_device=None,
        env_device=None,
        policy_device=None,
        create_env_kwargs: dict | Sequence[dict] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable | None = None,
        split_trajs: bool | None = None,
        exploration_type=InteractionType.RANDOM,
        update_at_each_batch: bool = False,
        num_sub_threads: int = 1,
        set_truncated: bool = False,
        cat_results: str | int | None = None,
        replay_buffer=None,
        extend_buffer: bool = True,
        weight_updater=None,
        weight_sync_schemes=None,
        num_workers_per_collector: int = 1,
        track_traj_ids: bool = True,
        worker_idx: int | None = None,
        mp_start_method: str | None = None,
        worker_timeout: float = 120.0,
        on_worker_failure: str = "raise",
        max_restarts: int = 10,
        sync: bool | None = None,
        backend: str | None = None,
        **torchrl_kwargs,
    ):
        owner = type(self).__name__
        self._handles: list[WorkerHandle] = []
        check_torchrl_kwargs(torchrl_kwargs, owner)

        # ---- envs and workers ------------------------------------------------------------
        fns = env_constructors(create_env_fn, num_workers, owner)
        n = self.num_workers = len(fns)
        check_int(num_workers_per_collector, "num_workers_per_collector", owner, allow_none=False)
        env_kwargs = per_worker(create_env_kwargs, n, "create_env_kwargs", owner)
        if num_workers_per_collector > 1:
            fns = [ReplicatedEnv(fn, num_workers_per_collector, kw) for fn, kw in zip(fns, env_kwargs)]
            env_kwargs = [None] * n

        # ---- policies --------------------------------------------------------------------
        factories = policy_factories(policy, policy_factory, n, owner)
        self.policy = policy

        # ---- frames ----------------------------------------------------------------------
        # sync: the total of one batch, split across workers; async: each worker's batch
        requested = frames_per_worker(frames_per_batch, n, owner, sync=self._sync)
        self.requested_frames_per_batch = frames_per_batch
        self.total_frames = checked_total_frames(total_frames, owner)
        check_int(max_frames_per_traj, "max_frames_per_traj", owner)
        init_random_frames = checked_init_random_frames(init_random_frames, owner)  # TorchRL's -1: none
        total_requested = sum(requested)
        self._random_batches = math.ceil((init_random_frames or 0) / total_requested)
        self.init_random_frames = init_random_frames or 0

        # ---- options ---------------------------------------------------------------------
        cat_results = checked_cat_results(cat_results, owner, sync_name=None if self._sync else "MultiSyncCollector")
        self.cat_results = cat_results
        if on_worker_failure not in FAILURE_MODES:
            raise ValueError(f"{owner}: on_worker_failure must be one of {FAILURE_MODES}, got {on_worker_failure!r}")
        self.on_worker_failure = on_worker_failure
        self.worker_timeout = checked_worker_timeout(worker_timeout, owner)
        check_int(max_restarts, "max_restarts", owner, minimum=0, allow_none=False)
        self.max_restarts = max_restarts
        check_int(num_sub_threads, "num_sub_threads", owner, allow_none=False)
        check_postproc_and_buffer(postproc, replay_buffer, owner)
        checked_exploration_type(exploration_type, owner)  # else only the workers' Collector would refuse it
        _cpu_only_env(env_device, owner)
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.update_at_each_batch = update_at_each_batch
        self.replay_buffer = replay_buffer
        self.extend_buffer = extend_buffer
        storing = per_worker(storing_device, n, "storing_device", owner)
        storing = storing[0] if storing[0] is not None else device
        self.storing_device = checked_device("storing_device", storing, owner)
        policy_devices = [checked_device("policy_device", p if p is not None else device, owner)
                          for p in per_worker(policy_device, n, "policy_device", owner)]

        # ---- weight sync -----------------------------------------------------------------
        if weight_sync_schemes is None:
            remote = any(d is not None and torch.device(d).type != "cpu" for d in policy_devices)
            scheme = PipeWeightSyncScheme() if remote else SharedMemWeightSyncScheme()
        else:
            scheme = resolve_scheme(weight_sync_schemes, owner)
        self.weight_sync_scheme = scheme
        self.weight_updater = adapt_updater(weight_updater, owner)

        # ---- start -----------------------------------------------------------------------
        self._ctx = get_context(mp_start_method, owner)
        self._traj_counter = TrajIdCounter(shared=True, context=self._ctx)
        self._specs = []
        for i in range(n):
            kwargs = {
                "frames_per_batch": requested[i], "create_env_kwargs": env_kwargs[i],
                "max_frames_per_traj": max_frames_per_traj, "reset_at_each_iter": reset_at_each_iter,
                "exploration_type": exploration_type, "track_traj_ids": track_traj_ids,
                "policy_device": policy_devices[i], "set_truncated": set_truncated,
            }
            self._specs.append({
                "create_env_fn": fns[i], "policy": policy, "policy_factory": factories[i],
                "kwargs": kwargs, "random_batches": self._random_batches,
                "slots": self._slots_per_worker, "num_threads": num_sub_threads, "seed": None,
            })
        scheme.bind(self._ctx, n, self._send)
        self.restarts = 0
        self.worker_restarts = [0] * n
        self.policy_version = 0
        self._latest = LatestWeights()
        self._weight_templates: list[TensorDictBase | None] = [None] * n
        self._frames = 0
        self._iter = 0
        self._slots: list[list[TensorDictBase]] = [[] for _ in range(n)]
        self._worker_frames = [0] * n
        self._stash: deque = deque()
        self._deadlines = WorkerDeadlines(n, self.worker_timeout)
        self._seed: tuple[int, bool] | None = None
        if self._ctx.get_start_method() == "forkserver":  # stopped with its last user
            self._forkserver = ForkserverUse()
        self._closed = False
        track(self)
        try:
            for i in range(n):  # one by one: a failed spawn still leaves the others to shut down
                self._handles.append(self._spawn(i))
            for i in range(n):
                self._await_ready(i)
        except BaseException:
            self.shutdown()
            raise
        self.frames_per_batch = sum(self._worker_frames) if self._sync else self._worker_frames[0]
        self.weight_updater.register_collector(self)

    # ---- workers ---------------------------------------------------------------------------
    def _spawn(self, idx: int) -> WorkerHandle:
        return WorkerHandle(
            self._ctx, idx, collector_worker,
            (Payload(self._specs[idx]), self._traj_counter, self.weight_sync_scheme.worker_state(idx)),
            label="collector worker", timeout=self.worker_timeout,
        )

    def _await_ready(self, idx: int) -> None:
        handle = self._handles[idx]
        limit = max(self.worker_timeout, STARTUP_TIMEOUT)
        try:
            ready = handle.wait(handle.started + limit - time.monotonic())
            message = handle.recv(timeout=0) if ready else None
        except WorkerError as exc:
            first, rest = f"{exc}\n".split("\n", 1)  # what follows the first line: the worker's explanation
            raise WorkerError(f"{first} while starting\n{rest}".rstrip("\n"), worker_idx=idx, exitcode=exc.exitcode,
                              remote_traceback=exc.remote_traceback) from None
        if message is None:
            raise WorkerError(
                f"collector worker {idx} was not ready {time.monotonic() - handle.started:.1f} s after "
                f"it was started (start-up allows max(worker_timeout, {STARTUP_TIMEOUT:g} s) = "
                f"{limit:g} s); it may be stuck building its env or policy. If the machine is just "
                "slow, pass a larger worker_timeout", worker_idx=idx)
        _, slots, weights_buffer, info = message
        self._slots[idx] = slots
        self._worker_frames[idx] = info["frames_per_batch"]
        self._weight_templates[idx] = info["weights"]
        self.weight_sync_scheme.on_worker_ready(idx, weights_buffer)
        self._deadlines.forget(idx)

    def _send(self, idx: int, message: tuple) -> None:
        self._handles[idx].send(message)

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live workers."""
        return [h.pid for h in self._handles if not h.closed]

    def _fail(self, idx: int, error: WorkerError) -> None:
        """Handle a failed worker: restart it (re-queueing its rollouts), or shut down and raise."""
        while True:
            if self.on_worker_failure != "restart" or self._closed:
                break
            if self.worker_restarts[idx] >= self.max_restarts:
                error = WorkerError(f"{error}\n(gave up after {self.max_restarts} restarts of this worker)",
                                    worker_idx=idx, exitcode=error.exitcode,
                                    remote_traceback=error.remote_traceback)
                break
            requeue = self._requeue_count(idx)
            try:
                self._restart(idx)
                for _ in range(requeue):
                    self._collect_cmd(idx, self._free_slot(idx))
                return
            except WorkerError as exc:  # failed again while starting or receiving its work
                error = exc
        self.shutdown()
        raise error

    def _requeue_count(self, idx: int) -> int:
        raise NotImplementedError

    def _free_slot(self, idx: int) -> int:
        return 0

    def _restart(self, idx: int) -> None:
        self._handles[idx].close(grace=0.5)
        self.restarts += 1
        self.worker_restarts[idx] += 1
        # its delivered batches lived in its shared memory, which goes with it: asked again below
        self._stash = deque(item for item in self._stash if item[0] != idx)
        self._deadlines.forget(idx)
        if self._seed is not None:
            self._specs[idx]["seed"] = (worker_seed(self._seed[0], idx, self.worker_restarts[idx]), self._seed[1])
        self._handles[idx] = self._spawn(idx)
        self._await_ready(idx)
        if self._latest.weights is not None:  # the weights pushed last, under their own version
            self.weight_sync_scheme.push(self._latest.weights, [idx], self._latest.version)

    def _request(self, idx: int, message: tuple, *, resend: bool = True):
        """Send a command and wait for its ``("ok", value)``; batches that arrive are stashed.

        A worker that fails meanwhile is handled by ``_fail`` (raise, or restart it and, with
        ``resend``, send the command again to the new worker).
        """
        while True:
            try:
                handle = self._handles[idx]
                handle.send(message)
                while True:
                    reply = handle.recv()
                    if reply[0] == "ok":
                        return reply[1]
                    self._on_batch(idx, reply)
            except WorkerError as exc:
                self._fail(idx, exc)
                if not resend:
                    return None

    def _on_batch(self, idx: int, reply: tuple) -> None:
        self._deadlines.delivered(idx)
        self._stash.append((idx, reply[1], reply[2]))

    def _collect_cmd(self, idx: int, slot: int) -> None:
        self._deadlines.asked(idx)
        try:
            self._send(idx, ("collect", slot))
        except WorkerError as exc:  # it died since its last message
            self._fail(idx, exc)

    def _wait_batch(self, pending: set[int] | None = None) -> tuple[int, int, int]:
        """The next finished ``(worker, slot, version)``, among ``pending`` workers if given.

        Every worker that owes a batch is held to its own deadline (``worker_timeout`` after its
        last batch), checked on each call, so one that hangs is found while others deliver.
        """
        timeout = 0.0  # first take what has already arrived, then check deadlines, then wait
        while True:
            busy = [h for h in self._handles if self._deadlines.owed(h.idx)]
            for handle in wait_any(busy, timeout):
                try:
                    reply = handle.recv(timeout=self.worker_timeout)
                except WorkerError as exc:
                    self._fail(handle.idx, exc)
                    continue
                if reply[0] == "batch":
                    self._on_batch(handle.idx, reply)
            overdue = self._deadlines.overdue()
            if overdue:  # one at a time: a restart takes a while, the others may deliver meanwhile
                idx = overdue[0]
                self._fail(idx, WorkerError(
                    f"collector worker {idx} delivered no batch for {self._deadlines.waited(idx):.1f} s "
                    f"(worker_timeout={self.worker_timeout:g} s); it may be stuck in its env or policy. "
                    "Raise worker_timeout for slower workers.", worker_idx=idx))
                timeout = 0.0
                continue
            for k, item in enumerate(self._stash):
                if pending is None or item[0] in pending:
                    del self._stash[k]
                    return item
            watch = [i for i in range(self.num_workers)
                     if (pending is None or i in pending) and self._deadlines.owed(i)]
            if not watch:
                raise RuntimeError("internal error: waiting for a batch no worker is collecting")
            timeout = max(0.0, self._deadlines.next_deadline() - time.monotonic())

    # ---- output ----------------------------------------------------------------------------
    def _finish(self, batch: TensorDictBase) -> TensorDictBase | None:
        if self.storing_device is not None and self.storing_device.type != "cpu":
            batch = batch.to(self.storing_device)
        if self.split_trajs:
            batch = split_trajectories(batch)
        if self.postproc is not None:
            batch = self.postproc(batch)
        hook().reap_batch_ready(collector=self, batch=batch)
        if self.replay_buffer is not None:
            if self.extend_buffer:
                self.replay_buffer.extend(batch)
            return None
        return batch

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__}: the collector was shut down; create a new one")

    def _more(self) -> bool:
        return self.total_frames == -1 or self._frames < self.total_frames

    # ---- weights ---------------------------------------------------------------------------
    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, model_id=None,
                               weights_dict=None, **kwargs) -> None:
        """Send new policy weights to the workers (all, or ``worker_ids``).

        Accepts a module, a TensorDict of weights, a state dict, ``weights_dict={"policy": ...}``
        or the keywords ``policy=`` / ``weights=``. Without weights, the ``policy`` the
        collector was built with is the source (the trainer's module, updated in place).
        Workers load the weights before their next rollout; batches record the version.
        """
        policy_or_weights = weights_from_update_args(
            policy_or_weights, model_id=model_id, weights_dict=weights_dict, **kwargs
        )
        self._check_open()
        self.weight_updater.push_weights(policy_or_weights, worker_ids=worker_ids)

    def _push_weights(self, weights, worker_ids) -> TensorDictBase:
        """Push ``weights`` (any accepted form; None: the collector's policy) through the scheme."""
        self._check_open()
        if weights is None:
            if self.policy is None:
                raise ValueError(
                    "update_policy_weights_: no weights given and the collector has no policy to read "
                    "them from (it was built with policy_factory); pass the weights"
                )
            weights = self.policy
        weights = as_weights(weights)
        ids = checked_worker_ids(worker_ids, self.num_workers)
        missing = [i for i in ids if self._weight_templates[i] is None
                   or not self.weight_sync_scheme.has_weights(i)]
        if missing:
            raise ValueError(
                f"update_policy_weights_: the policy of worker(s) {missing} has no parameters to update"
            )
        try:  # the exact keys, shapes and (exactly castable) dtypes of every worker's policy
            for i in ids:
                weights = match_weights(self._weight_templates[i], weights)
        except ValueError as exc:
            raise ValueError(f"update_policy_weights_: {exc}") from None
        self.policy_version += 1
        self._remember_weights(weights, ids)  # first: a worker restarted during the push gets them
        remaining = ids
        while remaining:
            try:
                self.weight_sync_scheme.push(weights, remaining, self.policy_version)
                break
            except WorkerError as exc:  # restarted with these weights (or raised); on to the rest
                self._fail(exc.worker_idx, exc)
                remaining = remaining[remaining.index(exc.worker_idx) + 1:]
        return weights

    def _remember_weights(self, weights: TensorDictBase, ids: list[int]) -> None:
        """Keep the weights pushed last, in the policy's dtypes and shapes, for workers that restart.

        Whichever workers they went to: a restarted worker runs them under their own version.
        """
        self._latest.remember(self._weight_templates[ids[0]], weights, self.policy_version)

    # ---- plugin options and reports (reap.hookspecs.reap_plugin_options) --------------------
    def _forward_plugin_options(self, name: str, options) -> None:
        self._check_open()
        for i in range(self.num_workers):
            value = options_for_worker(options, i)
            kept = self._specs[i].setdefault("plugin_options", {})  # for a worker that restarts
            if value is None:
                kept.pop(name, None)
            else:
                kept[name] = value
            self._request(i, ("plugin_options", name, value))

    def worker_plugin_reports(self, name: str) -> list:
        # also answered from a reap_collector_shutdown hook: the workers are still running then
        if not self._handles or any(h.closed for h in self._handles):
            raise RuntimeError(f"{type(self).__name__}: the workers were shut down")
        return [self._request(i, ("plugin_report", name)) for i in range(self.num_workers)]

    # ---- control ---------------------------------------------------------------------------
    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed every worker: worker ``i`` gets :func:`worker_seed` ``(seed, i)``.

        Seeds are distinct across workers and reproducible; runs seeded ``seed`` and
        ``seed + 1`` do not share env seeds. With ``static_seed=True`` every worker gets
        ``seed`` itself. Returns ``seed + 1`` (``seed`` when static), the seed of a next run.
        """
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"set_seed: seed must be an int, got {seed!r}")
        self._check_open()
        self._seed = (seed, static_seed)
        for i in range(self.num_workers):
            s = seed if static_seed else worker_seed(seed, i)
            self._specs[i]["seed"] = (s, static_seed)
            # a worker restarted meanwhile was seeded from its spec (a seed of its own): not again
            self._request(i, ("seed", s, static_seed), resend=False)
        return seed if static_seed else seed + 1

    def reset(self, reset_idx=None) -> None:
        """Reset the envs of every worker (or of the workers flagged in ``reset_idx``)."""
        self._check_open()
        for i in range(self.num_workers):
            if reset_idx is None or bool(reset_idx[i]):
                self._request(i, ("reset", None))

    def state_dict(self) -> dict:
        """``{"worker0": ..., "worker1": ..., "frames": ..., "iter": ...}``."""
        self._check_open()
        state = {f"worker{i}": self._request(i, ("state_dict",)) for i in range(self.num_workers)}
        state.update(frames=self._frames, iter=self._iter)
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self._check_open()
        for i in range(self.num_workers):
            if f"worker{i}" in state_dict:
                self._request(i, ("load_state_dict", state_dict[f"worker{i}"]))
        self._frames = int(state_dict.get("frames", self._frames))
        self._iter = int(state_dict.get("iter", self._iter))

    def shutdown(self, timeout: float = 2.0) -> None:
        """Stop the workers (terminate, then kill, after ``timeout`` s) and free shared memory."""
        if self._closed:
            return
        self._closed = True
        untrack(self)
        try:
            hook().reap_collector_shutdown(collector=self, worker_idx=-1)
        finally:
            for handle in self._handles:
                handle.close(grace=timeout)
            self._slots = [[] for _ in range(self.num_workers)]
            self._stash.clear()
            self._latest.clear()
            self._traj_counter = None  # its semaphore is unlinked once nothing refers to it
            self.weight_sync_scheme.close()
            if self._forkserver is not None:
                self._forkserver.release()

    @property
    def frames(self) -> int:
        return self._frames

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_workers={self.num_workers}, frames_per_batch="
                f"{getattr(self, 'frames_per_batch', '?')}, total_frames={self.total_frames}, "
                f"frames={getattr(self, '_frames', 0)})")


class MultiSyncCollector(_MultiCollector):
    """Collect with several worker processes; every batch holds one rollout of each worker.

    All workers run the same policy version for a given batch: weights pushed with
    ``update_policy_weights_`` between two batches reach every worker before its next rollout.
    Arguments follow TorchRL's ``MultiSyncCollector``; ``frames_per_batch`` is the total per
    batch (split evenly, rounded up) or a list with one entry per worker. reap adds
    ``mp_start_method`` (``"spawn"``), ``worker_timeout`` (seconds a worker that owes a batch may
    go without delivering one, or without answering a request, before it is declared stuck; each
    worker has its own deadline; start-up gets at least ``STARTUP_TIMEOUT`` = 60 s),
    ``on_worker_failure`` (``"raise"``, or ``"restart"``: a new worker, which runs the latest
    weights and redoes the lost rollouts) and ``max_restarts``. Pushed weights must match the
    workers' policy: equal shapes, and a dtype cast only when exact. See the module docstring
    for the layouts of ``cat_results``.

    Examples:
        >>> import torch  # doctest: +SKIP
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import GymEnv, MultiSyncCollector
        >>> def make_env():
        ...     return GymEnv("Pendulum-v1", num_envs=4)
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> if __name__ == "__main__":
        ...     with MultiSyncCollector([make_env, make_env], policy, frames_per_batch=64,
        ...                             total_frames=128) as collector:
        ...         for batch in collector:
        ...             print(batch.batch_size)  # [2 workers, 4 envs, 8 steps]
        torch.Size([2, 4, 8])
        torch.Size([2, 4, 8])
    """

    _sync = True

    def _requeue_count(self, idx: int) -> int:
        return 1 if self._deadlines.owed(idx) else 0  # it redoes its share of the batch being gathered

    def iterator(self):
        self._check_open()
        if not getattr(self, "_hook_started", False):
            self._hook_started = True
            hook().reap_collector_start(collector=self, worker_idx=-1)
        while self._more():
            self._check_open()
            if self.update_at_each_batch:
                self.update_policy_weights_()
            yield self._finish(self._gather())

    def _gather(self) -> TensorDictBase:
        for i in range(self.num_workers):
            self._collect_cmd(i, 0)
        pending = set(range(self.num_workers))
        while pending:
            idx, _, _ = self._wait_batch(pending)
            pending.discard(idx)
        parts = [self._slots[i][0] for i in range(self.num_workers)]
        if self.cat_results == "stack":
            if len({p.batch_size for p in parts}) > 1:
                raise ValueError(
                    f"{type(self).__name__}: the workers' batches have different shapes "
                    f"{[tuple(p.batch_size) for p in parts]}; cat_results='stack' needs equal ones, "
                    "use cat_results=-1 to concatenate along time"
                )
            batch = torch.stack(parts, 0)
        else:
            batch = torch.cat(parts, self.cat_results)
        self._frames += batch.numel()
        self._iter += 1
        return batch


class MultiAsyncCollector(_MultiCollector):
    """Collect with several worker processes; yield each worker's batch as soon as it is done.

    Each worker double-buffers: it owns two shared-memory slots and starts its next rollout
    while the trainer reads the last one. Batches are ``[*env_batch, T]`` and say who made them
    in ``("collector", "worker_id")`` and with which weights in ``("collector",
    "policy_version")``. ``update_at_each_batch=True`` pushes the policy's weights to the worker
    that delivered each batch before it collects again. Other arguments follow
    :class:`MultiSyncCollector` (``cat_results`` does not apply).

    Examples:
        >>> import torch  # doctest: +SKIP
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import GymEnv, MultiAsyncCollector
        >>> def make_env():
        ...     return GymEnv("CartPole-v1")
        >>> policy = lambda observation: torch.tensor([1, 0])  # CartPole's one-hot action: push left
        >>> if __name__ == "__main__":
        ...     with MultiAsyncCollector([make_env, make_env], policy, frames_per_batch=50,
        ...                              total_frames=200) as collector:
        ...         for batch in collector:
        ...             print(batch.batch_size, batch["collector", "worker_id"][0].item())
        torch.Size([50]) 0
        torch.Size([50]) 1
        torch.Size([50]) 0
        torch.Size([50]) 1
    """

    _sync = False
    _slots_per_worker = 2

    _started = False

    def _requeue_count(self, idx: int) -> int:
        return self._slots_per_worker if self._started else 0

    def _free_slot(self, idx: int) -> int:
        return self._deadlines.owed(idx)  # slots 0, 1 in order after a restart

    def iterator(self):
        self._check_open()
        if not getattr(self, "_hook_started", False):
            self._hook_started = True
            hook().reap_collector_start(collector=self, worker_idx=-1)
        if not self._started:  # queue a rollout into each slot of every worker
            self._started = True
            for i in range(self.num_workers):
                for slot in range(self._slots_per_worker):
                    self._collect_cmd(i, slot)
        while self._more():
            self._check_open()
            idx, slot, _ = self._wait_batch()
            batch = self._slots[idx][slot].clone()
            self._frames += batch.numel()
            self._iter += 1
            if self.update_at_each_batch:
                self.update_policy_weights_(worker_ids=idx)
            self._collect_cmd(idx, slot)
            out = self._finish(batch)
            yield out


class AsyncCollector(MultiAsyncCollector):
    """One collector in one worker process (TorchRL's ``AsyncCollector``): a
    :class:`MultiAsyncCollector` of a single worker, which fills its next batch while the
    trainer works on the last one. ``create_env_fn`` is one env constructor; the other
    arguments are :class:`MultiAsyncCollector`'s.

    Examples:
        >>> import torch  # doctest: +SKIP
        >>> from reap import AsyncCollector, GymEnv
        >>> policy = lambda observation: torch.tensor([1, 0])  # CartPole's one-hot action: push left
        >>> if __name__ == "__main__":
        ...     with AsyncCollector(lambda: GymEnv("CartPole-v1"), policy, frames_per_batch=50,
        ...                         total_frames=100) as collector:
        ...         for batch in collector:
        ...             print(batch.batch_size)
        torch.Size([50])
        torch.Size([50])
    """

    def __init__(self, create_env_fn: Callable, policy=None, **kwargs):
        if isinstance(create_env_fn, (list, tuple)):
            raise TypeError(
                "AsyncCollector: create_env_fn must be one env constructor (it runs one worker); "
                "for a list of them use MultiAsyncCollector")
        if kwargs.get("num_workers") not in (None, 1):
            raise ValueError(
                f"AsyncCollector runs one worker, got num_workers={kwargs['num_workers']!r}; "
                "use MultiAsyncCollector for more")
        super().__init__(create_env_fn, policy, **kwargs)


MultiSyncDataCollector = MultiSyncCollector
MultiCollector.register(_MultiCollector)  # isinstance(MultiSyncCollector(...), MultiCollector), as TorchRL
MultiaSyncDataCollector = MultiAsyncCollector
aSyncDataCollector = AsyncCollector

__all__ = [
    "AsyncCollector",
    "MultiAsyncCollector",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "aSyncDataCollector",
    "worker_seed",
]
