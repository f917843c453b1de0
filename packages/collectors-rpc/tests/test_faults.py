"""Faults on real worker processes: a worker that fails to start or dies is reported by index and
rank, the driver's death, dropped collectors, scripts; shutdown() leaves no process (the
conftest checks every test). A worker that raises or hangs, and restarts, are reap_testing's
contract (test_contract.py), as on every backend."""

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from reap_rpc import DistributedCollector, RemoteCollectorError, RPCCollector
from reap_testing import (
    ConstantPolicy,
    env_fn,
    group_left,
    group_pids,
    shm_mapped_by,
    shm_segments,
    wait_gone,
    worker_pids,
)

pytestmark = pytest.mark.slow  # every test starts worker processes (torch imports): seconds each


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


DRIVER = """
import time
from reap_testing import ConstantPolicy, env_fn
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
        assert not group_left(driver.pid, timeout=30)
    finally:
        if group_pids(driver.pid):
            os.killpg(driver.pid, signal.SIGKILL)
        driver.stdout.close()


def test_a_dropped_collector_is_collected_and_its_workers_stopped():
    """Nothing of a collector's own (threads, RPC callbacks, the agent's slot) keeps it alive: once
    nobody refers to it, collection shuts it down, and a new RPCCollector can be built."""
    for cls in (RPCCollector, DistributedCollector):  # async: each worker has a rollout under way
        collector = cls([env_fn(), env_fn()], ConstantPolicy(1.0).as_module(), frames_per_batch=4, total_frames=-1)
        next(iter(collector))
        pids = collector.worker_pids
        del collector
        gc.collect()
        assert not wait_gone(pids, timeout=30), cls
    with RPCCollector([env_fn()] * 2, ConstantPolicy(2.0).as_module(), frames_per_batch=8, total_frames=8,
                      sync=True) as collector:
        assert [b["action"].unique().tolist() for b in collector] == [[2.0]]


def test_a_killed_rank_leaves_no_named_semaphore_while_the_driver_runs():
    """A rank running a MultiSyncCollector, SIGKILLed: its workers go, and so do the named
    semaphores of its collector (they were in the driver's resource tracker, kept until the
    driver exited; the rank now has a tracker of its own, which ends with it)."""
    with RPCCollector([env_fn()] * 2, ConstantPolicy(1.0).as_module(), frames_per_batch=8, total_frames=-1,
                      sync=True, collector_class="sync", num_workers_per_collector=2) as collector:
        next(iter(collector))
        rank = collector.worker_pids[0]
        family = {rank} | worker_pids(rank)
        names = shm_mapped_by(family)
        assert len([n for n in names if n.startswith("sem.")]) >= 2  # each worker's weights
        os.kill(rank, signal.SIGKILL)
        assert not wait_gone(family, timeout=30)
        deadline = time.monotonic() + 30
        while names & shm_segments() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not names & shm_segments()
        with pytest.raises(RemoteCollectorError, match=r"worker 0 \(rank 1\) died.*killed by SIGKILL"):
            next(iter(collector))


UNGUARDED = textwrap.dedent("""
    import json
    from reap_testing import ConstantPolicy, env_fn
    from reap_rpc import DistributedCollector, RemoteCollectorError, RPCCollector

    errors = []
    for cls in (RPCCollector, DistributedCollector):
        try:
            cls([env_fn()] * 2, ConstantPolicy(1.0).as_module(), frames_per_batch=4, start_timeout=300)
        except RemoteCollectorError as exc:  # the guard's own error, in the worker re-importing this file, is not one
            errors.append(str(exc))
    print(json.dumps(errors))
""")


@pytest.mark.slow
def test_a_script_without_main_guard_gets_the_explanation_in_the_driver_error(tmp_path):
    path = tmp_path / "unguarded.py"
    path.write_text(UNGUARDED)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    errors = json.loads(out.stdout.splitlines()[-1])
    assert len(errors) == 2, errors
    for cls, error in zip(["RPCCollector", "DistributedCollector"], errors):
        first, explanation = error.split("\n\n", 1)
        assert first.startswith(f"{cls}: worker ") and first.endswith(" failed to start (its process ended: exit code 1)")
        # the workers import the script and build the first collector there
        assert explanation.startswith("RPCCollector was constructed while a child process started with the "
                                      "'forkserver' start method was importing the main script"), explanation
        assert 'if __name__ == "__main__":' in explanation


GUARDED = textwrap.dedent("""
    import json, sys, time
    from reap_testing import ConstantPolicy, EchoEnv
    from reap_rpc import DistributedCollector, RPCCollector
    from reap_testing import children_but_tracker


    if __name__ == "__main__":
        def make2():  # defined under the guard: the workers' __main__ has no make2
            return EchoEnv(batch=2)

        class Make2:
            def __call__(self):
                return EchoEnv(batch=2)

        policy = ConstantPolicy(2.0).as_module()
        with RPCCollector([make2, Make2()], policy, frames_per_batch=8, total_frames=8, sync=True) as collector:
            first = [b["action"].unique().tolist() for b in collector]
        print(json.dumps({"rpc": first, "after_shutdown": sorted(children_but_tracker())}), flush=True)  # the forkserver too
        live = [cls([make2, Make2()], policy, frames_per_batch=4, total_frames=-1)
                for cls in (RPCCollector, DistributedCollector)]
        batches = [list(next(iter(c)).batch_size) for c in live]
        print(json.dumps({"batches": batches, "at": time.time()}), flush=True)
        if sys.argv[1] == "raise":
            raise ValueError("the script fails with collectors running")
        # "end": the script ends with them running
""")


@pytest.mark.slow
@pytest.mark.parametrize("end", ["end", "raise"])
def test_functions_of_main_reach_the_workers_and_the_interpreter_exit_stops_them(tmp_path, end):
    """A function defined under the main guard reaches the workers; shutdown() leaves no process,
    the forkserver included; a script that ends (or raises) with collectors running exits at once
    and leaves no process (it used to hang: multiprocessing joined workers that never left)."""
    path = tmp_path / "guarded.py"
    path.write_text(GUARDED)
    script = subprocess.Popen([sys.executable, str(path), end], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True, cwd=tmp_path)
    try:
        out, err = script.communicate(timeout=400)  # until the script and every worker (they share its pipes) end
        ended = time.time()
        lines = [json.loads(line) for line in out.splitlines()]
        assert lines[0] == {"rpc": [[2.0]], "after_shutdown": []}, err
        assert lines[1]["batches"] == [[2, 2], [2, 2]]
        assert ended - lines[1]["at"] < 30, err  # seconds, where it used to hang
        assert script.returncode == (1 if end == "raise" else 0), err
        assert ("ValueError: the script fails with collectors running" in err) == (end == "raise"), err
        assert not group_left(script.pid)
    finally:
        if group_pids(script.pid):
            os.killpg(script.pid, signal.SIGKILL)
        if script.poll() is None:
            script.kill()
            script.communicate(timeout=10)
