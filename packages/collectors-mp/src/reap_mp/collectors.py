"""``MultiSyncCollector`` and ``MultiAsyncCollector``: collection in worker processes.

Each worker runs reap's single-process ``Collector`` (the same allocation-free stepping loop)
and writes every batch into a shared-memory TensorDict it allocated once at start-up (one slot;
two for the async collector, which double-buffers). The parent receives a small ``("batch",
slot, policy_version)`` message and reads the slot in place: no batch is ever pickled. Weights
go through per-worker shared memory (``"shared_mem"``) or the pipe (``"pipe"``), out of band.

The arguments, layout, iteration, weights, deadlines and restarts are reap-core's
:class:`~reap.collectors.multi_worker.MultiWorkerCollector` and its driver, shared with every
backend; this module is the transport: start a process, send it a command, read its reply,
kill it. A collect request is one ``("collect", slot)`` message; a prefetching one (async) queues
a second into the other slot, which the worker fills right after the first (the double buffer).

Layout (TorchRL's): a worker with an env of batch ``[*env_batch]`` yields ``[*env_batch, T]``.
``MultiSyncCollector`` with ``cat_results="stack"`` (the default) stacks the workers' batches:
``[n_workers, *env_batch, T]``; ``cat_results="cat"`` (or ``0``) concatenates along the first
dim (``[n_workers * n_envs, T]`` for batched envs, ``[n_workers * T]`` for single envs);
``cat_results=-1`` concatenates along time (``[*env_batch, n_workers * T]``).
``MultiAsyncCollector`` yields one worker's batch at a time, ``[*env_batch, T]``.

Batches have TorchRL's keys. With ``worker_tags=True`` they also carry ``("collector",
"worker_id")`` and ``("collector", "policy_version")`` (batch-shaped int64): which worker
produced each frame and with which weights (0 for the weights the workers started with, then
the number of ``update_policy_weights_`` calls that reached it).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from reap.collectors.arguments import check_int
from reap.collectors.lifetime import ForkserverUse
from reap.collectors.multi_worker import MultiWorkerCollector
from reap.collectors.worker import worker_seed
from reap.errors import WorkerError
from reap.weight_update import resolve_weight_sync_scheme
from reap_mp._procs import Payload, WorkerHandle, get_context, wait_any
from reap_mp._worker import collector_worker
from reap_mp.weight_sync import PipeWeightSyncScheme, SharedMemWeightSyncScheme, adapt_updater

#: Control calls after which the worker's prefetched rollout (run before them: the pipe is in
#: order) predates what changed, and is dropped.
_DROPS_AHEAD = ("set_seed", "reset", "load_state_dict")


class _MultiCollector(MultiWorkerCollector):
    _slots_per_worker = 1
    _forkserver = None  # a ForkserverUse while the workers start from the forkserver

    def _transport_options(self, options, owner):
        self._start_method = options.pop("mp_start_method", None)
        self._num_threads = options.pop("num_sub_threads", 1)
        check_int(self._num_threads, "num_sub_threads", owner, allow_none=False)
        self._ctx = get_context(self._start_method, owner)
        return options

    def _scheme(self, weight_sync_schemes, policy_devices, owner):
        remote = any(d is not None and d.type != "cpu" for d in policy_devices)
        return resolve_weight_sync_scheme(weight_sync_schemes, owner,
                                          default=PipeWeightSyncScheme if remote else SharedMemWeightSyncScheme,
                                          accepts=(SharedMemWeightSyncScheme, PipeWeightSyncScheme))

    def _updater(self, weight_updater, owner):
        return adapt_updater(weight_updater, owner)

    def _start_transport(self) -> None:
        n = self.num_workers
        self._handles: list[WorkerHandle | None] = [None] * n
        self._slots: list[list] = [[] for _ in range(n)]
        self._extras: list[dict] = [{} for _ in range(n)]  # per slot, a batch's non-tensor entries
        self._answer: list[int | None] = [None] * n  # the slot the request in flight is answered with
        self._ahead_slot: list[int | None] = [None] * n  # the slot of the rollout queued ahead
        self._arrived: list[set[int]] = [set() for _ in range(n)]  # slots filled before their request
        self._done: deque = deque()  # (worker, slot) of answered requests, in the order they came
        self.weight_sync_scheme.bind(n, self._send, context=self._ctx)
        if self._ctx.get_start_method() == "forkserver":  # stopped with its last user
            self._forkserver = ForkserverUse()

    # ---- the transport: processes, pipes, shared-memory slots -------------------------------------
    def _launch_worker(self, idx: int) -> None:
        spec = {**self._worker_spec(idx), "slots": self._slots_per_worker, "num_threads": self._num_threads}
        interruptor = spec.pop("interruptor")  # shared memory: a process argument, not pickled with the rest
        self._answer[idx] = self._ahead_slot[idx] = None
        self._arrived[idx] = set()
        self._done = deque(item for item in self._done if item[0] != idx)
        self._handles[idx] = WorkerHandle(self._ctx, idx, collector_worker,
                                          (Payload(spec), self.weight_sync_scheme.worker_state(idx), interruptor),
                                          label="collector worker", timeout=self.worker_timeout)

    def _await_worker(self, idx: int) -> dict:
        handle = self._handles[idx]
        try:
            ready = handle.wait(handle.started + self.start_timeout - time.monotonic())
            message = handle.recv(timeout=0) if ready else None
        except WorkerError as exc:
            first, rest = f"{exc}\n".split("\n", 1)  # what follows the first line: the worker's explanation
            raise WorkerError(f"{first} while starting\n{rest}".rstrip("\n"), worker_idx=idx, exitcode=exc.exitcode,
                              remote_traceback=exc.remote_traceback) from None
        if message is None:
            raise WorkerError(
                f"collector worker {idx} was not ready {time.monotonic() - handle.started:.1f} s after it was "
                f"started (start_timeout={self.start_timeout:g} s); it may be stuck building its env or policy. "
                "If the machine is just slow, pass a larger start_timeout", worker_idx=idx)
        _, self._slots[idx], info = message
        return info

    def _send(self, idx: int, message: tuple) -> None:
        self._handles[idx].send(message)

    def _send_collect(self, idx: int, weights, version: int, prefetch: bool) -> None:
        # weights travel out of band: the worker loads them when its next rollout starts
        handle = self._handles[idx]
        slot, self._ahead_slot[idx] = self._ahead_slot[idx], None
        if slot is None:  # no rollout queued ahead: this request starts one
            slot = 0
            handle.send(("collect", slot))
        self._answer[idx] = slot
        if prefetch:  # the next rollout, into the other slot, right after this one
            self._ahead_slot[idx] = 1 - slot
            handle.send(("collect", 1 - slot))
        if slot in self._arrived[idx]:  # filled before its request came
            self._arrived[idx].discard(slot)
            self._answer[idx] = None
            self._done.append((idx, slot))

    def _on_batch(self, idx: int, slot: int, extras: dict | None = None) -> None:
        """A ``("batch", slot, version, extras)`` reply: the answer to worker ``idx``'s request,
        or a prefetched rollout's, kept until its request comes."""
        self._extras[idx][slot] = extras
        if self._answer[idx] == slot:
            self._answer[idx] = None
            self._done.append((idx, slot))
        else:
            self._arrived[idx].add(slot)

    def _read(self, timeout: float) -> None:
        """Read what the workers with a request or a rollout ahead outstanding have sent within
        ``timeout`` s (their deaths too: a WorkerError)."""
        watched = [h for i, h in enumerate(self._handles)
                   if h is not None and (self._answer[i] is not None or self._ahead_slot[i] is not None)]
        for handle in wait_any(watched, timeout):
            reply = handle.recv(timeout=self.worker_timeout)
            if reply[0] == "batch":
                self._on_batch(handle.idx, reply[1], reply[3])

    def _receive(self, timeout: float):
        self._read(0.0)  # first every reply already in: answers go out in the order they came
        if not self._done and timeout > 0:
            self._read(timeout)
        if not self._done:
            return None
        idx, slot = self._done.popleft()
        batch, extras = self._slots[idx][slot], self._extras[idx].get(slot)
        if batch is None:  # variable shapes: the whole batch came by pipe
            return idx, extras
        if extras:  # non-tensor entries came by pipe: beside the slot's tensors, read in place
            batch = batch.copy()
            for key, value in extras.items():
                batch.set(key, value)
        return idx, batch

    def _call(self, idx: int, method: str, args: tuple):
        handle = self._handles[idx]
        handle.send(("call", method, args))
        while True:
            reply = handle.recv()  # bounded by worker_timeout
            if reply[0] == "ok":
                break
            self._on_batch(idx, reply[1], reply[3])  # a prefetched rollout's, which ran before the call
        if method in _DROPS_AHEAD or (method == "settle" and args and args[0]):
            self._ahead_slot[idx] = None
            self._arrived[idx].clear()
        return reply[1]

    def _kill_worker(self, idx: int) -> None:
        self._handles[idx].close(grace=0.5)

    def _close_workers(self, timeout: float) -> None:
        try:
            for handle in self._handles:
                if handle is not None:
                    handle.close(grace=min(timeout, 2.0))
        finally:
            self._slots = [[] for _ in self._slots]
            self._done.clear()
            if self._forkserver is not None:
                self._forkserver.release()

    def _output(self, answer):
        batch = answer.clone()  # the slot is filled again while the trainer holds this batch
        return batch.numel(), batch

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live workers."""
        return [h.pid for h in self._handles if h is not None and not h.closed]


class MultiSyncCollector(_MultiCollector):
    """Collect with several worker processes; every batch holds one rollout of each worker.

    All workers run the same policy version for a given batch: weights pushed with
    ``update_policy_weights_`` between two batches reach every worker before its next rollout.
    Arguments follow TorchRL's ``MultiSyncCollector``; ``frames_per_batch`` is the total per
    batch (split evenly, rounded up) or a list with one entry per worker. reap adds
    ``mp_start_method`` (``"spawn"``) and, as every reap backend, ``worker_timeout`` (seconds a
    worker that owes a batch may go without delivering one, or without answering a request,
    before it is declared stuck; each worker has its own deadline; default 120),
    ``start_timeout`` (seconds a worker may take to start, default 120), ``on_worker_failure``
    (``"raise"``, or ``"restart"``: a new worker, which runs the latest weights and redoes the
    lost rollouts) and ``max_restarts`` (default 3 per worker). Pushed weights must match the
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
    _slots_per_worker = 1


class MultiAsyncCollector(_MultiCollector):
    """Collect with several worker processes; yield each worker's batch as soon as it is done.

    Each worker double-buffers: it owns two shared-memory slots and starts its next rollout
    while the trainer reads the last one. Batches are ``[*env_batch, T]``; with
    ``worker_tags=True`` they say who made them in ``("collector", "worker_id")`` and with which
    weights in ``("collector", "policy_version")``. ``update_at_each_batch=True`` pushes the policy's weights to the worker
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
        ...                              total_frames=200, worker_tags=True) as collector:
        ...         for batch in collector:
        ...             print(batch.batch_size, batch["collector", "worker_id"][0].item())
        torch.Size([50]) 0
        torch.Size([50]) 1
        torch.Size([50]) 0
        torch.Size([50]) 1
    """

    _sync = False
    _slots_per_worker = 2  # double buffering: the next rollout fills one slot while the trainer reads the other


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
