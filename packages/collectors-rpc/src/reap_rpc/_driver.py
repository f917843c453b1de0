"""What RPCCollector and DistributedCollector share: arguments, the world of worker processes, faults.

The driver is rank 0 of a world of ``num_collectors + 1`` ranks; worker ``i`` (0-based
everywhere: ``worker_ids``, ``("collector", "worker_id")``, errors) is rank ``i + 1``. Iteration,
weights, deadlines and restarts are reap-core's :class:`~reap.collectors.driver.CollectorDriver`;
a subclass adds how a collect request (with the weights it carries) reaches a worker and how its
batch comes back, as an event on one queue the driver waits on. A torch.distributed world cannot
take a new rank, so a restart (``on_worker_failure="restart"``, ``launcher="mp"``) starts every
worker again, and the batches lost with them are asked again.

The collector's threads (the death watcher, DistributedCollector's receivers) and RPC callbacks
hold a :class:`_Watch` and the event queue, never the collector: one that nobody refers to is
collected, and shut down (as it is at interpreter exit).
"""

from __future__ import annotations

import contextlib
import gc
import pickle
import queue
import threading
import time
import uuid
from collections.abc import Callable

import torch
import torch.distributed as dist
from tensordict.nn import InteractionType

from reap.collectors.arguments import (
    MAX_RESTARTS,
    START_TIMEOUT,
    WORKER_TIMEOUT,
    checked_failure_options,
    checked_seconds,
)
from reap.collectors.collector import Collector
from reap.collectors.driver import CollectorDriver, driver_options
from reap.collectors.lifetime import track
from reap.collectors.remote import (
    DEVICES,
    check_remote_arguments,
    remote_collector_kwargs,
    split_per_collector,
)
from reap.collectors.spawn import check_main_guard, start_report
from reap.collectors.worker import per_collector, resolve_collector_class, worker_seed
from reap.errors import WorkerError
from reap.weight_update import WeightUpdaterBase, resolve_weight_sync_scheme
from reap_rpc._launch import ProcessLauncher, describe_exit
from reap_rpc._rendezvous import LOOPBACK, connect_store, open_store

LAUNCHERS = ("mp", "torchrun", "submitit")
DEAD_MARK = b"__reap_worker_dead__"
DEAD = object()  # what an awaited key holds once its worker died


class RemoteCollectorError(WorkerError):
    """A remote worker raised, died or stopped delivering.

    ``worker_idx`` is its 0-based index, ``rank`` its rank (``worker_idx + 1``), ``exitcode``
    its process's exit code when it died, ``remote_traceback`` its traceback when it raised.
    """

    @property
    def rank(self) -> int:
        return self.worker_idx + 1


def _cpu_only(visible_devices, n: int, owner: str) -> list:
    """``visible_devices`` (TorchRL's: the device each collector hands its batches over on),
    one entry per collector. reap's workers step envs and policies on the CPU and send CPU
    tensors, so an entry may only be ``"cpu"`` (or a list of them) or None."""
    entries = per_collector(visible_devices, n, "visible_devices", owner)
    for entry in entries:
        for device in entry if isinstance(entry, (list, tuple)) else [entry]:
            if device is None:
                continue
            try:
                # a bare int is an accelerator index; torch.device(int) raises on builds without one
                kind = "accelerator" if isinstance(device, int) and not isinstance(device, bool) \
                    else torch.device(device).type
            except (TypeError, RuntimeError):
                raise ValueError(f"{owner}: visible_devices must be devices (one per collector), got {device!r}") from None
            if kind != "cpu":
                raise ValueError(
                    f"{owner}: visible_devices names {device!r}, but reap's remote workers step envs and policies "
                    "on the CPU and send their batches as CPU tensors; pass visible_devices=None (or 'cpu') and "
                    "move each batch to the GPU on the trainer (batch.to('cuda'))")
    return entries


