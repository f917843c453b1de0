"""ParallelEnv feeding a replay buffer sampled in trajectory slices (SliceSampler)."""

import torch
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer, SliceSampler
from torchrl.envs import EnvCreator, GymEnv, ParallelEnv, StepCounter, TransformedEnv
from torchrl.envs.utils import RandomPolicy


def make_env():
    return TransformedEnv(GymEnv("CartPole-v1"), StepCounter())


if __name__ == "__main__":
    torch.manual_seed(0)
    env = ParallelEnv(2, EnvCreator(make_env))
    print(env.batch_size, env.action_spec)
    collector = Collector(env, RandomPolicy(env.action_spec), frames_per_batch=200, total_frames=600)
    rb = ReplayBuffer(
        storage=LazyTensorStorage(1_000),
        sampler=SliceSampler(slice_len=8, traj_key=("collector", "traj_ids"),
                             end_key=("next", "done"), strict_length=False),
        batch_size=64,
    )
    for i, data in enumerate(collector):
        assert data.batch_size == (2, 100)
        rb.extend(data.reshape(-1))
        sample = rb.sample()
        traj = sample["collector", "traj_ids"]
        print(f"batch {i}: {len(rb)} stored, sample {sample.batch_size}, "
              f"{traj.unique().numel()} trajectories in the sample")
        assert traj.unique().numel() <= 64 // 8  # eight slices of up to eight steps
    collector.shutdown()
