"""Rendezvous, ports and process groups that never leave the addresses they are given.

* :func:`open_store`: the driver's ``TCPStore``, listening only on ``host`` (127.0.0.1 unless
  a master address is given): the socket is bound here and handed to the store, so a busy
  port is an error naming it and port 0 is a free port chosen by the kernel, with no race.
* :func:`connect_store`: a worker's client of that store.
* :func:`gloo_group`: a private ``ProcessGroupGloo`` on a store, its device pinned to an
  address: never the global default group, so a user's own group in the same process works.
* :func:`init_rpc_agent`: a TensorPipe RPC agent on a store, started without the gloo group
  ``torch.distributed.rpc.init_rpc`` builds on the host name's interface; on one machine it uses
  TensorPipe's shared-memory transport only (no TCP listener at all).

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

import datetime
import errno
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


# ---- RPC ------------------------------------------------------------------------------------------
_STORES: dict[str, object] = {}
_REGISTERED = False


def _rendezvous_handler(url: str, **kwargs):
    # reap-store://<key>?rank=R&world_size=N : the store this process registered under <key>
    from urllib.parse import parse_qs, urlparse

    parsed = urlparse(url)
    query = parse_qs(parsed.query)
    store = _STORES[parsed.netloc]
    yield store, int(query["rank"][0]), int(query["world_size"][0])


def _options_handler(rpc_timeout, init_method, num_worker_threads=16, _transports=None,
                     _channels=None, **kwargs):
    from torch.distributed import rpc

    return rpc.TensorPipeRpcBackendOptions(
        rpc_timeout=rpc_timeout, init_method=init_method, num_worker_threads=num_worker_threads,
        _transports=_transports, _channels=_channels)


def _agent_handler(store, name, rank, world_size, rpc_backend_options):
    from torch.distributed import rpc

    agent = rpc.TensorPipeAgent(store, name, rank, world_size, rpc_backend_options, {}, [])
    rpc.api._init_rpc_states(agent)
    # a barrier on the store instead of torch's gloo group: every agent is listening
    timeout = _td(rpc_backend_options.rpc_timeout)
    store.set(f"reap_ready/{rank}", b"1")
    store.wait([f"reap_ready/{r}" for r in range(world_size)], timeout)
    return agent


def _register() -> object:
    global _REGISTERED
    from torch.distributed.rendezvous import register_rendezvous_handler
    from torch.distributed.rpc import backend_registry

    if not _REGISTERED:
        register_rendezvous_handler("reap-store", _rendezvous_handler)
        _REGISTERED = True
    if not backend_registry.backend_registered("REAP_TENSORPIPE"):
        backend_registry.register_backend("REAP_TENSORPIPE", _options_handler, _agent_handler)
    return backend_registry.BackendType.REAP_TENSORPIPE


def init_rpc_agent(store, name: str, rank: int, world_size: int, *, local: bool, timeout: float,
                   key: str, options: dict | None = None, counter: int | None = None) -> None:
    """Start this process's RPC agent as ``name`` in a static world of ``world_size``.

    ``local``: every rank is on this machine (shared-memory transport, no TCP listener);
    otherwise TensorPipe's TCP transport on the interface its address guess picks
    (``TP_SOCKET_IFNAME``). ``key`` names this collector's world in the store, so that the
    agents of two collectors built one after the other never mix. ``counter``: the driver's
    count of RPC initialisations (``torch.distributed.rpc`` prefixes its store keys with it),
    given to workers so that a driver's second collector meets its workers under one prefix.
    """
    from torch.distributed import rpc

    if counter is not None:
        rpc._init_counter = counter

    backend = _register()
    _STORES[key] = dist.PrefixStore(f"reap_rpc/{key}", store)
    options = dict(options or {})
    options.setdefault("_transports", ["shm"] if local else ["uv"])
    options.setdefault("_channels", ["basic"])
    opts = _options_handler(timeout, f"reap-store://{key}", **options)
    try:
        rpc.init_rpc(name, backend=backend, rank=rank, world_size=world_size, rpc_backend_options=opts)
    finally:
        _STORES.pop(key, None)


def rpc_init_counter() -> int:
    """This process's count of RPC initialisations so far (see :func:`init_rpc_agent`)."""
    from torch.distributed import rpc

    return int(rpc._init_counter)


def rpc_agent_running() -> bool:
    """Whether this process has a running RPC agent (reap's or the user's)."""
    from torch.distributed.rpc import api

    return bool(api._is_current_rpc_agent_set())