class _Watch:
    """The store keys the driver waits on and the workers' deaths (each wakes the wait on its
    worker's key and is an event on the driver's queue), with no reference to the collector."""

    def __init__(self, store, host: str, port: int, key: str, events: queue.Queue, timeout: float):
        self.store, self.events = store, events
        self._connect = lambda: dist.PrefixStore(f"reap/{key}", connect_store(host, port, timeout))
        self._clients: dict[int, object] = {}  # thread id -> its own store client
        self.awaiting: dict[int, str] = {}  # worker -> the store key being waited for
        self.dead: dict[int, int | None] = {}  # worker -> exit code, once its process ended

    def wait(self, idx: int, key: str, timeout: float):
        """``key``'s value once worker ``idx`` sets it, :data:`DEAD` if it dies first, None
        after ``timeout`` s. A death sets the key being awaited, so this never polls."""
        self.awaiting[idx] = key
        try:
            if idx in self.dead:
                return DEAD
            store = self._client()
            try:
                store.wait([key], _td(timeout))
            except dist.DistStoreError:
                if not store.check([key]):
                    return DEAD if idx in self.dead else None
            value = store.get(key)
            return DEAD if value == DEAD_MARK else value
        finally:
            self.awaiting.pop(idx, None)

    def _client(self):
        """This thread's own client of the store. A wait holds its client's connection until it
        ends: were it the shared one, the death watcher's wake-up (and every command) would
        queue behind it until its timeout."""
        tid = threading.get_ident()
        if tid not in self._clients:
            self._clients[tid] = self._connect()
        return self._clients[tid]

    def on_death(self, idx: int, exitcode) -> None:
        self.dead[idx] = exitcode
        self.events.put((idx, "died", exitcode))
        self.release(idx)

    def release(self, idx: int) -> None:
        """Wake whoever awaits a key of worker ``idx`` (it is dead, or we are shutting down)."""
        key = self.awaiting.get(idx)
        if key is not None and self.store is not None:
            with contextlib.suppress(Exception):
                self.store.set(key, DEAD_MARK)

    def close(self) -> None:
        for idx in list(self.awaiting):
            self.release(idx)
        self._clients.clear()
        self.store = None


