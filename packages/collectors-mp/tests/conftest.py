import pytest

from reap.collectors.lifetime import ForkserverUse
from reap_mp.testing import shm_segments


@pytest.fixture(scope="session", autouse=True)
def shared_forkserver():
    """One forkserver for the session, as one program's collectors share it: without this user,
    each collector's shutdown would stop it and the next test pay seconds to start it again.
    That the last user stops it is tested in a fresh interpreter (test_faults.py)."""
    use = ForkserverUse()
    yield
    use.release()


@pytest.fixture
def shm_before():
    return shm_segments()
