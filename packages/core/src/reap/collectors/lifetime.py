"""What outlives what, for the process backends (reap-collectors-mp, reap-collectors-rpc).

* :func:`track` / :func:`untrack`: owners of worker processes that are still running when the
  interpreter exits are shut down then, before multiprocessing joins (without a bound) the
  children that are not daemons.
* :class:`ForkserverUse`: one user of multiprocessing's forkserver (shared by every
  ``forkserver`` context of the process). When the last user releases it, a forkserver that
  reap started is stopped: no process outlives ``shutdown()``. The next user starts a new one.

Examples:
    >>> from reap.collectors.lifetime import ForkserverUse
    >>> use = ForkserverUse()
    >>> use.release(); use.release()  # the second release does nothing
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing.util  # noqa: F401 - its exit handler must be registered before ours (run after it)
import os
import signal
import threading
import weakref
from multiprocessing import forkserver

_LIVE: weakref.WeakSet = weakref.WeakSet()


def track(owner) -> None:
    """Call ``owner.shutdown()`` at interpreter exit unless it was untracked before."""
    _LIVE.add(owner)


def untrack(owner) -> None:
    _LIVE.discard(owner)


@atexit.register
def _shutdown_live() -> None:
    for owner in list(_LIVE):
        try:
            owner.shutdown()
        except Exception:  # noqa: BLE001 - interpreter exit: best effort, never raise
            pass


_lock = threading.Lock()
_users = 0
_started_by_reap = False


class ForkserverUse:
    """Holds the forkserver for one owner of worker processes until :meth:`release`."""

    def __init__(self):
        global _users, _started_by_reap
        with _lock:
            if _users == 0:  # one that runs already was started by someone else: never stopped
                _started_by_reap = forkserver._forkserver._forkserver_pid is None
            _users += 1
        self._held = True

    def release(self) -> None:
        """Let go (once); the last user stops a forkserver that reap started."""
        global _users
        with _lock:
            if not self._held:
                return
            self._held = False
            _users -= 1
            if _users == 0 and _started_by_reap:
                _stop_forkserver()


def _stop_forkserver() -> None:
    server = forkserver._forkserver
    pid = server._forkserver_pid
    if pid is None:
        return
    # The server leaves once every holder of its "alive" pipe closed it: this process, and any
    # process forked from it that still runs. SIGTERM ends it at once whatever is left, so the
    # wait in _stop() (the server's own stop: it reaps the process and removes its socket; the
    # next use starts a new server) is bounded.
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    server._stop()


__all__ = ["ForkserverUse", "track", "untrack"]
