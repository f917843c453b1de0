"""Worker failures, restarts, timeouts and cleanup (processes and /dev/shm)."""

import gc
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from reap_mp import MultiAsyncCollector, MultiSyncCollector, WorkerError
from reap_testing import (
    RaisingPolicy,
    constant_policy,
    env_fn,
    pid_alive,
    shm_left_by_us,
    shm_mapped_by,
    shm_segments,
)

FAST = "forkserver"


def test_policy_error_in_async_names_worker():
    # the worker fails while probing the policy at start-up
    with pytest.raises(WorkerError, match=r"(?s)collector worker 0 raised KeyError: 'policy blew up'"):
        MultiAsyncCollector([env_fn()], RaisingPolicy(), frames_per_batch=4, mp_start_method=FAST)


def test_unimportable_objects_are_explained(monkeypatch):
    import types

    # a policy whose module exists only in this process: pickled by reference here, not
    # importable in a worker, however pytest was started (a test module itself may be)
    module = types.ModuleType("reap_test_only_in_the_driver")
    exec("class Local:\n    def __call__(self, observation):\n        return observation[..., :1]\n",
         module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with pytest.raises(WorkerError, match="(?s)could not rebuild the env constructor or policy.*importable"):
        MultiSyncCollector([env_fn()], module.Local(), frames_per_batch=4, mp_start_method=FAST)


def test_killed_worker_is_detected_quickly():
    collector = MultiAsyncCollector([env_fn(), env_fn()], constant_policy(), frames_per_batch=4,
                                    mp_start_method=FAST, worker_timeout=30)
    it = iter(collector)
    next(it)
    victim = collector.worker_pids[1]
    os.kill(victim, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"collector worker 1 was killed by SIGKILL"):
        while time.monotonic() - start < 30:  # worker 0 delivers meanwhile (a busy machine may take a moment to kill)
            next(it)
    assert time.monotonic() - start < 10  # detected from the process sentinel, not a timeout
    assert not any(pid_alive(p) for p in collector.worker_pids + [victim])


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_restart_recreates_the_worker_and_carries_on(cls):
    # 4 frames per worker and batch: each life of workers 1 and 2 delivers one before it fails
    collector = cls([env_fn(), env_fn(die_at=7), env_fn(fail_at=5)], constant_policy(2.0),
                    frames_per_batch=12 if cls is MultiSyncCollector else 4, total_frames=48, mp_start_method=FAST,
                    on_worker_failure="restart", max_restarts=10)
    with collector:
        old = collector.worker_pids
        batches = list(collector)
        assert collector.frames >= 48
        # worker 1 dies at each of its 7th steps and worker 2 raises at each 5th: restarted
        assert collector.worker_restarts[0] == 0
        assert collector.worker_restarts[1] >= 1 and collector.worker_restarts[2] >= 1
        assert collector.restarts == sum(collector.worker_restarts)
        assert all((b["action"] == 2.0).all() for b in batches)
        assert collector.worker_pids[1] != old[1]
        if cls is MultiSyncCollector:
            assert all(b.batch_size == (3, 4) for b in batches)  # complete batches only


def test_restart_gives_up_after_max_restarts():
    collector = MultiSyncCollector([env_fn(fail_at=1)], constant_policy(), frames_per_batch=4,
                                   mp_start_method=FAST, on_worker_failure="restart", max_restarts=2)
    with pytest.raises(WorkerError, match="gave up after 2 restarts"):
        collector.next()
    assert collector.restarts == 2


def test_shutdown_with_and_gc_leave_nothing_behind():
    import multiprocessing

    # the segments and named semaphores of these collectors (other processes on the machine
    # may create their own meanwhile): what the driver and its workers map while they run, less
    # what this process mapped before (long-lived helpers of earlier tests)
    before = shm_mapped_by([os.getpid()])
    with MultiSyncCollector([env_fn(), env_fn()], constant_policy(), frames_per_batch=8,
                            mp_start_method=FAST) as collector:
        collector.next()
        pids = collector.worker_pids
        ours = shm_mapped_by([os.getpid(), *pids])
    assert not any(pid_alive(p) for p in pids)
    collector.shutdown()  # idempotent
    collector = MultiAsyncCollector([env_fn(), env_fn()], constant_policy(), frames_per_batch=8,
                                    mp_start_method=FAST)
    next(iter(collector))
    pids = collector.worker_pids
    ours |= shm_mapped_by([os.getpid(), *pids])
    del collector
    gc.collect()
    assert not any(pid_alive(p) for p in pids)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("collector worker")]
    ours -= before
    assert ours  # their locks are named semaphores
    assert not ours & shm_segments()


