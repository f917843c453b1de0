"""pytest fixtures shared by the test suites of reap's process backends (import one into a
``conftest.py`` to use it there), and :func:`start_forkserver`."""

from __future__ import annotations

import pytest

from reap.collectors.lifetime import ForkserverUse


@pytest.fixture(scope="session", autouse=True)
def shared_forkserver():
    """One forkserver for the session, as one program's collectors share it: without this user,
    each collector's shutdown would stop it and the next test pay seconds to start it again.
    That the last user stops it is for tests in a fresh interpreter."""
    use = ForkserverUse()
    yield
    use.release()


def start_forkserver() -> None:
    """Start the forkserver that ``mp_start_method="forkserver"`` collectors use, with
    reap-collectors-mp's preload, so that a test can note its processes before it creates
    collectors (a forkserver started by ``multiprocessing.forkserver.ensure_running()`` alone
    would preload nothing). It is held for the rest of the process: collectors that shut down
    do not stop it."""
    from multiprocessing import forkserver

    from reap_mp._procs import get_context  # the process backend whose forkserver this is

    get_context("forkserver", "start_forkserver")
    _PINNED.append(ForkserverUse())
    forkserver.ensure_running()


_PINNED: list = []  # the uses start_forkserver() holds
