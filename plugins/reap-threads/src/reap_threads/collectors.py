"""``ThreadSyncCollector`` and ``ThreadAsyncCollector``: K worker threads, each running a reap
``Collector``, for envs whose step releases the GIL (native simulators, I/O-bound envs).

The layout and keyword arguments are those of reap's (and TorchRL's) ``MultiSyncCollector`` and
``MultiAsyncCollector``: ``frames_per_batch`` is the total of one batch, split evenly across the
workers (sync), or each worker's batch (async); a worker with an env of batch ``[*env_batch]``
yields ``[*env_batch, T]``; the sync collector stacks them (``cat_results="stack"``:
``[n_workers, *env_batch, T]``) or concatenates them (``"cat"``/``0``, or ``-1`` along time).
Every batch carries ``("collector", "worker_id")`` and ``("collector", "policy_version")``.

Each worker runs a copy of the policy (``copy.deepcopy``, or ``policy_factory()``); weights pushed
with ``update_policy_weights_`` reach it through the ``"threads"`` weight-sync scheme at its next
rollout boundary. What a worker does with its collector (weights between rollouts, batch tags,
seeds, error text) is reap-core's :class:`~reap.collectors.worker.CollectorWorker`; the driver's
deadlines are :class:`~reap.collectors.bookkeeping.WorkerDeadlines`; the arguments are checked
and split per worker by :mod:`reap.collectors.arguments`, as reap-collectors-mp does. This module
adds only the transport: a command queue per worker thread and one queue of results.
"""

from __future__ import annotations

import copy
import math
import queue
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType

from reap.collectors.arguments import (
    check_postproc_and_buffer,
    check_torchrl_kwargs,
    checked_cat_results,
    checked_total_frames,
    checked_worker_ids,
    checked_worker_timeout,
    env_constructors,
    frames_per_worker,
    per_worker,
    policy_factories,
)
from reap.collectors.base import BaseCollector, options_for_worker
from reap.collectors.bookkeeping import WorkerDeadlines
from reap.collectors.collector import Collector
from reap.collectors.multi import MultiCollector
from reap.collectors.trajectories import TrajIdCounter, split_trajectories
from reap.collectors.worker import CollectorWorker, format_worker_error, worker_seed
from reap.plugins import get_weight_sync_scheme, hook
from reap.weight_update import as_weights, match_weights, weights_from_update_args
from reap_threads.weight_sync import ThreadWeightSyncScheme

#: reap-collectors-mp's arguments, taken so that a collector can switch backends; no effect here.
_MP_ONLY = frozenset({"mp_start_method", "on_worker_failure"})


class ThreadWorkerError(RuntimeError):
    """A worker thread raised: the message names the worker and holds its traceback."""

    def __init__(self, message: str, *, worker_idx: int, remote_traceback: str | None = None):
        super().__init__(message if remote_traceback is None else f"{message}\n\nworker traceback:\n{remote_traceback}")
        self.worker_idx = worker_idx
        self.remote_traceback = remote_traceback


def _worker_loop(worker: CollectorWorker, commands: queue.Queue, results: queue.Queue) -> None:
    """A worker thread: run commands in order, put ``(kind, idx, value)`` on ``results``."""
    idx = worker.worker_idx
    try:
        while True:
            worker.waiting()
            command, *args = commands.get()
            if command == "close":
                return
            if command == "collect":
                results.put(("batch", idx, worker.collect()))
            elif command == "seed":
                results.put(("ok", idx, worker.set_seed(*args)))
            elif command == "reset":
                worker.collector.reset(args[0])
                results.put(("ok", idx, None))
            elif command == "state_dict":
                results.put(("ok", idx, worker.state_dict()))
            elif command == "load_state_dict":
                worker.load_state_dict(args[0])
                results.put(("ok", idx, None))
            elif command == "plugin_options":
                worker.set_plugin_options(*args)
                results.put(("ok", idx, None))
            elif command == "plugin_report":
                results.put(("ok", idx, worker.plugin_report(args[0])))
            else:
                raise ValueError(f"unknown command {command!r}")
    except BaseException as exc:  # reported to the driver, which raises it with the worker's index
        results.put(("error", idx, worker.format_error(exc, "thread worker")))
    finally:
        try:
            worker.close()
        except Exception as exc:
            results.put(("error", idx, format_worker_error(exc, idx, "thread worker (closing)")))


