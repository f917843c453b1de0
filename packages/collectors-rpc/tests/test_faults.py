"""Faults on real worker processes: a worker that raises, dies or hangs is reported by index and
rank within a bounded time; shutdown() leaves no process (the conftest checks every test)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from reap_mp.testing import ConstantPolicy, env_fn
from reap_rpc import DistributedCollector, RemoteCollectorError, RPCCollector
from reap_testing import group_pids

pytestmark = pytest.mark.slow  # every test starts worker processes (torch imports): seconds each


@pytest.mark.parametrize("cls", [RPCCollector, DistributedCollector])
def test_worker_that_raises_is_reported_with_its_rank_and_traceback(cls):
    with cls([env_fn(), env_fn(fail_at=3)], ConstantPolicy(1.0).as_module(), frames_per_batch=4,
             total_frames=-1, sync=True, worker_timeout=30) as collector:
        it = iter(collector)
        next(it)  # steps 1-2 of each worker are fine
        start = time.monotonic()
        with pytest.raises(RemoteCollectorError, match=r"worker 1 \(rank 2\) raised.*CountingEnv exploded at step 3") as info:
            next(it)
        assert time.monotonic() - start < 20
        assert info.value.worker_idx == 1 and info.value.rank == 2
        assert "ValueError: CountingEnv exploded at step 3" in info.value.remote_traceback
        with pytest.raises(RemoteCollectorError, match="worker 1"):  # the collector stays failed
            collector.update_policy_weights_()


def test_worker_that_fails_to_start_is_reported_at_once_not_after_start_timeout():
    start = time.monotonic()
    with pytest.raises(RemoteCollectorError, match=r"worker 1 \(rank 2\) failed to start: .*unexpected keyword argument 'no_such_option'"):
        RPCCollector([env_fn(), env_fn(no_such_option=1)], ConstantPolicy(1.0).as_module(), frames_per_batch=4,
                     start_timeout=300)
    assert time.monotonic() - start < 120  # its death ends the wait (start-up itself is slow under load)


@pytest.mark.parametrize("die_at", [2, 6])  # in the first batch (sent through the store), in a later one (gloo)
def test_worker_killed_mid_batch_is_reported_by_rank_with_its_signal(die_at):
    with DistributedCollector([env_fn(die_at=die_at), env_fn()], ConstantPolicy(1.0).as_module(),
                              frames_per_batch=4, total_frames=-1) as collector:
        start = time.monotonic()
        with pytest.raises(RemoteCollectorError, match=r"worker 0 \(rank 1\) died.*killed by SIGKILL") as info:
            for _ in collector:
                pass
        assert time.monotonic() - start < 30
        assert info.value.exitcode == -signal.SIGKILL


def test_worker_killed_while_idle_is_reported_at_the_next_batch():
    with RPCCollector([env_fn(), env_fn()], ConstantPolicy(1.0).as_module(), frames_per_batch=4,
                      total_frames=-1, sync=True) as collector:
        next(iter(collector))
        os.kill(collector.worker_pids[1], signal.SIGKILL)
        with pytest.raises(RemoteCollectorError, match=r"worker 1 \(rank 2\).*killed by SIGKILL"):
            next(iter(collector))


def test_hung_worker_is_reported_after_worker_timeout():
    with DistributedCollector([env_fn(), env_fn(hang_at=3)], ConstantPolicy(1.0).as_module(),
                              frames_per_batch=4, total_frames=-1, sync=True, worker_timeout=5) as collector:
        it = iter(collector)
        next(it)
        start = time.monotonic()
        with pytest.raises(RemoteCollectorError, match=r"worker 1 \(rank 2\) delivered no batch for 5\.\d s \(worker_timeout=5 s\)"):
            next(it)
        assert 5 <= time.monotonic() - start < 20
        start = time.monotonic()
        collector.shutdown(timeout=1)  # the hung worker cannot leave on its own: terminated
        assert time.monotonic() - start < 15



DRIVER = """
import time
from reap_mp.testing import ConstantPolicy, env_fn
from reap_rpc import DistributedCollector, RPCCollector

if __name__ == "__main__":
    pids = []
    for cls in (RPCCollector, DistributedCollector):
        collector = cls([env_fn()] * 2, ConstantPolicy(1.0).as_module(), frames_per_batch=4, total_frames=-1)
        next(iter(collector))
        pids += collector.worker_pids
    print("PIDS", *pids, flush=True)
    time.sleep(600)
"""


def test_workers_leave_on_their_own_when_the_driver_is_killed(tmp_path):
    """The trainer dies without shutdown(): the workers of both kinds of collector (and the
    forkserver) exit on their own within a bound: no orphan."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    driver = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        line = driver.stdout.readline()  # every worker delivered a batch: all are serving
        assert line.startswith("PIDS"), line
        workers = {int(p) for p in line.split()[1:]}
        assert len(workers) == 4 and workers <= group_pids(driver.pid)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(10)
        deadline = time.monotonic() + 30
        while group_pids(driver.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not group_pids(driver.pid)
    finally:
        if group_pids(driver.pid):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.stdout.close()
