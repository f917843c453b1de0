import pytest

from reap_rpc.testing import descendant_pids, wait_gone
from reap_testing.fixtures import shared_forkserver  # noqa: F401 - for the whole session


@pytest.fixture(autouse=True)
def no_process_left():
    """Every test: no process it started outlives it."""
    before = descendant_pids()
    yield
    left = wait_gone(descendant_pids() - before, timeout=15.0)
    assert not left, f"processes outlived the test: {sorted(left)}"