class _ThreadCollector(BaseCollector):
    _sync = True
    _queued_per_worker = 1
    _closed = True  # until the threads exist: __del__ of a half-built collector does nothing

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
        set_truncated: bool = False,
        cat_results: str | int | None = None,
        replay_buffer=None,
        extend_buffer: bool = True,
        weight_sync_schemes=None,
        track_traj_ids: bool = True,
        worker_timeout: float = 120.0,
        sync: bool | None = None,
        backend: str | None = None,
        **torchrl_kwargs,
    ):
        owner = type(self).__name__
        self._threads: list[threading.Thread] = []
        check_torchrl_kwargs(torchrl_kwargs, owner, also_no_effect=_MP_ONLY)
        fns = env_constructors(create_env_fn, num_workers, owner)
        n = self.num_workers = len(fns)
        factories = policy_factories(policy, policy_factory, n, owner)
        env_kwargs = per_worker(create_env_kwargs, n, "create_env_kwargs", owner)
        requested = frames_per_worker(frames_per_batch, n, owner, sync=self._sync)
        self.total_frames = checked_total_frames(total_frames, owner)
        self.requested_frames_per_batch = frames_per_batch
        self.cat_results = checked_cat_results(cat_results, owner,
                                               sync_name=None if self._sync else "ThreadSyncCollector")
        self.worker_timeout = checked_worker_timeout(worker_timeout, owner)
        check_postproc_and_buffer(postproc, replay_buffer, owner)
        if weight_sync_schemes is None or weight_sync_schemes == "threads":
            scheme = ThreadWeightSyncScheme()
        elif isinstance(weight_sync_schemes, ThreadWeightSyncScheme):
            scheme = weight_sync_schemes
        else:
            raise ValueError(f"{owner}: weight_sync_schemes must be 'threads' or a ThreadWeightSyncScheme "
                             f"(worker threads share the driver's memory), got {weight_sync_schemes!r}")
        get_weight_sync_scheme("threads")  # registered by this plugin: fails clearly if it was disabled
        self.weight_sync_scheme = scheme
        self.policy = policy
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.update_at_each_batch = update_at_each_batch
        self.replay_buffer = replay_buffer
        self.extend_buffer = extend_buffer
        storing = storing_device if storing_device is not None else device
        self.storing_device = torch.device(storing) if storing is not None else None
        self.init_random_frames = init_random_frames or 0
        random_batches = math.ceil(self.init_random_frames / sum(requested))

        self.policy_version = 0
        self._frames = 0
        self._iter = 0
        self._stash: deque = deque()
        self._results: queue.Queue = queue.Queue()
        self._commands: list[queue.Queue] = []
        self._templates: list[TensorDictBase | None] = []
        self._deadlines = WorkerDeadlines(n, self.worker_timeout)
        counter = TrajIdCounter()  # thread-safe: one id sequence for every worker
        workers = []
        try:
            for i in range(n):
                worker_policy = None
                if factories[i] is None and policy is not None:
                    worker_policy = copy.deepcopy(policy) if isinstance(policy, torch.nn.Module) else policy
                collector = Collector(
                    fns[i], worker_policy, policy_factory=factories[i], frames_per_batch=requested[i],
                    create_env_kwargs=env_kwargs[i], max_frames_per_traj=max_frames_per_traj,
                    reset_at_each_iter=reset_at_each_iter, exploration_type=exploration_type,
                    track_traj_ids=track_traj_ids, policy_device=policy_device, env_device=env_device,
                    worker_idx=i, traj_id_counter=counter, set_truncated=set_truncated)
                collector.init_random_frames = random_batches * collector.frames_per_batch
                receiver = scheme.receiver(i, collector.policy)
                self._templates.append(receiver.local)
                workers.append(CollectorWorker(i, collector, receiver=receiver))
        except BaseException:
            for worker in workers:
                worker.close()
            raise
        self._worker_frames = [w.collector.frames_per_batch for w in workers]
        self.frames_per_batch = sum(self._worker_frames) if self._sync else self._worker_frames[0]
        self._closed = False
        for worker in workers:
            commands: queue.Queue = queue.Queue()
            thread = threading.Thread(target=_worker_loop, args=(worker, commands, self._results),
                                      name=f"reap-threads-worker-{worker.worker_idx}", daemon=True)
            self._commands.append(commands)
            self._threads.append(thread)
            thread.start()

    # ---- transport -------------------------------------------------------------------------
    def _raise(self, idx: int, text: str, tb: str | None) -> None:
        self.shutdown()
        raise ThreadWorkerError(text, worker_idx=idx, remote_traceback=tb)

    def _take(self, timeout: float) -> bool:
        """Move one result into the stash (or raise a worker's error); False on timeout."""
        try:
            kind, idx, value = self._results.get(timeout=timeout) if timeout > 0 else self._results.get_nowait()
        except queue.Empty:
            return False
        if kind == "error":
            self._raise(idx, *value)
        if kind == "batch":
            self._deadlines.delivered(idx)
        self._stash.append((kind, idx, value))
        return True

    def _wait(self, kind: str, among: set[int] | None = None) -> tuple[int, object]:
        """The next ``(idx, value)`` of ``kind`` from a worker in ``among`` (all), within deadlines."""
        while True:
            while self._take(0):  # first what has arrived (the trainer may have been busy a while)
                pass
            for k, (got, idx, value) in enumerate(self._stash):
                if got == kind and (among is None or idx in among):
                    del self._stash[k]
                    return idx, value
            overdue = self._deadlines.overdue()
            if overdue:
                idx = overdue[0]
                self._raise(idx, f"thread worker {idx} delivered nothing for {self._deadlines.waited(idx):.1f} s "
                                 f"(worker_timeout={self.worker_timeout:g} s); it may be stuck in its env or "
                                 "policy. Raise worker_timeout for slower workers.", None)
            deadline = self._deadlines.next_deadline()
            self._take(0.5 if deadline is None else min(0.5, max(0.0, deadline - time.monotonic())))

    def _request(self, idx: int, *command):
        """Run a control command in worker ``idx`` (after what it has queued) and return its value."""
        self._check_open()
        self._deadlines.asked(idx)  # the answer is held to the same deadline as a batch
        self._commands[idx].put(command)
        try:
            return self._wait("ok", {idx})[1]
        finally:
            if not self._closed:
                self._deadlines.delivered(idx)

    def _collect_cmd(self, idx: int) -> None:
        self._deadlines.asked(idx)
        self._commands[idx].put(("collect",))

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

    def _more(self) -> bool:
        return self.total_frames == -1 or self._frames < self.total_frames

    def _start_hooks(self) -> None:
        if not getattr(self, "_hook_started", False):
            self._hook_started = True
            hook().reap_collector_start(collector=self, worker_idx=-1)

    # ---- weights ---------------------------------------------------------------------------
    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, model_id=None,
                               weights_dict=None, **kwargs) -> None:
        """Send new weights to the workers (all, or ``worker_ids``): each loads them before its next
        rollout. Accepts what reap's ``Collector`` accepts; without weights, the ``policy`` the
        collector was built with is read."""
        weights = weights_from_update_args(policy_or_weights, model_id=model_id,
                                           weights_dict=weights_dict, **kwargs)
        self._check_open()
        if weights is None:
            if self.policy is None or not isinstance(self.policy, torch.nn.Module):
                raise ValueError("update_policy_weights_: no weights given and the collector has no policy "
                                 "module to read them from (it was built with policy_factory); pass the weights")
            weights = self.policy
        ids = checked_worker_ids(worker_ids, self.num_workers)
        missing = [i for i in ids if self._templates[i] is None]
        if missing:
            raise ValueError(f"update_policy_weights_: the policy of worker(s) {missing} has no parameters to update")
        weights = as_weights(weights)
        try:
            for i in ids:
                weights = match_weights(self._templates[i], weights)
        except ValueError as exc:
            raise ValueError(f"update_policy_weights_: {exc}") from None
        self.policy_version += 1
        self.weight_sync_scheme.push(weights, ids, self.policy_version)

    # ---- control ---------------------------------------------------------------------------
    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed every worker: worker ``i`` gets :func:`worker_seed` ``(seed, i)`` (``seed`` itself
        with ``static_seed=True``). Returns ``seed + 1`` (``seed`` when static)."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"set_seed: seed must be an int, got {seed!r}")
        for i in range(self.num_workers):
            self._request(i, "seed", seed if static_seed else worker_seed(seed, i), static_seed)
        return seed if static_seed else seed + 1

    def reset(self, reset_idx=None) -> None:
        """Reset the envs of every worker (or of the workers flagged in ``reset_idx``)."""
        for i in range(self.num_workers):
            if reset_idx is None or bool(reset_idx[i]):
                self._request(i, "reset", None)

    def state_dict(self) -> dict:
        """``{"worker0": ..., "worker1": ..., "frames": ..., "iter": ...}``."""
        state = {f"worker{i}": self._request(i, "state_dict") for i in range(self.num_workers)}
        state.update(frames=self._frames, iter=self._iter)
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        for i in range(self.num_workers):
            if f"worker{i}" in state_dict:
                self._request(i, "load_state_dict", state_dict[f"worker{i}"])
        self._frames = int(state_dict.get("frames", self._frames))
        self._iter = int(state_dict.get("iter", self._iter))

    def _forward_plugin_options(self, name: str, options) -> None:
        for i in range(self.num_workers):
            self._request(i, "plugin_options", name, options_for_worker(options, i))

    def worker_plugin_reports(self, name: str) -> list:
        return [self._request(i, "plugin_report", name) for i in range(self.num_workers)]

    @property
    def worker_threads(self) -> list[threading.Thread]:
        """The worker threads (alive until ``shutdown()``)."""
        return list(self._threads)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the worker threads (each finishes its current rollout, closes its collector and
        ends) and wait for them, at most ``timeout`` seconds in all; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            hook().reap_collector_shutdown(collector=self, worker_idx=-1)
        finally:
            for commands in self._commands:
                while True:  # drop queued work: the worker ends after its current command
                    try:
                        commands.get_nowait()
                    except queue.Empty:
                        break
                commands.put(("close",))
            end = time.monotonic() + timeout
            stuck = []
            for thread in self._threads:
                thread.join(max(0.0, end - time.monotonic()))
                if thread.is_alive():
                    stuck.append(thread.name)
            self._stash.clear()
            self.weight_sync_scheme.close()
            if stuck:
                warnings.warn(f"{type(self).__name__}.shutdown(): {stuck} did not end within {timeout:g} s "
                              "(stuck in an env step?); they are daemon threads and end with the process",
                              RuntimeWarning, stacklevel=2)

    @property
    def frames(self) -> int:
        return self._frames

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_workers={self.num_workers}, frames_per_batch="
                f"{getattr(self, 'frames_per_batch', '?')}, total_frames={self.total_frames}, frames={self._frames})")


