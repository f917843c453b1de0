"""Rendezvous, ports and process groups that never leave the addresses they are given.

* :func:`open_store`: the driver's ``TCPStore``, listening only on ``host`` (127.0.0.1 unless
  a master address is given): the socket is bound here and handed to the store, so a busy
  port is an error naming it and port 0 is a free port chosen by the kernel, with no race.
* :func:`connect_store`: a worker's client of that store.
* :func:`gloo_group`: a private ``ProcessGroupGloo`` on a store, its device pinned to an
  address: never the global default group, so a user's own group in the same process works.
* :func:`init_rpc_agent`: a TensorPipe RPC agent on a store, started without the gloo group
  ``torch.distributed.rpc.init_rpc`` builds on the host name's interface (and without touching
  torch's RPC backend registry); on one machine its TCP transport listens on 127.0.0.1.
* :func:`wait_keys`: wait (bounded) until keys are set, without raising.

Examples:
    >>> store, port = open_store("127.0.0.1", 0, timeout=5.0)
    >>> port > 0
    True
    >>> open_store("127.0.0.1", port, timeout=5.0)
    Traceback (most recent call last):
    ...
    reap_rpc._rendezvous.PortInUseError: tcp_port=... on 127.0.0.1 is already in use; pass another tcp_port, or none to use a free one
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import os
import socket

import torch.distributed as dist

LOOPBACK = "127.0.0.1"
DRIVER_NAME = "reap_driver"


class PortInUseError(OSError):
    """The given ``tcp_port`` is taken on that address."""


def _td(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=float(seconds))


def open_store(host: str, port: int, timeout: float) -> tuple[dist.TCPStore, int]:
    """A ``TCPStore`` server listening on ``host:port`` only (``port`` 0: a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host, int(port)))
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            err = PortInUseError(f"tcp_port={port} on {host} is already in use; pass another tcp_port, "
                                 "or none to use a free one")
            err.errno = errno.EADDRINUSE
            raise err from None
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    chosen = sock.getsockname()[1]
    fd = sock.detach()  # the store owns the socket from here on and closes it
    store = dist.TCPStore(host, chosen, None, True, timeout=_td(timeout), wait_for_workers=False,
                          master_listen_fd=fd, use_libuv=False)
    return store, chosen


def connect_store(host: str, port: int, timeout: float) -> dist.TCPStore:
    """A client of the store at ``host:port`` (waits at most ``timeout`` s for it)."""
    return dist.TCPStore(host, int(port), None, False, timeout=_td(timeout))


def gloo_group(store, rank: int, world_size: int, *, host: str | None, timeout: float,
               prefix: str = "reap_gloo"):
    """A private gloo group of ``world_size`` ranks on ``store``, its sockets on ``host``.

    ``host`` None uses gloo's default (the interface the host name resolves to, or
    ``GLOO_SOCKET_IFNAME``): for workers on other machines.
    """
    pg_store = dist.PrefixStore(prefix, store)
    opts = dist.ProcessGroupGloo._Options()
    opts._timeout = _td(timeout)
    device = (dist.ProcessGroupGloo.create_default_device() if host is None
              else dist.ProcessGroupGloo.create_device(hostname=host))
    opts._devices = [device]
    return dist.ProcessGroupGloo(pg_store, rank, world_size, opts)


# ---- RPC ----------------------------------------------------------------------------------------------
def _start_agent(store, name, rank, world_size, options):
    """What ``torch.distributed.rpc.init_rpc`` does for TensorPipe, less the gloo group it binds to
    the host name's interface: the agent, then a barrier on the store (every agent listens)."""
    import torch.distributed.autograd as dist_autograd
    from torch.distributed import rpc

    dist_autograd._init(rank)
    rpc._set_profiler_node_id(rank)
    agent = rpc.TensorPipeAgent(store, name, rank, world_size, options, {}, [])
    rpc.api._init_rpc_states(agent)
    timeout = _td(options.rpc_timeout)
    store.set(f"reap_ready/{rank}", b"1")
    store.wait([f"reap_ready/{r}" for r in range(world_size)], timeout)


@contextlib.contextmanager
def _tensorpipe_on_loopback():
    """TensorPipe's TCP transport takes its address from ``TP_SOCKET_IFNAME`` (else the host
    name's interface) when the agent starts; for that moment only, the C-level environment
    names the loopback interface. ``os.environ`` is not written; a value already set is kept."""
    if "TP_SOCKET_IFNAME" in os.environ:
        yield
        return
    os.putenv("TP_SOCKET_IFNAME", "lo")
    try:
        yield
    finally:
        os.unsetenv("TP_SOCKET_IFNAME")


def init_rpc_agent(store, name: str, rank: int, world_size: int, *, local: bool, timeout: float,
                   key: str, options: dict | None = None) -> None:
    """Start this process's RPC agent as ``name`` in a static world of ``world_size``.

    ``local``: every rank is on this machine: TensorPipe's TCP transport listens on 127.0.0.1
    (its shared-memory transport is not used: its threads poll without sleeping, a core's
    worth of CPU per world even while idle); otherwise on the interface its address guess
    picks (``TP_SOCKET_IFNAME``). ``key`` names this collector's world in the store, so that the
    agents of two collectors built one after the other never mix. torch's RPC registry is left
    as it is: a user's own ``rpc.init_rpc`` still works once the collector is shut down.
    """
    from torch.distributed import rpc

    options = dict(options or {})
    options.setdefault("_transports", ["uv"])
    options.setdefault("_channels", ["basic"])
    opts = rpc.TensorPipeRpcBackendOptions(rpc_timeout=timeout, init_method="env://", **options)
    with _tensorpipe_on_loopback() if local else contextlib.nullcontext():
        _start_agent(dist.PrefixStore(f"reap_rpc/{key}", store), name, rank, world_size, opts)


def rpc_agent_running() -> bool:
    """Whether this process has a running RPC agent (reap's or the user's)."""
    from torch.distributed.rpc import api

    return bool(api._is_current_rpc_agent_set())


def wait_keys(store, keys: list[str], timeout: float) -> bool:
    """Wait at most ``timeout`` s until every key in ``keys`` is set; whether they all are."""
    if store.check(keys):
        return True
    if timeout <= 0:
        return False
    try:
        store.wait(keys, _td(timeout))
        return True
    except (dist.DistError, RuntimeError):
        return False
