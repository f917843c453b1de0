"""A VecNorm in shared memory is updated by every worker of a multi-process collector."""

import gc
import multiprocessing

import pytest

from reap import GymEnv, TransformedEnv, VecNorm
from reap_mp import MultiSyncCollector
from reap_testing import shm_left_by_us, shm_segments


@pytest.mark.parametrize("method", ["forkserver", pytest.param("spawn", marks=pytest.mark.slow)])
def test_workers_update_the_shared_statistics(method, shm_before):
    # without the lock two workers' updates at the same moment can lose one (201 seen in CI)
    lock = multiprocessing.get_context(method).Lock()
    vecnorm = VecNorm(in_keys=["observation"], decay=1.0, lock=lock).share_memory()
    make_env = lambda: TransformedEnv(GymEnv("Pendulum-v1"), vecnorm)  # noqa: E731 (cloudpickled)
    make_env()  # the statistics exist before the workers start
    with MultiSyncCollector([make_env, make_env], None, frames_per_batch=100, total_frames=200,
                            mp_start_method=method) as collector:
        for _ in collector:
            pass
    # each worker's reset and 100 steps, seen by the trainer's process (plain pickle would copy)
    assert vecnorm.get_extra_state()["observation_count"].item() == 2 + 200
    assert vecnorm.loc["observation"].abs().sum() > 0
    vecnorm.lock = lock = None  # the lock is a semaphore in /dev/shm until it is freed
    gc.collect()
    assert not shm_left_by_us(shm_segments() - shm_before)  # other programs' come and go meanwhile


@pytest.mark.parametrize("new_api", [False, True])
def test_env_creator_shares_the_statistics_of_the_envs_it_makes_with_parallel_env_workers(new_api, shm_before):
    from reap import EnvCreator, ParallelEnv

    lock = multiprocessing.get_context("spawn").Lock()
    make = EnvCreator(lambda: TransformedEnv(  # cloudpickled by value
        GymEnv("Pendulum-v1"), VecNorm(in_keys=["observation"], decay=1.0, lock=lock, new_api=new_api)))
    count = "count.-|-.observation" if new_api else "observation_count"

    def counted():
        return make.state_dict()["_extra_state"][count].item()

    first, second = make(), make()
    first.rollout(3)
    second.rollout(2)
    assert counted() == 4 + 3  # each env's reset and steps, in one set of statistics
    env = ParallelEnv(2, make, mp_start_method="spawn")
    try:
        env.rollout(4)
    finally:
        env.close()
    assert counted() == 7 + 2 * 5  # the workers' updates, through the shared memory
    alone = EnvCreator(make.create_env_fn, share_memory=False)
    alone().rollout(3)
    assert alone.state_dict()["_extra_state"][count].item() == 0  # each env its own statistics
    first = second = env = make = lock = None  # the lock is a semaphore in /dev/shm until it is freed
    gc.collect()
    assert not shm_left_by_us(shm_segments() - shm_before)
