"""Faults injected into envs and policies, for fault-handling tests.

Examples:
    >>> from reap_testing.faults import inject_fault
    >>> inject_fault("raise", "env step 3")
    Traceback (most recent call last):
    ...
    RuntimeError: injected fault in env step 3
"""

from __future__ import annotations

import os
import signal
import time

#: What :func:`inject_fault` can do.
FAULTS = ("raise", "kill", "hang")


def inject_fault(how: str, where: str) -> None:
    """``raise`` a RuntimeError naming ``where``, ``kill`` this process (SIGKILL), or ``hang`` (an hour).

    ``how="eof"`` raises an EOFError instead: what a library reading a truncated file or a
    closed pipe raises, which a worker must report like any other error.
    """
    if how == "raise":
        raise RuntimeError(f"injected fault in {where}")
    if how == "eof":
        raise EOFError(f"injected EOFError in {where}")
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "hang":
        time.sleep(3600)
    raise ValueError(f"inject_fault: how must be one of {FAULTS}, got {how!r}")


def hold_lock_and_die(lock) -> None:
    """Take ``lock`` and die holding it (SIGKILL), as a worker killed mid-copy would."""
    lock.acquire()
    os.kill(os.getpid(), signal.SIGKILL)
