"""``ThreadSyncCollector`` and ``ThreadAsyncCollector``: K worker threads, each running a reap
``Collector``, for envs whose step releases the GIL (native simulators, I/O-bound envs).

The arguments, layout and behaviour are those of reap's (and TorchRL's) ``MultiSyncCollector``
and ``MultiAsyncCollector``: reap-core's :class:`~reap.collectors.multi_worker.MultiWorkerCollector`
checks and splits them, and its driver does the rest (iteration, post-processing, weights,
deadlines, restarts). This module is only the transport: a thread per worker, a command queue
for each, one queue of answers.

Each worker runs a copy of the policy (``copy.deepcopy``, or ``policy_factory()``); pushed weights
travel as one detached copy with each worker's next collect command (the ``"threads"`` scheme)
and are loaded before that rollout, never during one.
"""

from __future__ import annotations

import copy
import queue
import threading
import warnings

import torch

from reap.collectors.multi_worker import MultiWorkerCollector, build_worker
from reap.collectors.worker import CollectorWorker, format_worker_error, worker_seed
from reap.errors import WorkerError
from reap.weight_update import resolve_weight_sync_scheme
from reap_threads.weight_sync import ThreadWeightSyncScheme


class ThreadWorkerError(WorkerError):
    """A worker thread raised or stopped delivering: the message names it and holds its traceback."""

    def __init__(self, message: str, *, worker_idx: int, remote_traceback: str | None = None, **details):
        if remote_traceback is not None and remote_traceback not in message:
            message = f"{message}\n\nworker traceback:\n{remote_traceback}"
        super().__init__(message, worker_idx=worker_idx, remote_traceback=remote_traceback, **details)


def _serve(worker: CollectorWorker, commands: queue.Queue, answers: queue.Queue, replies: queue.Queue,
           timeout: float) -> None:
    """A worker thread: run its commands in order. A batch goes on ``answers`` (shared by the
    workers), a control call's result on ``replies`` (the worker's own); an exception goes where
    the driver waits for this worker, and ends the thread."""
    idx = worker.worker_idx
    command = None
    try:
        while True:
            command, *args = commands.get()
            if command == "close":
                return
            if command == "collect":
                weights, version, prefetch = args
                answers.put((idx, worker, worker.serve_collect(weights, version, prefetch=prefetch, timeout=timeout)))
            else:
                replies.put(("ok", getattr(worker, command)(*args)))
    except BaseException as exc:
        error = ("error", *worker.format_error(exc, "thread worker"))
        if command == "collect":
            answers.put((idx, worker, error))
        else:
            replies.put(error)
    finally:
        try:
            worker.close()
        except Exception as exc:
            warnings.warn(format_worker_error(exc, idx, "thread worker (closing)")[0], RuntimeWarning, stacklevel=1)