class ThreadSyncCollector(_ThreadCollector):
    """Collect with ``num_workers`` threads; every batch holds one rollout of each worker.

    The thread-pool counterpart of ``MultiSyncCollector``, same arguments and layout (see the
    module docstring); ``worker_timeout`` bounds every wait for a worker. Weights pushed between
    two batches reach every worker before its next rollout, so a batch has one policy version.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import GymEnv
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> make_env = lambda: GymEnv("Pendulum-v1", num_envs=2)
        >>> with ThreadSyncCollector([make_env, make_env], policy, frames_per_batch=32,
        ...                          total_frames=64) as collector:
        ...     for batch in collector:
        ...         print(batch.batch_size, batch["collector", "policy_version"].max().item())
        ...         collector.update_policy_weights_()
        torch.Size([2, 2, 8]) 0
        torch.Size([2, 2, 8]) 1
    """

    _sync = True

    def iterator(self):
        self._check_open()
        self._start_hooks()
        while self._more():
            self._check_open()
            if self.update_at_each_batch:
                self.update_policy_weights_()
            for i in range(self.num_workers):
                self._collect_cmd(i)
            parts: list = [None] * self.num_workers
            pending = set(range(self.num_workers))
            while pending:
                idx, batch = self._wait("batch", pending)
                parts[idx] = batch
                pending.discard(idx)
            if self.cat_results == "stack":
                if len({p.batch_size for p in parts}) > 1:
                    raise ValueError(
                        f"{type(self).__name__}: the workers' batches have different shapes "
                        f"{[tuple(p.batch_size) for p in parts]}; cat_results='stack' needs equal ones, "
                        "use cat_results=-1 to concatenate along time")
                batch = torch.stack(parts, 0)
            else:
                batch = torch.cat(parts, self.cat_results)
            self._frames += batch.numel()
            self._iter += 1
            yield self._finish(batch)