SCRIPT = textwrap.dedent("""
    import os, sys
    from reap_mp import MultiSyncCollector, ParallelEnv
    from reap_testing import constant_policy, env_fn
    {guard}
        c = MultiSyncCollector([env_fn(), env_fn()], constant_policy(), frames_per_batch=8,
                               mp_start_method="{method}", worker_timeout=60)
        c.next()
        env = ParallelEnv(2, env_fn(), mp_start_method="{method}")
        print("PIDS", *c.worker_pids, *env.worker_pids, flush=True)
        # no shutdown: interpreter exit must clean up
""")


@pytest.mark.slow
def test_interpreter_exit_cleans_up(shm_before):
    script = SCRIPT.format(guard='if __name__ == "__main__":', method="forkserver")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.split("PIDS")[1].split()]
    assert len(pids) == 4
    time.sleep(0.2)
    assert not any(pid_alive(p) for p in pids)
    assert not shm_left_by_us(shm_segments() - shm_before)  # other programs' come and go meanwhile
    assert "leaked" not in out.stderr


UNGUARDED = textwrap.dedent("""
    import json
    from reap_mp import MultiSyncCollector, ParallelEnv, WorkerError
    from reap_testing import constant_policy, env_fn

    errors = []
    for build in (lambda: MultiSyncCollector([env_fn()], constant_policy(), frames_per_batch=8, worker_timeout=300),
                  lambda: ParallelEnv(1, env_fn(), worker_timeout=300)):
        try:
            build()
        except WorkerError as exc:  # the guard's own error, in the worker re-importing this file, is not one
            errors.append(str(exc))
    print(json.dumps(errors))
""")


@pytest.mark.slow
def test_a_script_without_main_guard_gets_the_explanation_in_the_driver_error(tmp_path):
    # each worker (spawn) re-imports the script and builds a collector there: it dies explaining
    # the guard, and the driver's error says it, not just "exited with code 1"
    path = tmp_path / "unguarded.py"
    path.write_text(UNGUARDED)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    errors = json.loads(out.stdout.splitlines()[-1])
    labels = ["collector worker 0", "ParallelEnv worker 0"]  # every collector starts its workers in one driver
    assert len(errors) == 2, errors
    for label, error in zip(labels, errors):
        first, explanation = error.split("\n\n", 1)
        ending = " while starting" if "collector" in label else ""  # seen as its pipe's end, or its exit
        assert re.fullmatch(f"{label} exited with code 1 and (closed its pipe|sent no reply){ending}", first), first
        assert explanation.startswith("MultiSyncCollector was constructed while a child process started with "
                                      "the 'spawn' start method was importing the main script"), explanation
        assert 'if __name__ == "__main__":' in explanation and "mp_start_method='fork'" in explanation


GUARDED = textwrap.dedent("""
    import json, sys
    from reap_mp import AsyncCollector, MultiSyncCollector, ParallelEnv
    from reap_testing import EchoEnv, constant_policy
    from reap_testing import children_but_tracker


    if __name__ == "__main__":
        method = sys.argv[1]

        def make8():  # defined under the guard: the workers' __main__ has no make8
            return EchoEnv(batch=8)

        class Make8:
            def __call__(self):
                return EchoEnv(batch=8)

        out = {}
        collector = MultiSyncCollector([make8, Make8()], constant_policy(2.0), frames_per_batch=32, total_frames=64,
                                       mp_start_method=method, worker_timeout=300)
        out["sync"] = [(list(b.batch_size), b["action"].unique().tolist()) for b in collector]
        env = ParallelEnv(2, make8, mp_start_method=method, worker_timeout=300)
        collector.shutdown()  # the forkserver has a user left: the env still steps
        out["env"] = list(env.rollout(3)["next", "observation"].shape)
        env.close()
        out["after_both"] = sorted(children_but_tracker())  # the forkserver went with its last user
        with AsyncCollector(make8, constant_policy(3.0), frames_per_batch=16, mp_start_method=method) as c:
            out["async"] = list(next(iter(c)).batch_size)  # a new forkserver for the new user
        out["after_async"] = sorted(children_but_tracker())
        print(json.dumps(out))
""")


