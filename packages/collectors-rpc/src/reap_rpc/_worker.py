"""The worker side: one process (one rank) that runs a reap collector for the driver.

:func:`worker_main` is what ``launcher="mp"`` starts in each process and what
:func:`reap_rpc.serve` runs on a ``torchrun`` rank. It connects to the driver's store, builds a
:class:`~reap.collectors.worker.CollectorWorker` (weights loaded only between rollouts, batches
tagged with their weights' version and the worker's id), tells the driver it is ready (its pid,
its policy's weight layout) and serves:

* ``transport="rpc"``: starts its TensorPipe RPC agent; the driver calls :func:`_rpc_collect`
  and :func:`_rpc_call` on it until it sets the ``stop`` key.
* ``transport="gloo"``: reads numbered commands from the store; a batch goes back to rank 0
  as one gloo message (the first one through the store, with its layout), new weights come
  from rank 0 as one gloo message before the rollout that uses them.

An exception is written to the store (``err/<idx>``: text and traceback) and sent down the
channel the driver is waiting on, and the process exits with status 1. A worker leaves as soon
as its driver is gone (its wait on the driver's store fails). A worker started from the
driver's forkserver gets a resource tracker of its own (:func:`_own_resource_tracker`).
"""

from __future__ import annotations

import datetime
import os
import pickle
import sys
import time

import torch.distributed as dist

from reap_rpc._flat import FlatLayout
from reap_rpc._rendezvous import connect_store, gloo_group, init_rpc_agent

TAG_DATA, TAG_WEIGHTS = 1, 2
_WORKER = None  # the CollectorWorker of this process (RPC calls reach it here)
_TIMEOUT: float | None = None  # seconds a request waits for a rollout started ahead (2 x worker_timeout)


def worker_name(idx: int) -> str:
    return f"reap_worker_{idx}"


def _build(spec: dict):
    from reap.collectors.worker import CollectorWorker
    from reap.plugins import get_registries

    get_registries()  # load every plugin now (seconds), not during the first batch's deadline
    kwargs = dict(spec["kwargs"])
    if spec.get("policy") is not None:
        kwargs["policy"] = spec["policy"]
    return CollectorWorker.build(spec["idx"], spec["collector_class"], kwargs, traj_id_offset=spec["traj_id_offset"],
                                 plugin_options=spec.get("plugin_options"))


def _report(store, idx: int, exc: BaseException, worker=None) -> None:
    from reap.collectors.worker import format_worker_error

    text, tb = worker.format_error(exc) if worker is not None else format_worker_error(exc, idx)
    try:
        store.set(f"err/{idx}", pickle.dumps((text, tb)))
    except Exception:  # the driver is gone: nothing to tell
        pass


#: How long a worker waits for its next command: as long as its driver lives. The wait ends
#: at once when the driver's store (in the driver's process) goes away.
IDLE = datetime.timedelta(days=7)


def _wait_key(store, key: str) -> bool:
    """Block until ``key`` is set (True) or the driver is gone (False); never polls."""
    try:
        store.wait([key], IDLE)
        return True
    except (dist.DistError, RuntimeError):
        return False


def _own_resource_tracker() -> None:
    """Forget the resource tracker inherited from the driver: the next one this process needs is
    its own. The named semaphores of a collector this worker runs (a MultiSyncCollector's) are
    then unlinked by that tracker as soon as the worker and its workers are gone, even if it was
    SIGKILLed, not when the driver's tracker ends with the driver."""
    from multiprocessing import resource_tracker

    tracker = resource_tracker._resource_tracker
    if tracker._pid is None and tracker._fd is not None:  # inherited, not started here
        os.close(tracker._fd)
        tracker._fd = None


def worker_main(spec: dict) -> None:
    """Entry point of a worker process (``launcher="mp"``) or rank (``reap_rpc.serve``)."""
    _own_resource_tracker()
    os.environ.update(spec.get("env") or {})  # this process's own environment (loopback pins)
    store = dist.PrefixStore(f"reap/{spec['key']}", connect_store(spec["host"], spec["port"], spec["timeout"]))
    code = _serve(spec, store)
    sys.stdout.flush()
    sys.stderr.flush()
    try:  # last: a driver that cannot join this process (torchrun) waits for this before it closes its agent
        store.set(f"left/{spec['idx']}", b"1")
    except Exception:  # the driver is gone
        pass
    os._exit(code)  # no interpreter teardown racing the agents' threads