class RemoteCollector(CollectorDriver):
    """Base of :class:`~reap_rpc.RPCCollector` and :class:`~reap_rpc.DistributedCollector`:
    arguments, the world of worker processes and its faults (requests, weights, iteration,
    deadlines and restarts are :class:`~reap.collectors.driver.CollectorDriver`'s)."""

    error_class = RemoteCollectorError
    _state_as_list = True
    _transport = ""  # "rpc" or "gloo"
    _cat_results = "stack"  # how a sync batch combines the workers' parts
    _scheme_class: type  # the weight-sync scheme it takes

    def __init__(
        self,
        create_env_fn,
        policy=None,
        *,
        policy_factory: Callable | list | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        device=None,
        storing_device=None,
        env_device=None,
        policy_device=None,
        max_frames_per_traj: int | None = -1,
        init_random_frames: int | None = -1,
        reset_at_each_iter: bool = False,
        postproc: Callable | None = None,
        split_trajs: bool = False,
        exploration_type=InteractionType.RANDOM,
        collector_class=Collector,
        collector_kwargs: dict | list | None = None,
        num_workers_per_collector: int = 1,
        sync: bool = False,
        slurm_kwargs: dict | None = None,
        update_after_each_batch: bool = False,
        max_weight_update_interval: int = -1,
        launcher: str = "mp",
        tcp_port: int | str | None = None,
        backend: str = "gloo",
        visible_devices=None,
        tensorpipe_options: dict | None = None,
        weight_updater=None,
        weight_sync_schemes: dict | None = None,
        num_collectors: int | None = None,
        num_workers: int | None = None,
        master_addr: str | None = None,
        worker_timeout: float = WORKER_TIMEOUT,
        start_timeout: float = START_TIMEOUT,
        max_restarts: int = MAX_RESTARTS,
        on_worker_failure: str = "raise",
        **collector_options,
    ):
        owner = type(self).__name__
        self._owner = owner
        check_main_guard(owner, "forkserver")
        check_remote_arguments(frames_per_batch=frames_per_batch, total_frames=total_frames, sync=sync,
                               num_workers_per_collector=num_workers_per_collector,
                               max_weight_update_interval=max_weight_update_interval, policy=policy,
                               policy_factory=policy_factory, postproc=postproc, owner=owner)
        if launcher not in LAUNCHERS:
            raise ValueError(f"{owner}: launcher must be one of {LAUNCHERS}, got {launcher!r}")
        if backend not in ("gloo", "nccl"):
            raise ValueError(f"{owner}: backend must be 'gloo' or 'nccl', got {backend!r}")
        if backend == "nccl":
            raise ValueError(f"{owner}: backend='nccl' needs CUDA policies on every rank; reap's collectors "
                             "step envs and policies on the CPU: use backend='gloo'")
        if tcp_port is not None:
            try:
                tcp_port = int(tcp_port)
            except (TypeError, ValueError):
                raise ValueError(f"{owner}: tcp_port must be a port number (or None for a free one), got {tcp_port!r}") from None
            if not 0 <= tcp_port < 65536:
                raise ValueError(f"{owner}: tcp_port must be in [0, 65535], got {tcp_port}")
        if tensorpipe_options is not None and not isinstance(tensorpipe_options, dict):
            raise TypeError(f"{owner}: tensorpipe_options must be a dict of TensorPipeRpcBackendOptions "
                            f"arguments, got {tensorpipe_options!r}")
        scheme = resolve_weight_sync_scheme(weight_sync_schemes, owner, default=self._scheme_class,
                                            accepts=(self._scheme_class,))
        worker_timeout = checked_seconds(worker_timeout, "worker_timeout", owner)
        start_timeout = checked_seconds(start_timeout, "start_timeout", owner)
        checked_failure_options(on_worker_failure, max_restarts, owner)
        if on_worker_failure == "restart" and launcher != "mp":
            raise ValueError(f"{owner}: on_worker_failure='restart' starts the workers again, which only "
                             f"launcher='mp' can do (launcher={launcher!r} started them elsewhere)")
        self.collector_class = resolve_collector_class(collector_class, owner)

        n, lists = split_per_collector(
            {"create_env_fn": create_env_fn, "policy_factory": policy_factory, "collector_kwargs": collector_kwargs,
             "device": device, "storing_device": storing_device, "env_device": env_device,
             "policy_device": policy_device},
            num_collectors=num_collectors, num_workers=num_workers, frames_per_batch=frames_per_batch, sync=sync,
            owner=owner)
        per_worker = frames_per_batch // n if sync else frames_per_batch
        self._init_driver(n, sync=sync, frames_per_batch=frames_per_batch, total_frames=total_frames, scheme=scheme,
                          worker_frames=[per_worker] * n, worker_timeout=worker_timeout, start_timeout=start_timeout,
                          max_restarts=max_restarts, on_worker_failure=on_worker_failure, postproc=postproc,
                          split_trajs=split_trajs, cat_results=self._cat_results,
                          update_after_each_batch=update_after_each_batch,
                          max_weight_update_interval=max_weight_update_interval,
                          **driver_options(collector_options))
        self.policy = policy
        self.launcher = launcher
        self.slurm_kwargs = slurm_kwargs
        self.visible_devices = _cpu_only(visible_devices, n, owner)
        self.tensorpipe_options = tensorpipe_options
        self.master_addr = master_addr
        self._local = launcher == "mp" and master_addr is None
        self._host = master_addr or LOOPBACK
        self.num_workers_per_collector = num_workers_per_collector
        self._events: queue.Queue = queue.Queue()
        self._key = uuid.uuid4().hex[:12]
        self._launcher = None
        self._store = None
        self._watch: _Watch | None = None
        self._infos: list[dict] = []
        self.weight_updater = self._resolve_updater(weight_updater, owner)

        common = {"frames_per_batch": per_worker,
                  "max_frames_per_traj": None if max_frames_per_traj in (None, -1) else max_frames_per_traj,
                  "init_random_frames": None if init_random_frames in (None, -1) else init_random_frames,
                  "reset_at_each_iter": reset_at_each_iter, "exploration_type": exploration_type,
                  **collector_options}
        self._specs = []
        for i in range(n):
            kwargs = remote_collector_kwargs(
                common, create_env_fn=lists["create_env_fn"][i], collector_class=self.collector_class,
                num_envs=num_workers_per_collector, devices={name: lists[name][i] for name in DEVICES},
                collector_kwargs=lists["collector_kwargs"][i], policy_factory=lists["policy_factory"][i],
                worker_tags=self.worker_tags, owner=owner)
            self._specs.append({"idx": i, "kwargs": kwargs, "collector_class": self.collector_class,
                                "policy": policy if lists["policy_factory"][i] is None else None})
        self._tcp_port = tcp_port
        self._start_workers()

    def _start_workers(self, ids=None) -> None:
        """Start the world: every worker at once (they meet in one rendezvous)."""
        if self.__dict__.get("_closed", True):
            self._closed = False
            track(self)  # shut down at interpreter exit: its workers are not daemons
        try:
            self._start(self._tcp_port)
            for i, info in enumerate(self._infos):
                self._worker_ready(i, info)
        except BaseException:
            self.shutdown(timeout=2.0)  # the others may be stuck in a rendezvous: no long grace
            raise

    # ---- construction ------------------------------------------------------------------------------
    def _resolve_updater(self, updater, owner):
        from reap_rpc.weight_sync import RemoteWeightUpdater

        if updater is None:
            updater = RemoteWeightUpdater()
        elif isinstance(updater, type):
            updater = updater()
        if not isinstance(updater, RemoteWeightUpdater):
            name = type(updater).__name__ if isinstance(updater, WeightUpdaterBase) else repr(updater)
            raise TypeError(f"{owner}: weight_updater must be a {RemoteWeightUpdater.__name__} "
                            f"(RPCWeightUpdater / DistributedWeightUpdater), got {name}")
        updater.register_collector(self)
        return updater

    def _start(self, tcp_port) -> None:
        if self.launcher == "torchrun":
            from reap_rpc.torchrun import start_torchrun

            start_torchrun(self, tcp_port)
            return
        if self.launcher == "submitit":
            from reap_rpc.submitit import start_submitit

            start_submitit(self, tcp_port)
            return
        self._open_store(self._host, tcp_port or 0)
        self._launcher = ProcessLauncher(self._watch.on_death)
        self._launcher.start([self._worker_spec(i) for i in range(self.num_collectors)])
        self._connect()

    def _open_store(self, host: str, port: int) -> None:
        store, self.tcp_port = open_store(host, port, self.start_timeout)
        self._server = store
        self._store = dist.PrefixStore(f"reap/{self._key}", store)
        self._watch = _Watch(self._store, host, self.tcp_port, self._key, self._events, self.start_timeout)

    def _worker_spec(self, i: int) -> dict:
        env = {"TP_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo"} if self._local else {}
        return {**self._specs[i], "traj_id_offset": self._traj_id_offset(),
                "plugin_options": self._worker_plugin_options(i), "key": self._key, "host": self._host, "port": self.tcp_port,
                "world_size": self.num_collectors + 1, "transport": self._transport, "env": env,
                "timeout": self.start_timeout, "worker_timeout": self.worker_timeout, "local": self._local,
                "bind_host": LOOPBACK if self._local else None, "tensorpipe_options": self.tensorpipe_options}

    def _connect(self) -> None:
        """Wait until every worker built its collector, then start the transport."""
        deadline = time.monotonic() + self.start_timeout
        infos = []
        for i in range(self.num_collectors):
            value = self._await(i, f"ready/{i}", max(0.0, deadline - time.monotonic()), "was not ready")
            if value is DEAD:
                raise self._worker_error(i, "failed to start")
            infos.append(pickle.loads(value))
        self._infos = infos
        self._start_transport()

    def _await(self, idx: int, key: str, timeout: float, what: str):
        """Block until worker ``idx`` sets ``key`` (its value), or it dies (:data:`DEAD`), or
        ``timeout`` s pass (an error naming ``what``)."""
        value = self._watch.wait(idx, key, timeout)
        if value is None:
            raise RemoteCollectorError(f"{self._owner}: worker {idx} (rank {idx + 1}) {what} within {timeout:g} s",
                                       worker_idx=idx)
        return value

    def _start_transport(self) -> None:
        raise NotImplementedError

    # ---- properties ---------------------------------------------------------------------------------
    @property
    def num_collectors(self) -> int:
        return len(self._specs)

    @property
    def worker_pids(self) -> list[int]:
        """The workers' process ids, by worker index."""
        return [info["pid"] for info in self._infos]

    def _worker_name(self, idx: int) -> str:
        return f"worker {idx} (rank {idx + 1})"

    # ---- faults -------------------------------------------------------------------------------------
    def _worker_error(self, idx: int, what: str, *, exitcode=None, detail: str | None = None) -> RemoteCollectorError:
        """The error for worker ``idx``: its own report (text, traceback) when it wrote one."""
        text, tb = None, None
        with contextlib.suppress(Exception):
            if self._store is not None and self._store.check([f"err/{idx}"]):
                text, tb = pickle.loads(self._store.get(f"err/{idx}"))
        if exitcode is None and self._launcher is not None:
            # a transport error may reach us before the death does (the forkserver reports it)
            exitcode = self._launcher.exitcode(idx, wait=2.0 if text is None else 0.0)
        report = None
        if text is None and exitcode is not None and self._launcher is not None:
            report = start_report(self._launcher.procs[idx].pid)  # it died importing the main script
        if text is None and exitcode is not None and what == "failed":
            what, detail = "died", None  # its channel broke because its process ended
        parts = [f"{self._owner}: worker {idx} (rank {idx + 1}) {what}"]
        if text is not None:
            parts.append(f": {text}")
        elif detail:
            parts.append(f": {detail}")
        if exitcode is not None:
            parts.append(f" (its process ended: {describe_exit(exitcode)})")
        message = "".join(parts)
        if tb:
            message += f"\n\nworker {idx} traceback:\n{tb}"
        if report:
            message += f"\n\n{report}"
        return RemoteCollectorError(message, worker_idx=idx, exitcode=exitcode, remote_traceback=tb)

    def _restart(self, idx: int) -> None:
        """A torch.distributed world cannot take a new rank: stop every worker, start the world
        again (the latest weights and seeds go to each), and ask again for what was in flight."""
        lost = sorted(self._pending())
        self.worker_restarts[idx] += 1
        self.restarts += 1
        self._inflight.clear()
        self._ready.clear()
        self._close_workers(2.0)
        self._events = queue.Queue()
        self._key = uuid.uuid4().hex[:12]
        for i in range(self.num_workers):
            self._deadlines.forget(i)
            self._ahead[i] = self._skip[i] = False
            self._worker_weights.replaced(i)
        self._start(0)
        for i, info in enumerate(self._infos):
            self._worker_ready(i, info)
        if self._seed is not None:
            seed, static = self._seed
            for i in range(self.num_workers):
                self._call(i, "set_seed", (seed if static else worker_seed(seed, i, self.worker_restarts[i]), static))
        for i in lost:
            self._submit(i)

    # ---- requests -----------------------------------------------------------------------------------
    def _send_collect(self, idx: int, weights, version: int, prefetch: bool) -> None:
        self._send_request(idx, weights, version, prefetch)

    def _await_requests(self, timeout: float) -> None:
        """Wait at most ``timeout`` s for the collect requests in flight to be answered (or their
        workers to die), dropping their batches. Each answer is an event on the driver's queue:
        nothing polls."""
        deadline = time.monotonic() + timeout
        while self._inflight:
            try:
                idx, _, _ = self._events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            self._inflight.discard(idx)

    def _send_request(self, idx: int, payload, version: int, prefetch: bool) -> None:
        """Send worker ``idx`` its collect request (the transport's part)."""
        raise NotImplementedError

    def _receive(self, idx: int, kind: str, payload):
        """A transport event -> the batch, or raise the worker's error."""
        raise NotImplementedError

    def _receive(self, timeout: float):
        try:
            idx, kind, payload = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if kind == "died":
            raise self._worker_error(idx, "died", exitcode=payload)
        return idx, self._receive_event(idx, kind, payload)

    def _receive_event(self, idx: int, kind: str, payload):
        """A transport event -> the batch, or raise the worker's error."""
        raise NotImplementedError

    def _kill_worker(self, idx: int) -> None:
        """Not used: :meth:`_restart` starts the whole world again."""

    # ---- shutdown -----------------------------------------------------------------------------------
    def _close_workers(self, timeout: float) -> None:
        """Stop every worker, the transport (RPC agent, process group) and the store. Calls in
        flight may end and the workers may leave within ``timeout`` s in all; those still running
        then are terminated, and killed a few seconds later."""
        deadline = time.monotonic() + timeout
        try:
            self._stop_transport(timeout)
            if self._watch is not None:
                self._watch.close()
        finally:
            left = max(0.0, deadline - time.monotonic())  # one budget for the calls and the exits
            if self._launcher is not None:
                self._launcher.stop(left)
            if self.__dict__.get("_jobs"):
                from reap_rpc.submitit import stop_jobs

                stop_jobs(self._jobs, left)
            self._close_transport()
            self._store = self._server = None
            gc.collect()

    def _stop_transport(self, grace: float) -> None:
        """Ask the workers to leave."""

    def _close_transport(self) -> None:
        """Release the driver's side of the transport once the workers are gone."""

    def __del__(self):
        # Collected on one of the collector's own threads (a receiver, an RPC callback), which
        # shutdown() joins or whose agent it stops: shut down from a thread of its own instead.
        if self.__dict__.get("_closed") is False and threading.current_thread() is not threading.main_thread():
            threading.Thread(target=self.shutdown, name="reap-collector-shutdown").start()
            return
        super().__del__()

    def __repr__(self) -> str:
        d = self.__dict__
        return (f"{type(self).__name__}(num_collectors={len(d.get('_specs', []))}, sync={d.get('_sync')}, "
                f"frames_per_batch={d.get('frames_per_batch')}, total_frames={d.get('total_frames')}, "
                f"frames={d.get('_frames', 0)})")


def _td(seconds: float):
    import datetime

    return datetime.timedelta(seconds=seconds)


__all__ = ["RemoteCollector", "RemoteCollectorError", "worker_seed"]
