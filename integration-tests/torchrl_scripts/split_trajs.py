"""Batches split into trajectories: split_trajs=True, and split_trajectories on a batched env."""

import torch
from torchrl.collectors import Collector
from torchrl.collectors.utils import split_trajectories
from torchrl.envs import GymEnv, SerialEnv, StepCounter, TransformedEnv
from torchrl.envs.utils import RandomPolicy

torch.manual_seed(0)


def make_env():
    return TransformedEnv(GymEnv("CartPole-v1"), StepCounter())


env = make_env()
collector = Collector(env, RandomPolicy(env.action_spec), frames_per_batch=200, total_frames=400,
                      split_trajs=True)
for i, data in enumerate(collector):
    mask = data["collector", "mask"]
    lengths = mask.sum(-1)
    print(f"batch {i}: {data.batch_size} -> {len(lengths)} trajectories of lengths {lengths.tolist()}")
    assert lengths.sum() == 200
    assert (data["collector", "traj_ids"][mask].unique().numel()) == len(lengths)
    # the last valid step of every trajectory but the last one is done
    last = lengths - 1
    rows = torch.arange(len(lengths))
    assert data["next", "done"][rows, last][:-1].all()
    returns = (data["next", "reward"].squeeze(-1) * mask).sum(-1)
    print("returns:", returns.tolist())
collector.shutdown()

env = SerialEnv(2, make_env)
collector = Collector(env, RandomPolicy(env.action_spec), frames_per_batch=100, total_frames=100)
for data in collector:
    print("batched env batch:", data.batch_size)
    trajs = split_trajectories(data)
    print("split:", trajs.batch_size, "mask sum", trajs["collector", "mask"].sum().item())
    assert trajs["collector", "mask"].sum() == data.numel()
collector.shutdown()
