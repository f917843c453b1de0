"""``DistributedCollector`` and ``DistributedSyncCollector``: batches and weights over gloo.

The driver (rank 0) and the workers share a private gloo group (never the default process
group) and a store. A collect request is a numbered key in the store; new weights follow as one
gloo message laid out as the worker's policy; the batch comes back as one gloo message into a
buffer laid out as the worker's first batch (which travels through the store with its layout:
nothing is built on the driver to guess it). One receiving thread per worker waits on its
messages and hands each batch to the driver's queue.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import threading

from reap_rpc._driver import DEAD, RemoteCollector, RemoteCollectorError
from reap_rpc._flat import FlatLayout
from reap_rpc._rendezvous import gloo_group
from reap_rpc._worker import TAG_DATA, TAG_WEIGHTS
from reap_rpc.weight_sync import DistributedWeightSyncScheme

_STOP = object()


class _Receiver(threading.Thread):
    """Worker ``idx``'s batches, in order, onto the driver's event queue (it holds the driver's
    watch and process group, not the collector: a dropped collector is collected)."""

    def __init__(self, watch, pg, idx: int):
        super().__init__(name=f"reap-dist-recv-{idx}", daemon=True)
        self.watch, self.pg, self.idx = watch, pg, idx
        self.tasks: queue.Queue = queue.Queue()
        self.layout = None
        self.buf = None
        self.stopping = False

    def run(self) -> None:
        events, idx = self.watch.events, self.idx
        while True:
            task = self.tasks.get()
            if task is _STOP:
                return
            try:
                send_work = task[0]
                if send_work is not None:
                    send_work.wait()
                event = self._first() if self.layout is None else self._next()
            except Exception as exc:  # a dead peer, a timeout: reported with the worker's own error if any
                event = (idx, "exc", exc)
                if self.stopping:
                    return
                events.put(event)
                return
            if event is None:
                return
            events.put(event)

    def _first(self):
        value = self.watch.wait(self.idx, f"first/{self.idx}", 7 * 24 * 3600.0)
        if self.stopping:
            return None
        if value is DEAD or value is None:
            return (self.idx, "exc", RuntimeError("its process ended"))
        batch = pickle.loads(value)
        if batch is None:
            return (self.idx, "failed", None)
        self.layout = FlatLayout.of(batch)
        self.buf = self.layout.empty()
        return (self.idx, "batch", batch)

    def _next(self):
        self.pg.recv([self.buf], self.idx + 1, TAG_DATA).wait()
        if FlatLayout.status(self.buf):
            return (self.idx, "failed", None)
        return (self.idx, "batch", self.layout.unpack(self.buf).clone())


class DistributedCollector(RemoteCollector):
    """Collect with reap collectors in worker ranks; batches and weights move over gloo.

    Arguments follow TorchRL's ``DistributedCollector`` (see :class:`~reap_rpc.RPCCollector`
    for each): ``sync=False`` (default) yields each worker's batch as it arrives; ``sync=True``
    yields the workers' batches stacked, ``[num_collectors, *worker_batch]`` with
    ``frames_per_batch // num_collectors`` frames each. ``backend`` is ``"gloo"`` (reap's
    collectors step on the CPU). ``update_interval`` (DistributedSyncCollector's) sends the
    central policy every that many batches.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import DistributedCollector, GymEnv
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> with DistributedCollector([lambda: GymEnv("Pendulum-v1", num_envs=4)] * 2, policy,
        ...                           frames_per_batch=64, total_frames=128, sync=True) as collector:
        ...     for batch in collector:
        ...         print(batch.batch_size)  # 2 workers, 4 envs, 8 steps
        ...         collector.update_policy_weights_(policy)
        torch.Size([2, 4, 8])
        torch.Size([2, 4, 8])
    """

    _transport = "gloo"
    _scheme_class = DistributedWeightSyncScheme

    def __init__(self, create_env_fn, policy=None, *, update_interval: int | None = None, **kwargs):
        if update_interval is not None and (isinstance(update_interval, bool) or not isinstance(update_interval, int)
                                            or update_interval < 1):
            raise ValueError(f"{type(self).__name__}: update_interval must be a positive int or None, "
                             f"got {update_interval!r}")
        self.update_interval = update_interval
        self._pg = None
        self._receivers: list[_Receiver] = []
        self._seq: list[int] = []
        super().__init__(create_env_fn, policy, **kwargs)

    def _start_transport(self) -> None:
        n = self.num_collectors
        self._pg = gloo_group(self._store, 0, n + 1, host="127.0.0.1" if self._local else None,
                              timeout=max(self.worker_timeout, self.start_timeout))
        self._seq = [0] * n
        layout = self._infos[0]["weights"]
        if layout is not None:
            self.weight_sync_scheme.layout = FlatLayout.of(layout)
        self._receivers = [_Receiver(self._watch, self._pg, i) for i in range(n)]
        for r in self._receivers:
            r.start()

    def _command(self, idx: int, cmd: tuple) -> int:
        seq = self._seq[idx]
        self._seq[idx] += 1
        self._store.set(f"cmd/{idx}/{seq}", pickle.dumps(cmd))
        return seq

    def _send_request(self, idx: int, payload, version: int, prefetch: bool) -> None:
        self._command(idx, ("collect", version, payload is not None, prefetch))
        work = self._pg.send([payload], idx + 1, TAG_WEIGHTS) if payload is not None else None
        self._receivers[idx].tasks.put((work,))

    def _receive_event(self, idx: int, kind: str, payload):
        if kind == "batch":
            return payload
        if kind == "failed":
            return self._raise_reported(idx)
        return self._raise_reported(idx, detail=f"{type(payload).__name__}: {str(payload).splitlines()[0] if str(payload) else ''}")

    def _raise_reported(self, idx: int, detail: str | None = None):
        raise self._worker_error(idx, "failed" if detail else "raised", detail=detail)

    def _call(self, idx: int, method: str, args: tuple):
        seq = self._command(idx, ("call", method, args))
        key = f"res/{idx}/{seq}"
        value = self._await(idx, key, self.worker_timeout, f"did not answer {method}()")
        if value is DEAD:
            raise self._worker_error(idx, "died", exitcode=self._watch.dead.get(idx))
        status, value = pickle.loads(value)
        self._store.delete_key(key)
        if status == "error":
            text, tb = value
            raise RemoteCollectorError(f"{self._owner}: worker {idx} (rank {idx + 1}) raised in {method}(): "
                                       f"{text}\n\nworker {idx} traceback:\n{tb}", worker_idx=idx, remote_traceback=tb)
        return value

    def _sync_iterator(self):
        if self.update_interval is None:
            yield from super()._sync_iterator()
            return
        for j, batch in enumerate(super()._sync_iterator()):
            yield batch
            if (j + 1) % self.update_interval == 0 and self.policy is not None and not self._closed:
                self._push_weights(self.policy, None)

    def _stop_transport(self, grace: float) -> None:
        for r in self._receivers:
            r.stopping = True
        if self._store is None:
            return
        for i in range(len(self._seq)):
            with contextlib.suppress(Exception):
                self._command(i, ("stop",))

    def _close_transport(self) -> None:
        for r in self._receivers:
            r.tasks.put(_STOP)
        for r in self._receivers:
            if r is not threading.current_thread():
                r.join(5.0)
        self._receivers = []
        self._pg = None


class DistributedSyncCollector(DistributedCollector):
    """TorchRL's ``DistributedSyncCollector``: every batch gathers one part from each worker.

    The same as ``DistributedCollector(..., sync=True)``: batches are ``[num_collectors,
    *worker_batch]``; ``update_interval`` (default 1) sends the central policy to every worker
    after that many batches.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import DistributedSyncCollector, GymEnv
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> with DistributedSyncCollector([lambda: GymEnv("Pendulum-v1")] * 2, policy,
        ...                               frames_per_batch=16, total_frames=16) as collector:
        ...     print(next(iter(collector)).batch_size)
        torch.Size([2, 8])
    """

    def __init__(self, create_env_fn, policy=None, *, update_interval: int = 1, sync: bool = True, **kwargs):
        if sync is not True:
            raise ValueError("DistributedSyncCollector: collection is always synchronous; use "
                             "DistributedCollector(sync=False) for asynchronous collection")
        super().__init__(create_env_fn, policy, update_interval=update_interval, sync=True, **kwargs)


__all__ = ["DistributedCollector", "DistributedSyncCollector"]