@pytest.mark.slow
def test_functions_and_classes_of_main_reach_the_workers_and_the_forkserver_goes_with_its_last_user(tmp_path):
    # a function defined under the guard used to fail in the worker ("Can't get attribute 'make8'
    # on <module '__mp_main__'>"): what belongs to __main__ travels by value. The pickling is the
    # same under spawn (the workers' __main__ is the re-imported script there too); forkserver
    # also shows the server going with its last user
    method = "forkserver"
    path = tmp_path / "guarded.py"
    path.write_text(GUARDED)
    out = subprocess.run([sys.executable, str(path), method], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result == {"sync": [[[2, 8, 2], [2.0]]] * 2, "env": [2, 8, 3, 2], "after_both": [],
                      "async": [8, 2], "after_async": []}, result


@pytest.mark.slow
def test_async_hung_worker_is_restarted_and_its_batches_asked_again():
    # worker 0 hangs at its 10th step (after 2 batches), again after each restart; worker 1 is
    # healthy and paced. Every batch is yielded once: none lost with the hung worker, none twice.
    import functools

    from reap_testing import BusyEchoEnv

    collector = MultiAsyncCollector([env_fn(hang_at=10), functools.partial(BusyEchoEnv, step_cost=0.02, episode_len=5)],
                                    constant_policy(), worker_tags=True, frames_per_batch=4, total_frames=4 * 100,
                                    mp_start_method=FAST, worker_timeout=2, on_worker_failure="restart",
                                    max_restarts=100)
    collector.set_seed(7)
    with collector:
        batches = list(collector)
        assert collector.worker_restarts[0] >= 1 and collector.worker_restarts[1] == 0
    assert len(batches) == 100 and collector.frames == 400
    keys = [tuple(b["observation"][:, 1].tolist()) for b in batches]  # seeded random column
    assert len(set(keys)) == len(keys)  # no batch yielded twice
    from_0 = [b for b in batches if b["collector", "worker_id"][0] == 0]
    assert len(from_0) > 2  # the first worker 0 makes 2 batches, then hangs: restarted ones delivered


def test_start_up_timeout_states_the_time_waited():
    import functools

    from reap_testing import FaultyEnv

    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"collector worker 0 was not ready (\d+\.\d) s after it was started "
                                          r"\(start_timeout=3 s\)") as info:
        MultiSyncCollector([functools.partial(FaultyEnv, where="init", how="hang")], constant_policy(),
                           frames_per_batch=4, mp_start_method=FAST, worker_timeout=1, start_timeout=3)
    waited = float(re.search(r"not ready (\d+\.\d) s", str(info.value)).group(1))
    assert 3.0 <= waited <= time.monotonic() - start + 0.1


@pytest.mark.parametrize("where", ["init", "step"])
def test_pipe_errors_raised_in_the_worker_are_reported_not_taken_for_a_closed_pipe(where):
    # an EOFError from the env (or a library) used to end the worker silently: the parent saw
    # "is still running and closed its pipe while starting", with no traceback
    import functools

    from reap_testing import FaultyEnv

    place = "the env constructor" if where == "init" else "env step 2"
    with pytest.raises(WorkerError, match=rf"collector worker 0 raised EOFError: injected EOFError in {place}") as info:
        collector = MultiSyncCollector([functools.partial(FaultyEnv, where=where, how="eof", at=2)],
                                       constant_policy(), frames_per_batch=4, mp_start_method=FAST)
        collector.next()
    assert "FaultyEnv" in info.value.remote_traceback or "inject_fault" in info.value.remote_traceback


IDLE = textwrap.dedent("""
    from reap_mp import MultiSyncCollector
    from reap_testing import constant_policy, env_fn
    if __name__ == "__main__":
        c = MultiSyncCollector([env_fn(step_sleep=0.5)], constant_policy(), frames_per_batch=8,
                               mp_start_method="forkserver")
        print("TIMEOUT", c.worker_timeout, flush=True)
        try:
            c.next()
        finally:
            c.shutdown()
""")


@pytest.mark.slow
def test_torchrl_max_idle_count_sets_the_default_worker_timeout():
    # TorchRL's MAX_IDLE_COUNT (seconds of waiting, read at import): a batch of 8 steps of 0.5 s
    # takes longer than 2 s, so the collector gives up on its worker, naming the timeout
    env = {**os.environ, "MAX_IDLE_COUNT": "2"}
    out = subprocess.run([sys.executable, "-c", IDLE], capture_output=True, text=True, timeout=240, env=env)
    assert "TIMEOUT 2.0" in out.stdout
    assert out.returncode == 1
    assert re.search(r"WorkerError: .*delivered no batch for \d+\.\d s \(worker_timeout=2 s\)", out.stderr), out.stderr
