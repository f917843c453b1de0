"""What a test needs to prove nothing outlived ``shutdown()``: processes, shared-memory
segments and listening sockets.

Examples:
    >>> import socket
    >>> from reap_testing.leaks import listening_addresses
    >>> s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
    >>> ("127.0.0.1", s.getsockname()[1]) in listening_addresses([os.getpid()])
    True
    >>> s.close()
"""

from __future__ import annotations

import gc
import os
import socket
import struct
import time
from pathlib import Path


def _live_processes():
    """``(pid, ppid, pgid)`` of every process but zombies, read from /proc."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            yield int(stat.parent.name), int(fields[1]), int(fields[2])


def child_pids(pid: int | None = None) -> set[int]:
    """Live child processes of ``pid`` (default: this process), read from /proc."""
    pid = os.getpid() if pid is None else pid
    return {child for child, ppid, _ in _live_processes() if ppid == pid}


def descendant_pids(pid: int | None = None) -> set[int]:
    """Live descendants of ``pid`` (default: this process), children of children included: a
    forkserver's workers are the server's children, not this process's."""
    out, todo = set(), [os.getpid() if pid is None else pid]
    while todo:
        for child in child_pids(todo.pop()):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def worker_pids(pid: int | None = None) -> set[int]:
    """Live descendants of ``pid`` (default: this process) but two helpers of multiprocessing:
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


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pids, timeout: float = 10.0) -> set[int]:
    """Wait (at most ``timeout`` s) until none of ``pids`` is alive; returns those still alive."""
    deadline = time.monotonic() + timeout
    alive = {p for p in pids if pid_alive(p)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = {p for p in alive if pid_alive(p)}
    return alive


def group_pids(pgid: int) -> set[int]:
    """Live processes in process group ``pgid``: for a command started with
    ``start_new_session=True``, it and whatever it started, even once orphaned."""
    return {pid for pid, _, group in _live_processes() if group == pgid}


def group_left(pgid: int, timeout: float = 10.0) -> set[int]:
    """Wait (at most ``timeout`` s) until process group ``pgid`` has no live process; those left."""
    deadline = time.monotonic() + timeout
    while (left := group_pids(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def children_but_tracker(pid: int | None = None) -> set[int]:
    """Live children of ``pid`` (default: this process) but multiprocessing's resource tracker,
    a helper that lives as long as the process that started it."""
    out = set()
    for child in child_pids(pid):
        try:
            if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes():
                out.add(child)
        except OSError:
            continue
    return out


def shm_segments() -> set[str]:
    """Names of the shared-memory segments in /dev/shm (torch's and multiprocessing's), after a
    garbage collection (which frees the segments of dropped tensors)."""
    gc.collect()
    shm = Path("/dev/shm")
    return {p.name for p in shm.iterdir()} if shm.is_dir() else set()


def shm_mapped_by(pids) -> set[str]:
    """Names in /dev/shm of the segments and named semaphores that processes ``pids`` map now.

    A mapping is matched to its name by inode: glibc's ``sem_open`` maps a temporary file that it
    then links under the semaphore's name, so /proc/PID/maps shows the temporary (deleted) name.
    Record this while the processes run; what is still in /dev/shm after they end was leaked.
    """
    inodes = set()
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith("/dev/shm/"):
                inodes.add(int(fields[4]))
    names = set()
    for name in shm_segments():
        try:
            if os.stat(f"/dev/shm/{name}").st_ino in inodes:
                names.add(name)
        except OSError:
            continue
    return names


def shm_left_by_us(names, timeout: float = 5.0) -> set[str]:
    """``names`` (e.g. the /dev/shm entries that appeared during a test) less those gone or that
    processes outside this process's tree map: other programs' segments and semaphores, made on
    a shared machine meanwhile (another test process, say). What is still there after
    ``timeout`` seconds was made here and outlived its users."""
    deadline = time.monotonic() + timeout
    while True:
        ours = descendant_pids() | {os.getpid()}
        foreign = [pid for pid, _, _ in _live_processes() if pid not in ours]
        left = (set(names) & shm_segments()) - shm_mapped_by(foreign)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)  # another process's semaphore between sem_open's link and its mapping



def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        entries = list(Path(f"/proc/{pid}/fd").iterdir())
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
