import pytest

from reap_mp.testing import shm_segments


@pytest.fixture
def shm_before():
    return shm_segments()
