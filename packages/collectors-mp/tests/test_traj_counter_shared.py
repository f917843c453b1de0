"""A ``TrajCounter``'s counter is shared by the worker processes of a ``ParallelEnv`` and a
multiprocess collector, also through ``EnvCreator`` (and its variants), as TorchRL's."""

import gc

from reap import EnvCreator, TransformedEnv
from reap.envs.transforms import TrajCounter
from reap_mp import MultiSyncCollector, ParallelEnv
from reap_testing import EchoEnv, shm_left_by_us, shm_segments


def test_env_creator_shares_a_fresh_counter_of_each_env_it_makes(shm_before):
    def make_env(episode_len=3):  # a new TrajCounter per env: the creator points them at the first's
        return TransformedEnv(EchoEnv(episode_len=episode_len), TrajCounter())

    creator = EnvCreator(make_env)
    with ParallelEnv(2, [creator, creator.make_variant(episode_len=4)], mp_start_method="spawn") as env:
        rollout = env.rollout(12, break_when_any_done=False)
    counts = rollout["next", "traj_count"].squeeze(-1)
    first, second = set(counts[0].tolist()), set(counts[1].tolist())
    assert len(first) == 4 and len(second) == 3 and not first & second  # 12 / 3 and 12 / 4 episodes
    assert first | second == set(range(7))
    del creator, env, make_env  # the counter's lock is a semaphore in /dev/shm until the last holder goes
    gc.collect()
    assert not shm_left_by_us(shm_segments() - shm_before)


def test_workers_of_a_multi_sync_collector_share_the_counter(shm_before):
    counter = TrajCounter()

    def make_env(episode_len=3):
        return TransformedEnv(EchoEnv(episode_len=episode_len), counter.clone())

    with MultiSyncCollector([EnvCreator(make_env, episode_len=5), EnvCreator(make_env, episode_len=4)], None,
                            frames_per_batch=8, total_frames=32, mp_start_method="spawn") as collector:
        batches = list(collector)
    env_ids = {n for batch in batches for n in batch["next", "traj_count"].flatten().tolist()}
    collector_ids = {n for batch in batches for n in batch["collector", "traj_ids"].flatten().tolist()}
    assert len(env_ids) == len(collector_ids)  # one number per trajectory, none given twice
    per_worker = [{n for batch in batches for n in batch["next", "traj_count"][i].flatten().tolist()} for i in (0, 1)]
    assert not per_worker[0] & per_worker[1]
    assert counter.state_dict()["traj_count"] >= len(env_ids)  # the workers counted on this process's counter
    counter = collector = make_env = None  # noqa: F841 (dropped: the lock is freed with the last holder)
    gc.collect()
    assert not shm_left_by_us(shm_segments() - shm_before)
