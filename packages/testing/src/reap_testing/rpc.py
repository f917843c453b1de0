"""A peer of a ``torch.distributed.rpc`` world for tests, every socket on 127.0.0.1.

Example:
    >>> port = free_loopback_port()  # then, in a spawned process: rpc_peer("owner", 1, 2, port)
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


def rpc_options(port: int):
    """TensorPipe options of a world whose store listens on ``127.0.0.1:port``."""
    from torch.distributed import rpc

    return rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}", num_worker_threads=4,
                                           rpc_timeout=60)


def rpc_peer(name: str, rank: int, world_size: int, port: int) -> None:
    """Join the world as ``name``, serve the calls of the others, leave when they all shut down."""
    from torch.distributed import rpc

    os.environ.update(TP_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo")  # this process's sockets on loopback
    rpc.init_rpc(name, rank=rank, world_size=world_size, rpc_backend_options=rpc_options(port))
    rpc.shutdown()
