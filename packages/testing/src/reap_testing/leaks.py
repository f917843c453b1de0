"""What a test needs to prove nothing outlived ``shutdown()``."""

from __future__ import annotations

import os
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
    """Names of the shared-memory segments in /dev/shm (torch's and multiprocessing's)."""
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


def shm_left_by_us(names) -> set[str]:
    """``names`` (e.g. the /dev/shm entries that appeared during a test) less those that
    processes outside this process's tree map: other programs' segments and semaphores, made on
    a shared machine meanwhile. What is left was made here and outlived its users."""
    ours = descendant_pids() | {os.getpid()}
    foreign = [pid for pid, _, _ in _live_processes() if pid not in ours]
    return set(names) - shm_mapped_by(foreign)

