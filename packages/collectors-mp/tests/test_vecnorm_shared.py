"""A VecNorm in shared memory is updated by every worker of a multi-process collector."""

import gc
import multiprocessing

import pytest

from reap import GymEnv, TransformedEnv, VecNorm, VecNormV2
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


def test_env_creator_shares_the_statistics_of_the_envs_it_makes_with_parallel_env_workers(shm_before):
    from reap import Compose, EnvCreator, ParallelEnv

    lock = multiprocessing.get_context("spawn").Lock()
    make = EnvCreator(lambda: TransformedEnv(GymEnv("Pendulum-v1"), Compose(  # cloudpickled by value
        VecNorm(in_keys=["observation"], decay=1.0, lock=lock),
        VecNorm(in_keys=["reward"], decay=1.0, lock=lock, new_api=True))))

    def counted():  # VecNorm's count, VecNormV2's
        state = make.state_dict()
        return (state["transforms.0._extra_state"]["observation_count"].item(),
                state["transforms.1._extra_state"][f"count{VecNormV2.SEP}reward"].item())

    assert counted() == (2, 1)  # the first env's reset and random step, as TorchRL's
    env = ParallelEnv(2, make, mp_start_method="spawn")
    try:
        env.rollout(4)
    finally:
        env.close()
    assert counted() == (2 + 2 * 5, 1 + 2 * 4)  # the workers' resets (not for rewards) and steps, shared
    first, second = make(), make()
    first.rollout(3)
    second.rollout(2)
    assert counted() == (12 + 4 + 3, 9 + 2 + 3)  # this process's envs update the same statistics
    alone = EnvCreator(make.create_env_fn, share_memory=False)
    alone().rollout(3)
    assert counted() == (19, 14) and alone.state_dict()["transforms.0._extra_state"]["observation_count"] == 0
    first = second = env = make = lock = None  # the lock is a semaphore in /dev/shm until it is freed
    gc.collect()
    assert not shm_left_by_us(shm_segments() - shm_before)
