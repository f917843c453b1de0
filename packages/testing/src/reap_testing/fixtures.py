"""pytest fixtures shared by the test suites of reap's process backends (import one into a
``conftest.py`` to use it there)."""

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
