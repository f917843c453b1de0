"""Peers of a ``torch.distributed.rpc`` world for tests, each in a fresh process.

The world meets in a file (a ``FileStore``: torch's ``tcp://`` store listens on every interface)
and TensorPipe and gloo listen on 127.0.0.1. torch keeps a process's first RPC agent for RRefs (a
second world in the same process gets wrong owners and hangs at shutdown), so a test process
never joins a world itself: it spawns ``rpc_peer`` and ``rpc_run`` processes.

Example:
    >>> port = free_loopback_port()  # for code that takes a port
    >>> 0 < port < 65536
    True
"""

from __future__ import annotations

import os
import socket


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _join(name: str, rank: int, world_size: int, rendezvous: str) -> None:
    from torch.distributed import rpc

    os.environ.update(TP_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo")  # this process's sockets on loopback
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"file://{rendezvous}", num_worker_threads=4,
                                              rpc_timeout=60)
    rpc.init_rpc(name, rank=rank, world_size=world_size, rpc_backend_options=options)


def rpc_peer(name: str, rank: int, world_size: int, rendezvous: str) -> None:
    """Join the world meeting in the file ``rendezvous`` as ``name``, serve the calls of the
    others, leave when they all shut down."""
    from torch.distributed import rpc

    _join(name, rank, world_size, rendezvous)
    rpc.shutdown()


def rpc_run(name: str, rank: int, world_size: int, rendezvous: str, fn, args, results) -> None:
    """Join the world as ``name``, put ``fn(*args)`` (or the error it raised, as a string) in the
    ``results`` queue, then leave with the others."""
    from torch.distributed import rpc

    _join(name, rank, world_size, rendezvous)
    try:
        results.put(fn(*args))
    except Exception as err:  # noqa: BLE001 - sent to the test, which fails on it
        results.put(f"{type(err).__name__}: {err}")
    finally:
        rpc.shutdown()


def own_listening() -> set[tuple[str, int]]:
    """The TCP sockets this process listens on (run on a peer through ``rpc_sync``)."""
    from reap_testing.leaks import listening_addresses

    return listening_addresses([os.getpid()])


def remote_buffer_calls(owner: str, scratch_dir: str) -> dict:
    """TorchRL's RemoteTensorDictReplayBuffer test, from the trainer's side: a buffer built on
    ``owner``, written and read through an ``RRef``; what each call returned."""
    import torch
    from tensordict import TensorDict
    from torch.distributed import rpc

    from reap_replay import (
        LazyMemmapStorage,
        RandomSampler,
        RemoteTensorDictReplayBuffer,
        RoundRobinWriter,
    )

    cls = RemoteTensorDictReplayBuffer
    rref = rpc.remote(owner, cls, kwargs={"storage": LazyMemmapStorage(100, scratch_dir=scratch_dir),
                                          "sampler": RandomSampler(), "writer": RoundRobinWriter()})
    data = TensorDict({"a": torch.arange(3), "b": torch.arange(3.0)[:, None] * 10}, [3])
    out = {"listening": own_listening() | rpc.rpc_sync(owner, own_listening),
           "owner": rref.owner().name,
           "extend": rpc.rpc_sync(owner, cls.extend, args=(rref, data)).tolist(),
           "add": rpc.rpc_sync(owner, cls.add, args=(rref, data[1])),
           "sample": rpc.rpc_sync(owner, cls.sample, args=(rref, 64)).to_dict(),
           "len": len(rref.to_here())}
    rpc.rpc_sync(owner, cls.empty, args=(rref,))
    try:
        rpc.rpc_sync(owner, cls.sample, args=(rref, 2))
    except RuntimeError as err:
        out["empty_sample"] = str(err)
    return out
