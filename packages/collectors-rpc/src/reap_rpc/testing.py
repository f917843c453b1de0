"""What reap-collectors-rpc's tests need: where processes listen, and proof that none is left.

Examples:
    >>> import socket
    >>> from reap_rpc.testing import listening_addresses
    >>> s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
    >>> ("127.0.0.1", s.getsockname()[1]) in listening_addresses([os.getpid()])
    True
    >>> s.close()
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

from reap_testing import child_pids


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        entries = list(fd_dir.iterdir())
    except OSError:
        return inodes
    for fd in entries:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _address(hex_addr: str, v6: bool) -> str:
    raw = bytes.fromhex(hex_addr)
    if not v6:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", struct.unpack(">I", raw)[0]))
    words = struct.unpack(">4I", raw)
    return socket.inet_ntop(socket.AF_INET6, struct.pack("<4I", *words))


def listening_addresses(pids) -> set[tuple[str, int]]:
    """``(address, port)`` of every TCP socket in LISTEN state held by one of ``pids``."""
    inodes = set().union(*(_socket_inodes(p) for p in pids)) if pids else set()
    found = set()
    for name, v6 in (("tcp", False), ("tcp6", True)):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:
                addr, port = local.split(":")
                found.add((_address(addr, v6), int(port, 16)))
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def descendant_pids(pid: int | None = None) -> set[int]:
    """Live descendants of ``pid`` (default: this process), but two helpers of multiprocessing:
    its resource tracker, and its forkserver (a direct child, kept while a collector uses it, and
    by the tests for their whole session; the workers forked from it are its children and do count)."""
    root = os.getpid() if pid is None else pid
    out, todo, helpers = set(), [root], set()
    while todo:
        parent = todo.pop()
        children = child_pids(parent)
        out |= children
        todo.extend(children)
        if parent == root:
            helpers = {c for c in children if b"multiprocessing.forkserver import main" in _cmdline(c)}
    return {p for p in out - helpers if b"resource_tracker" not in _cmdline(p)}


def wait_gone(pids, timeout: float = 10.0) -> set[int]:
    """Wait (at most ``timeout`` s) until none of ``pids`` is alive; returns those still alive."""
    from reap_mp.testing import pid_alive

    deadline = time.monotonic() + timeout
    alive = {p for p in pids if pid_alive(p)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = {p for p in alive if pid_alive(p)}
    return alive