class ThreadAsyncCollector(_ThreadCollector):
    """Collect with ``num_workers`` threads; yield each worker's batch as soon as it is done.

    The thread-pool counterpart of ``MultiAsyncCollector``: each worker keeps one rollout queued
    ahead, so it collects while the trainer reads; ``update_at_each_batch=True`` pushes the
    policy's weights to the worker that delivered each batch.

    Examples:
        >>> import torch
        >>> from reap import GymEnv
        >>> policy = lambda observation: torch.tensor([1, 0])  # CartPole's one-hot action: push left
        >>> with ThreadAsyncCollector([lambda: GymEnv("CartPole-v1")] * 2, policy, frames_per_batch=50,
        ...                           total_frames=200) as collector:
        ...     for batch in collector:
        ...         print(batch.batch_size)  # one worker's batch, in the order they finish
        torch.Size([50])
        torch.Size([50])
        torch.Size([50])
        torch.Size([50])
    """

    _sync = False
    _started = False

    def iterator(self):
        self._check_open()
        self._start_hooks()
        if not self._started:
            self._started = True
            for i in range(self.num_workers):
                for _ in range(2):
                    self._collect_cmd(i)
        while self._more():
            self._check_open()
            idx, batch = self._wait("batch")
            self._frames += batch.numel()
            self._iter += 1
            if self.update_at_each_batch:
                self.update_policy_weights_(worker_ids=idx)
            self._collect_cmd(idx)
            yield self._finish(batch)


MultiCollector.register(_ThreadCollector)  # isinstance(c, MultiCollector), as the other backends

__all__ = ["ThreadAsyncCollector", "ThreadSyncCollector", "ThreadWorkerError", "worker_seed"]
