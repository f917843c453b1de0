import pytest

from reap_testing import wait_gone, worker_pids
from reap_testing.fixtures import shared_forkserver  # noqa: F401 - for the whole session


@pytest.fixture(autouse=True)
def no_process_left():
    """Every test: no process it started outlives it."""
    before = worker_pids()
    yield
    left = wait_gone(worker_pids() - before, timeout=15.0)
    assert not left, f"processes outlived the test: {sorted(left)}"
