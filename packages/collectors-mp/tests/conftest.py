import pytest

from reap_testing import shm_segments
from reap_testing.fixtures import shared_forkserver  # noqa: F401 - for the whole session


@pytest.fixture
def shm_before():
    return shm_segments()