def _serve(spec: dict, store) -> int:
    global _WORKER, _TIMEOUT
    idx = spec["idx"]
    # twice the driver's deadline: the driver, whose clock starts later, names a hung rollout
    # first ("delivered no batch ... (worker_timeout=...)"); this one only frees a worker nobody waits for
    timeout = spec.get("worker_timeout")
    _TIMEOUT = None if timeout is None else 2 * timeout
    try:
        worker = _build(spec)
    except BaseException as exc:
        _report(store, idx, exc)
        return 1
    _WORKER = worker
    try:
        store.set(f"ready/{idx}", pickle.dumps(worker.ready_info()))
        if spec["transport"] == "rpc":
            return _serve_rpc(spec, store, worker)
        return _serve_gloo(spec, store, worker)
    except BaseException as exc:
        _report(store, idx, exc, worker)
        return 1
    finally:
        try:
            worker.close()
        except Exception:
            pass


# ---- RPC --------------------------------------------------------------------------------------------
def _rpc_collect(weights, version: int, prefetch: bool = False):
    """Called by the driver through RPC: one collect request (``CollectorWorker.serve_collect``:
    ``weights`` loaded between rollouts; with ``prefetch`` the next rollout starts at once)."""
    worker = _WORKER
    try:
        return worker.serve_collect(weights, version, prefetch=prefetch, timeout=_TIMEOUT)
    except BaseException as exc:
        text, tb = worker.format_error(exc)
        raise RuntimeError(f"{text}\n{tb}") from None


def _rpc_call(method: str, args: tuple):
    worker = _WORKER
    try:
        return getattr(worker, method)(*args)
    except BaseException as exc:
        text, tb = worker.format_error(exc)
        raise RuntimeError(f"{text}\n{tb}") from None


def _serve_rpc(spec, store, worker) -> int:
    """Serve RPC calls until the driver sets ``stop`` (or is gone). The agent is left running:
    the process ends (``os._exit``) right after, and that ends it. Closing it here would make
    its TensorPipe log a broken pipe for the driver's connection: it stays quiet only when a
    collective ``join`` came first, and that join's store barrier numbers its keys per process
    (a driver that built a collector before never meets fresh workers on the same key)."""
    init_rpc_agent(store, worker_name(spec["idx"]), spec["idx"] + 1, spec["world_size"], local=spec["local"],
                   timeout=spec["timeout"], key=spec["key"], options=spec.get("tensorpipe_options"))
    _wait_key(store, "stop")
    return 0


# ---- gloo -------------------------------------------------------------------------------------------
def _serve_gloo(spec, store, worker) -> int:
    idx, rank = spec["idx"], spec["idx"] + 1
    pg = gloo_group(store, rank, spec["world_size"], host=spec["bind_host"], timeout=spec["timeout"])
    layout = worker.ready_info()["weights"]
    w_layout = FlatLayout.of(layout) if layout is not None else None
    w_buf = w_layout.empty() if w_layout is not None else None
    out_layout = out_buf = None
    seq = 0
    while True:
        key = f"cmd/{idx}/{seq}"
        if not _wait_key(store, key):
            return 0
        cmd = pickle.loads(store.get(key))
        store.delete_key(key)
        seq += 1
        op = cmd[0]
        if op == "stop":
            return 0
        if op == "collect":
            _, version, has_weights, prefetch = cmd
            try:
                weights = None
                if has_weights:  # a fresh copy: a rollout running ahead loads it later
                    pg.recv([w_buf], 0, TAG_WEIGHTS).wait()
                    weights = w_layout.unpack(w_buf).clone()
                batch = worker.serve_collect(weights, version, prefetch=prefetch, timeout=_TIMEOUT)
            except BaseException as exc:
                _report(store, idx, exc, worker)
                if out_buf is None:
                    store.set(f"first/{idx}", pickle.dumps(None))
                else:
                    FlatLayout.mark_failed(out_buf)
                    pg.send([out_buf], 0, TAG_DATA).wait()
                time.sleep(0.5)  # let the message leave before the process does
                return 1
            if out_layout is None:
                out_layout = FlatLayout.of(batch)
                out_buf = out_layout.empty()
                store.set(f"first/{idx}", pickle.dumps(batch))
            else:
                out_layout.pack(batch, out_buf)
                pg.send([out_buf], 0, TAG_DATA).wait()
        elif op == "call":
            _, method, args = cmd
            try:
                result = ("ok", getattr(worker, method)(*args))
            except BaseException as exc:
                result = ("error", worker.format_error(exc))
            store.set(f"res/{idx}/{seq - 1}", pickle.dumps(result))
        else:
            raise RuntimeError(f"unknown command {op!r}")
