"""``launcher="torchrun"``: the collector joins the world ``torchrun`` started.

Rank 0 (the trainer) builds the collector; every other rank runs :func:`serve` and becomes
worker ``rank - 1``. Rank 0 opens the store on ``MASTER_ADDR`` at ``tcp_port`` (default:
``MASTER_PORT + 1``, the port ``torchrun``'s own rendezvous does not use) and writes each
worker's specification there; :func:`serve` reads its own and runs it. Nothing touches the
default process group: the trainer may still ``init_process_group`` for its own use.
"""

from __future__ import annotations

import os
import pickle

import cloudpickle

from reap_rpc._rendezvous import connect_store


def _env_int(name: str) -> int:
    try:
        return int(os.environ[name])
    except KeyError:
        raise RuntimeError(f"{name} is not set: launcher='torchrun' and reap_rpc.serve() run under torchrun "
                           "(or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT yourself)") from None


def default_port(tcp_port=None) -> int:
    if tcp_port is not None:
        return int(tcp_port)
    return _env_int("MASTER_PORT") + 1


def start_torchrun(collector, tcp_port) -> None:
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank != 0:
        raise RuntimeError(f"{collector._owner}(launcher='torchrun') is built on rank 0; rank {rank} runs "
                           "reap_rpc.serve()")
    n = collector.num_collectors
    if world != n + 1:
        raise ValueError(f"{collector._owner}: the torchrun world has {world} ranks; {n} collectors need "
                         f"{n + 1} (rank 0 trains, ranks 1..{n} collect)")
    collector._local = False
    collector._host = collector.master_addr or os.environ.get("MASTER_ADDR", "127.0.0.1")
    collector._open_store(collector._host, default_port(tcp_port))
    for i in range(n):
        spec = collector._worker_spec(i)
        spec["local"] = False
        spec["bind_host"] = None
        collector._store.set(f"spec/{i}", cloudpickle.dumps(spec))
    collector._server.set("reap_key", collector._key.encode())
    collector._connect()


def serve(*, tcp_port: int | None = None, timeout: float = 300.0) -> None:
    """Run this ``torchrun`` rank as a collector worker until rank 0's collector shuts down.

    Rank ``r`` (> 0) is worker ``r - 1``. ``tcp_port`` must match the collector's
    (default: ``MASTER_PORT + 1``); ``timeout`` bounds the wait for rank 0's collector.

    Examples:
        >>> from reap_rpc import serve
        >>> serve.__name__
        'serve'
    """
    import datetime
    import time

    import torch.distributed as dist

    from reap_rpc._worker import worker_main

    rank = _env_int("RANK")
    if rank == 0:
        raise RuntimeError("reap_rpc.serve() runs on ranks > 0; rank 0 builds the collector")
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = default_port(tcp_port)
    deadline = time.monotonic() + timeout
    while True:  # rank 0 may not have opened the store yet
        try:
            store = connect_store(host, port, min(5.0, max(1.0, deadline - time.monotonic())))
            break
        except (dist.DistNetworkError, dist.DistStoreError, RuntimeError):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reap_rpc.serve(): no collector store at {host}:{port} within {timeout:g} s") from None
            time.sleep(0.5)
    left = datetime.timedelta(seconds=max(1.0, deadline - time.monotonic()))
    store.wait(["reap_key"], left)
    key = store.get("reap_key").decode()
    scoped = dist.PrefixStore(f"reap/{key}", store)
    scoped.wait([f"spec/{rank - 1}"], left)
    spec = pickle.loads(scoped.get(f"spec/{rank - 1}"))
    del scoped, store
    worker_main(spec)
