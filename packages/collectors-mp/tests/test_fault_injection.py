"""Fault injection: a worker raises, is killed or hangs in each place a worker can be.

Places: while starting (the env constructor, the policy probe), mid-rollout (``env.step``, the
policy), during a weight push, during ``set_seed`` and ``state_dict``. Each case asserts a
``WorkerError`` naming the faulty worker (index 1 of 2) within a bounded time, and that no
process and no ``/dev/shm`` segment of the collector outlives it.
"""

import functools
import multiprocessing
import os
import re
import signal
import time

import pytest
import torch

from reap_mp import (
    MultiAsyncCollector,
    MultiSyncCollector,
    PipeWeightSyncScheme,
    SharedMemWeightSyncScheme,
    WorkerError,
)
from reap_testing import (
    FAULTS,
    ConstantPolicy,
    FaultyEnv,
    FaultyPolicy,
    env_fn,
    hold_lock_and_die,
    shm_segments,
)
from reap_testing.fixtures import start_forkserver
from reap_testing.leaks import descendant_pids

FAST = "forkserver"
TIMEOUT = 2.0  # worker_timeout of every case: a hang is found after it
BOUND = 25.0  # seconds a fault may take to surface on a loaded 2-core machine (hangs: + TIMEOUT)
START_BOUND = 300.0  # the same while starting: start-up itself takes up to a minute under load
MESSAGES = {  # what the error says, per fault
    "raise": r"collector worker 1 raised RuntimeError: injected fault in {where}",
    "kill": r"collector worker 1 was killed by SIGKILL",
    "hang": r"collector worker 1 (delivered no batch|sent nothing) for \d+\.\d s \(worker_timeout=2 s\)",
}


