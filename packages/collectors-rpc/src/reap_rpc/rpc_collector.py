"""``RPCCollector``: remote reap collectors driven through ``torch.distributed.rpc``.

The driver (rank 0) calls each worker's collect function with ``rpc_async``; the batch comes
back as the RPC's result (TensorPipe moves the tensors; on one machine over TCP on 127.0.0.1,
where its shared-memory transport would poll a core away). New weights ride with the worker's next
call. One RPC agent per process: a second ``RPCCollector`` may be built once the first is shut
down, not while it runs.
"""

from __future__ import annotations

import gc
import time
import weakref

from torch.distributed import PrefixStore

from reap_rpc._driver import RemoteCollector, RemoteCollectorError
from reap_rpc._rendezvous import (
    DRIVER_NAME,
    connect_store,
    init_rpc_agent,
    rpc_agent_running,
    wait_keys,
)
from reap_rpc._worker import _rpc_call, _rpc_collect, worker_name
from reap_rpc.weight_sync import RPCWeightSyncScheme

_ACTIVE = None  # a weak reference to the RPCCollector whose agent runs in this process


class RPCCollector(RemoteCollector):
    """Collect with reap collectors in worker processes driven by ``torch.distributed.rpc``.

    Arguments follow TorchRL's ``RPCCollector``: ``create_env_fn`` (an env, a callable or one
    per collector), ``policy`` or ``policy_factory``, ``frames_per_batch``, ``total_frames``,
    the devices, ``max_frames_per_traj``, ``init_random_frames``, ``reset_at_each_iter``,
    ``postproc`` and ``split_trajs`` (applied here, on the driver), ``exploration_type``,
    ``collector_class`` (reap's ``Collector``, ``MultiSyncCollector``, ``MultiAsyncCollector``, a
    subclass, or ``"single"``/``"sync"``/``"async"``), ``collector_kwargs``,
    ``num_workers_per_collector``, ``sync`` (default False: each worker's batch as it arrives;
    True: the workers' batches concatenated along the first dim, TorchRL's layout),
    ``update_after_each_batch``, ``max_weight_update_interval`` (no worker collects more than
    ``k`` batches after its last update: it is sent the central policy when due),
    ``tensorpipe_options``, ``launcher`` (``"mp"``, reap's default: worker processes on this
    machine; ``"torchrun"``; ``"submitit"``), ``tcp_port`` (the store's port; none: a free one),
    ``slurm_kwargs``, ``visible_devices`` (``"cpu"`` or None, per collector: reap's workers hand
    their batches over as CPU tensors; a CUDA device is refused), and ``num_collectors`` (else
    inferred from the lists).

    reap adds, keyword-only: ``master_addr`` (the address every rank reaches the driver at;
    default 127.0.0.1, where everything binds), ``worker_timeout`` (seconds a worker may take
    per batch before it is reported hung, default 60) and ``start_timeout`` (seconds for the
    workers to start and every rendezvous, default 120).

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import GymEnv, RPCCollector
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> with RPCCollector([lambda: GymEnv("Pendulum-v1", num_envs=4)] * 2, policy,
        ...                   frames_per_batch=64, total_frames=128, sync=True) as collector:
        ...     for batch in collector:
        ...         print(batch.batch_size)  # 2 workers x 4 envs, 8 steps
        ...         collector.update_policy_weights_(policy)
        torch.Size([8, 8])
        torch.Size([8, 8])
    """

    _transport = "rpc"
    _cat_results = 0  # sync: the workers' batches concatenated (TorchRL's RPCCollector layout)
    _scheme_class = RPCWeightSyncScheme

    def _start(self, tcp_port) -> None:
        global _ACTIVE
        if _ACTIVE is not None and _ACTIVE() is not None:
            gc.collect()  # one that nobody refers to any more is shut down as it is collected
        if (_ACTIVE is not None and _ACTIVE() is not None) or rpc_agent_running():
            raise RuntimeError(
                "RPCCollector: this process already runs an RPC agent (another RPCCollector that was not "
                "shut down, or torch.distributed.rpc.init_rpc); call shutdown() on it first")
        _ACTIVE = weakref.ref(self)
        self._agent = False
        super()._start(tcp_port)

    def _start_transport(self) -> None:
        # the agent keeps the store it is given after rpc.shutdown(): give it a client of the
        # driver's store, so that the store's listening socket closes with the collector
        store = PrefixStore(f"reap/{self._key}", connect_store(self._host, self.tcp_port, self.start_timeout))
        init_rpc_agent(store, DRIVER_NAME, 0, self.num_collectors + 1, local=self._local,
                       timeout=self.start_timeout, key=self._key, options=self.tensorpipe_options)
        self._agent = True

    def _send_request(self, idx: int, payload, version: int, prefetch: bool) -> None:
        from torch.distributed import rpc

        fut = rpc.rpc_async(worker_name(idx), _rpc_collect, args=(payload, version, prefetch),
                            timeout=self.worker_timeout + 10.0)
        events = self._events  # not self: a pending call must not keep a dropped collector alive
        fut.add_done_callback(lambda f, i=idx: events.put((i, "rpc", f)))

    def _receive_event(self, idx: int, kind: str, payload):
        try:
            return payload.wait()
        except Exception as exc:
            raise self._rpc_error(idx, exc) from None

    def _rpc_error(self, idx, exc) -> RemoteCollectorError:
        message = str(exc)
        marker = f"collector worker {idx} raised"
        if marker in message:  # the worker's own report: text, then its traceback
            text, _, tb = message[message.index(marker):].partition("\n")
            return RemoteCollectorError(f"{self._owner}: worker {idx} (rank {idx + 1}) raised: {text}\n\n"
                                        f"worker {idx} traceback:\n{tb}", worker_idx=idx, remote_traceback=tb)
        return self._worker_error(idx, "failed", detail=f"{type(exc).__name__}: {message.splitlines()[0] if message else ''}")

    def _call(self, idx: int, method: str, args: tuple):
        from torch.distributed import rpc

        try:
            return rpc.rpc_sync(worker_name(idx), _rpc_call, args=(method, args), timeout=self.worker_timeout)
        except Exception as exc:
            raise self._rpc_error(idx, exc) from None

    def _stop_transport(self, grace: float) -> None:
        # The calls in flight get their answers first (at most ``grace`` s; a failed collector
        # does not wait): a worker then leaves with nothing pending between the two agents, and
        # neither side's TensorPipe logs a broken pipe. The workers never close their agent (see
        # _worker._serve_rpc); ours closes once they are gone (_close_transport).
        self._quiet_by = None
        if self.__dict__.get("_agent") and self.__dict__.get("_failure") is None:
            self._quiet_by = time.monotonic() + grace
            self._await_requests(grace)
        if self._store is not None:
            try:
                self._store.set("stop", b"1")
            except Exception:
                pass

    def _close_transport(self) -> None:
        global _ACTIVE
        from torch.distributed import rpc

        try:
            if self.__dict__.get("_agent"):
                self._agent = False
                if self._launcher is None and self.__dict__.get("_quiet_by") is not None and self._store is not None:
                    # no process of theirs to join here (torchrun): each worker says it is leaving
                    # just before it exits; closing first would break its pipe while it still runs
                    wait_keys(self._store, [f"left/{i}" for i in range(self.num_collectors)],
                              self._quiet_by - time.monotonic())
                rpc.shutdown(graceful=False)
        finally:
            if _ACTIVE is not None and _ACTIVE() in (self, None):
                _ACTIVE = None


__all__ = ["RPCCollector"]