class _ThreadCollector(MultiWorkerCollector):
    worker_label = "thread worker"
    error_class = ThreadWorkerError
    _sync_name = "ThreadSyncCollector"

    def _transport_options(self, options, owner):
        options.pop("mp_start_method", None)  # reap-collectors-mp's, taken so a collector can switch backends
        return options

    def _scheme(self, weight_sync_schemes, policy_devices, owner):
        return resolve_weight_sync_scheme(weight_sync_schemes, owner, default=ThreadWeightSyncScheme,
                                          accepts=(ThreadWeightSyncScheme,))

    def _start_transport(self) -> None:
        n = self.num_workers
        self._answers: queue.Queue = queue.Queue()
        self._workers: list[CollectorWorker | None] = [None] * n
        self._commands: list[queue.Queue] = [queue.Queue() for _ in range(n)]
        self._replies: list[queue.Queue] = [queue.Queue() for _ in range(n)]
        self._threads: list[threading.Thread | None] = [None] * n

    # ---- the transport ---------------------------------------------------------------------
    def _launch_worker(self, idx: int) -> None:
        spec = self._worker_spec(idx)
        kwargs = dict(spec.pop("kwargs"))
        if isinstance(kwargs["policy"], torch.nn.Module):  # each thread runs its own copy
            kwargs["policy"] = copy.deepcopy(kwargs["policy"])
        try:
            worker = build_worker(kwargs=kwargs, **spec)
        except Exception as exc:
            text, tb = format_worker_error(exc, idx, "thread worker")
            raise ThreadWorkerError(f"{type(self).__name__}: {text} while starting", worker_idx=idx,
                                    remote_traceback=tb) from exc
        self._workers[idx] = worker
        self._commands[idx], self._replies[idx] = queue.Queue(), queue.Queue()  # a replaced thread keeps its own
        # twice the driver's deadline (as reap-collectors-rpc's workers): the driver, whose clock
        # starts later, names a hung rollout first ("delivered no batch ... (worker_timeout=...)")
        wait = None if self.worker_timeout is None else 2 * self.worker_timeout
        thread = threading.Thread(target=_serve, name=f"reap-threads-worker-{idx}", daemon=True,
                                  args=(worker, self._commands[idx], self._answers, self._replies[idx], wait))
        self._threads[idx] = thread
        thread.start()

    def _await_worker(self, idx: int) -> dict:
        return self._workers[idx].ready_info()  # built in _launch_worker

    def _send_collect(self, idx: int, weights, version: int, prefetch: bool) -> None:
        self._commands[idx].put(("collect", weights, version, prefetch))

    def _receive(self, timeout: float):
        try:
            idx, worker, value = self._answers.get(timeout=timeout)
        except queue.Empty:
            return None
        if worker is not self._workers[idx]:  # from a worker since replaced
            return None
        if type(value) is tuple:  # ("error", text, traceback)
            raise self._raised(idx, value)
        return idx, value

    def _raised(self, idx: int, error: tuple) -> ThreadWorkerError:
        return ThreadWorkerError(f"{type(self).__name__}: {error[1]}", worker_idx=idx, remote_traceback=error[2])

    def _call(self, idx: int, method: str, args: tuple):
        self._commands[idx].put((method, *args))
        try:
            value = self._replies[idx].get(timeout=self.worker_timeout)
        except queue.Empty:
            raise self._error(idx, f"did not answer {method}() within {self.worker_timeout:g} s "
                                   "(worker_timeout)") from None
        if value[0] == "ok":
            return value[1]
        raise self._raised(idx, value)

    def _kill_worker(self, idx: int) -> None:
        # a thread cannot be killed: it is told to close, and left to end (a daemon) if stuck
        self._commands[idx].put(("close",))
        self._workers[idx] = None

    def _close_workers(self, timeout: float) -> None:
        for commands in self._commands:
            while True:  # drop queued work: the worker ends after its current command
                try:
                    commands.get_nowait()
                except queue.Empty:
                    break
            commands.put(("close",))
        stuck = []
        for thread in self._threads:
            if thread is not None:
                thread.join(timeout)
                if thread.is_alive():
                    stuck.append(thread.name)
        if stuck:
            warnings.warn(f"{type(self).__name__}.shutdown(): {stuck} did not end within {timeout:g} s "
                          "(stuck in an env step?); they are daemon threads and end with the process",
                          RuntimeWarning, stacklevel=3)

    @property
    def worker_threads(self) -> list[threading.Thread]:
        """The worker threads (alive until ``shutdown()``)."""
        return [t for t in self._threads if t is not None]


class ThreadSyncCollector(_ThreadCollector):
    """Collect with ``num_workers`` threads; every batch holds one rollout of each worker.

    The thread-pool counterpart of ``MultiSyncCollector``, same arguments and layout (see the
    module docstring). Weights pushed between two batches reach every worker before its next
    rollout, so a batch has one policy version.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import GymEnv
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> make_env = lambda: GymEnv("Pendulum-v1", num_envs=2)
        >>> with ThreadSyncCollector([make_env, make_env], policy, frames_per_batch=32,
        ...                          total_frames=64, worker_tags=True) as collector:
        ...     for batch in collector:
        ...         print(batch.batch_size, batch["collector", "policy_version"].max().item())
        ...         collector.update_policy_weights_()
        torch.Size([2, 2, 8]) 0
        torch.Size([2, 2, 8]) 1
    """

    _sync = True


class ThreadAsyncCollector(_ThreadCollector):
    """Collect with ``num_workers`` threads; yield each worker's batch as soon as it is done.

    The thread-pool counterpart of ``MultiAsyncCollector``: each worker starts its next rollout
    as soon as it hands a batch over, so it collects while the trainer reads;
    ``update_at_each_batch=True`` pushes the policy's weights to the worker that delivered each batch.

    Examples:
        >>> import torch
        >>> from reap import GymEnv
        >>> policy = lambda observation: torch.tensor([1, 0])  # CartPole's one-hot action: push left
        >>> with ThreadAsyncCollector([lambda: GymEnv("CartPole-v1")] * 2, policy, frames_per_batch=50,
        ...                           total_frames=200) as collector:
        ...     print([batch.batch_size for batch in collector])  # one worker's batch, in the order they finish
        [torch.Size([50]), torch.Size([50]), torch.Size([50]), torch.Size([50])]
    """

    _sync = False


__all__ = ["ThreadAsyncCollector", "ThreadSyncCollector", "ThreadWorkerError", "worker_seed"]