@pytest.fixture
def clean():
    """Fails the test if a process or /dev/shm segment it started is left behind."""
    from multiprocessing import resource_tracker

    start_forkserver()  # long-lived helpers, started on first use: not the test's
    resource_tracker.ensure_running()
    procs, shm = descendant_pids(), shm_segments()
    yield
    deadline = time.monotonic() + 5  # killed processes may need a moment to be reaped
    while (descendant_pids() - procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not descendant_pids() - procs
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("collector worker")]
    # /dev/shm is machine-wide: named semaphores (sem.mp-*) of other programs running meanwhile
    # come and go there, so they are checked by name in test_collector_semaphores_are_unlinked
    deadline = time.monotonic() + 5
    while (leaked := foreign_free(shm_segments() - shm)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not {name for name in leaked if os.path.exists(f"/dev/shm/{name}") and not name.startswith("sem.")}


def foreign_free(names: set[str]) -> set[str]:
    """``names`` less those mapped by processes outside this test's tree (other programs' on a
    shared machine): what is left was made by this test and outlived it."""
    import glob

    ours = descendant_pids() | {os.getpid()}
    foreign = set()
    for maps in glob.glob("/proc/[0-9]*/maps"):
        pid = int(maps.split("/")[2])
        if pid in ours:
            continue
        try:
            text = open(maps).read()
        except OSError:
            continue
        foreign |= {name for name in names if name in text}
    return names - foreign


def check(error: WorkerError, how: str, where: str, started: float, bound: float = BOUND) -> None:
    elapsed = time.monotonic() - started
    assert error.worker_idx == 1
    assert re.search(MESSAGES[how].format(where=where), str(error)), str(error)
    assert elapsed < bound + (TIMEOUT if how == "hang" else 0), elapsed
    if how == "kill":
        assert error.exitcode == -signal.SIGKILL


def make(cls, env_fns, **kwargs):
    if "policy_factory" not in kwargs:
        kwargs["policy"] = ConstantPolicy(1.0).as_module()
    # workers get 5 minutes to start: on a shared 2-core machine start-up alone can take 60 s+
    kwargs.setdefault("start_timeout", 300.0)
    return cls(env_fns, frames_per_batch=8, mp_start_method=FAST, worker_timeout=TIMEOUT, **kwargs)


# ---- while starting ---------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["raise", "kill"])
def test_fault_in_env_constructor(how, clean):
    started = time.monotonic()
    with pytest.raises(WorkerError, match="while starting") as info:
        make(MultiSyncCollector, [env_fn(), functools.partial(FaultyEnv, where="init", how=how)])
    check(info.value, how, "the env constructor", started, START_BOUND)


def test_hang_in_env_constructor(clean):
    started = time.monotonic()
    with pytest.raises(WorkerError, match=r"collector worker 0 was not ready \d+\.\d s after it was started") as info:
        make(MultiSyncCollector, [functools.partial(FaultyEnv, where="init", how="hang")], start_timeout=TIMEOUT)
    assert info.value.worker_idx == 0 and time.monotonic() - started < START_BOUND


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_fault_in_policy_probe_while_starting(how, clean):
    started = time.monotonic()
    with pytest.raises(WorkerError, match="while starting") as info:
        make(MultiSyncCollector, [env_fn(), env_fn()], policy_factory=[
            ConstantPolicy(1.0).as_module, FaultyPolicy(1.0, how=how, at=1).as_module])
    check(info.value, how, "policy call 1", started, START_BOUND)


# ---- mid-rollout ------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
@pytest.mark.parametrize("how", FAULTS)
def test_fault_in_env_step(cls, how, clean):
    collector = make(cls, [env_fn(), functools.partial(FaultyEnv, where="step", how=how, at=6)])
    started = time.monotonic()
    with pytest.raises(WorkerError) as info:
        for _ in collector:
            pass
    check(info.value, how, "env step 6", started)
    assert collector._closed


@pytest.mark.parametrize("how", FAULTS)
def test_fault_in_policy_mid_rollout(how, clean):
    collector = make(MultiAsyncCollector, [env_fn(), env_fn()], policy_factory=[
        ConstantPolicy(1.0).as_module, FaultyPolicy(1.0, how=how, at=5).as_module])
    started = time.monotonic()
    with pytest.raises(WorkerError) as info:
        for _ in collector:
            pass
    check(info.value, how, "policy call 5", started)


# ---- during set_seed and state_dict ----------------------------------------------------------
@pytest.mark.parametrize("where", ["seed", "state_dict"])
@pytest.mark.parametrize("how", FAULTS)
def test_fault_in_requests(where, how, clean):
    collector = make(MultiSyncCollector, [env_fn(), functools.partial(FaultyEnv, where=where, how=how)])
    collector.next()
    started = time.monotonic()
    with pytest.raises(WorkerError) as info:
        collector.set_seed(3) if where == "seed" else collector.state_dict()
    check(info.value, how, f"env {'set_seed' if where == 'seed' else 'state_dict'}", started)
    assert collector._closed


# ---- during a weight push --------------------------------------------------------------------
@pytest.mark.parametrize("scheme", [SharedMemWeightSyncScheme, PipeWeightSyncScheme])
def test_worker_killed_around_a_weight_push(scheme, clean):
    collector = make(MultiSyncCollector, [env_fn(), env_fn()], weight_sync_schemes=scheme())
    collector.next()
    os.kill(collector.worker_pids[1], signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(WorkerError) as info:
        collector.update_policy_weights_({"weight": torch.tensor([2.0])})  # pipe: the send fails
        collector.next()  # shared memory: the push lands in memory, the next collect finds the death
    check(info.value, "kill", "", started)


def test_worker_hung_around_a_weight_push(clean):
    collector = make(MultiSyncCollector, [env_fn(), env_fn()])
    collector.next()
    os.kill(collector.worker_pids[1], signal.SIGSTOP)  # frozen: alive, silent
    started = time.monotonic()
    with pytest.raises(WorkerError) as info:
        collector.update_policy_weights_({"weight": torch.tensor([2.0])})
        collector.next()
    check(info.value, "hang", "", started)


def test_weights_a_worker_cannot_load_are_refused_and_workers_carry_on(clean):
    with make(MultiSyncCollector, [env_fn(), env_fn()]) as collector:
        with pytest.raises(ValueError, match=r"'module\.weight' has shape \(1, 1\)"):
            collector.update_policy_weights_({"weight": torch.ones(1, 1)})
        assert (collector.next()["action"] == 1.0).all()


def test_weights_lock_left_held_by_a_dead_process_is_bounded(clean):
    collector = make(MultiSyncCollector, [env_fn(), env_fn()],
                     weight_sync_schemes=SharedMemWeightSyncScheme(lock_timeout=1.0))
    collector.next()
    # a process that dies holding worker 1's weights lock (as a worker killed mid-copy would)
    holder = collector._ctx.Process(target=hold_lock_and_die, args=(collector.weight_sync_scheme._counters[1].get_lock(),))
    holder.start()
    holder.join(30)
    started = time.monotonic()
    with pytest.raises(WorkerError, match="collector worker 1 held its weights lock for 1 s") as info:
        collector.update_policy_weights_({"weight": torch.tensor([2.0])})
    assert info.value.worker_idx == 1 and time.monotonic() - started < BOUND
    assert collector._closed


def test_weights_lock_held_by_a_dead_process_restarts_the_worker(clean):
    collector = make(MultiSyncCollector, [env_fn(), env_fn()], on_worker_failure="restart", worker_tags=True,
                     weight_sync_schemes=SharedMemWeightSyncScheme(lock_timeout=1.0))
    with collector:
        collector.next()
        holder = collector._ctx.Process(target=hold_lock_and_die,
                                        args=(collector.weight_sync_scheme._counters[1].get_lock(),))
        holder.start()
        holder.join(30)
        collector.update_policy_weights_({"weight": torch.tensor([2.0])})
        batch = collector.next()
        assert collector.worker_restarts == [0, 1]
        assert (batch["action"] == 2.0).all() and (batch["collector", "policy_version"] == 1).all()


@pytest.mark.parametrize("how", FAULTS)
def test_collector_semaphores_are_unlinked_after_a_fault(how, clean):
    collector = make(MultiSyncCollector, [env_fn(), functools.partial(FaultyEnv, where="step", how=how, at=6)])
    names = [c.get_lock()._semlock.name for c in collector.weight_sync_scheme._counters]
    assert all(os.path.exists(f"/dev/shm/sem.{n.lstrip('/')}") for n in names)
    with pytest.raises(WorkerError):
        for _ in collector:
            pass
    del collector
    shm_segments()  # collects garbage
    assert not [n for n in names if os.path.exists(f"/dev/shm/sem.{n.lstrip('/')}")]
