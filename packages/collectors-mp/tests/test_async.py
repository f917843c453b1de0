"""MultiAsyncCollector: double buffering, update_at_each_batch, AsyncCollector (the layout, version
tags and faults every backend shares are reap_testing's contract, test_contract.py)."""

import pytest
import torch

from reap import MultiCollector
from reap_mp import MultiAsyncCollector
from reap_testing import constant_policy, env_fn

FAST = "forkserver"


@pytest.fixture(scope="module")
def async_collector():
    collector = MultiCollector([env_fn(batch=2), env_fn(batch=2)], constant_policy(1.0), sync=False,
                               frames_per_batch=8, mp_start_method=FAST)
    yield collector
    collector.shutdown()


def test_batches_are_copies_not_shared_slots(async_collector):
    assert isinstance(async_collector, MultiAsyncCollector)  # MultiCollector(sync=False)
    it = iter(async_collector)
    first = next(it)
    kept = first["next", "observation"].clone()
    for _ in range(4):
        next(it)
    assert torch.equal(first["next", "observation"], kept)
    assert not first["next", "observation"].is_shared()


def test_update_at_each_batch_targets_the_delivering_worker():
    trainer = constant_policy(0.0)
    with MultiAsyncCollector([env_fn(), env_fn()], trainer, worker_tags=True, frames_per_batch=4, total_frames=40,
                             update_at_each_batch=True, mp_start_method=FAST) as collector:
        versions = []
        for batch in collector:
            versions.append(int(batch["collector", "policy_version"][0]))
        assert collector.frames == 40
        assert len(versions) == 10
        assert collector.policy_version == 10  # one push per delivered batch
        assert versions == sorted(versions) or max(versions) > 0


def test_async_collector_runs_one_worker_and_leaves_nothing(shm_before):
    from reap_mp import AsyncCollector
    from reap_testing import pid_alive, shm_left_by_us, shm_segments

    collector = AsyncCollector(env_fn(batch=2), constant_policy(1.0), worker_tags=True, frames_per_batch=8, total_frames=32,
                               mp_start_method=FAST)
    assert isinstance(collector, MultiAsyncCollector) and collector.num_workers == 1
    pids = list(collector.worker_pids)
    versions = []
    for batch in collector:  # 4 batches of [2 envs, 4 steps], all from worker 0
        assert batch.batch_size == (2, 4)
        assert (batch["collector", "worker_id"] == 0).all()
        versions.append(int(batch["collector", "policy_version"][0, 0]))
        if len(versions) == 1:
            collector.update_policy_weights_({"weight": torch.tensor([2.0])})
        assert (batch["action"] == (2.0 if versions[-1] == 1 else 1.0)).all()
    # the batches queued at the push may predate it (none, one or two); then the new weights
    assert versions[0] == 0 and versions[-1] == 1 and versions == sorted(versions)
    collector.shutdown()
    assert not any(pid_alive(p) for p in pids)
    assert not shm_left_by_us(shm_segments() - shm_before)


def test_async_collector_takes_one_env_constructor():
    from reap_mp import AsyncCollector, aSyncDataCollector

    assert aSyncDataCollector is AsyncCollector
    with pytest.raises(TypeError, match="AsyncCollector: create_env_fn must be one env constructor .*MultiAsyncCollector"):
        AsyncCollector([env_fn(), env_fn()], constant_policy(), frames_per_batch=4)
    with pytest.raises(ValueError, match="AsyncCollector runs one worker, got num_workers=2"):
        AsyncCollector(env_fn(), constant_policy(), frames_per_batch=4, num_workers=2)
    with pytest.raises(ValueError, match="frames_per_batch"):  # num_workers=None (the default) passes
        AsyncCollector(env_fn(), constant_policy(), frames_per_batch=0, num_workers=None)


def test_set_seed_during_iteration_drops_the_batch_asked_before_it():
    # TorchRL's test_concurrent_collector_seed: the batch after set_seed repeats the one after
    # the first set_seed, though the worker had started on the next when it came
    from reap import GymEnv
    from reap_mp import AsyncCollector

    with AsyncCollector(lambda: GymEnv("Pendulum-v1"), None, frames_per_batch=20, max_frames_per_traj=20,
                        mp_start_method=FAST) as collector:
        collector.set_seed(100)
        it = iter(collector)
        first = next(it)
        collector.set_seed(100)
        second, third = next(it), next(it)
    assert torch.equal(first["observation"], second["observation"])
    assert torch.equal(first["action"], second["action"])
    assert not torch.equal(first["observation"], third["observation"])
