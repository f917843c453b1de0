"""What a test needs to prove nothing outlived ``shutdown()``."""

from __future__ import annotations

import os
from pathlib import Path


def child_pids(pid: int | None = None) -> set[int]:
    """Live child processes of ``pid`` (default: this process), read from /proc."""
    pid = os.getpid() if pid is None else pid
    children = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, ppid = fields[0], int(fields[1])
        if ppid == pid and state != "Z":
            children.add(int(stat.parent.name))
    return children


def shm_segments() -> set[str]:
    """Names of the shared-memory segments in /dev/shm (torch's and multiprocessing's)."""
    shm = Path("/dev/shm")
    return {p.name for p in shm.iterdir()} if shm.is_dir() else set()
