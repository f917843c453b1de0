"""An env built from TorchRL's transforms, rolled out and collected."""

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs import (
    CatFrames,
    Compose,
    DoubleToFloat,
    GymEnv,
    InitTracker,
    ObservationNorm,
    RewardScaling,
    RewardSum,
    StepCounter,
    TransformedEnv,
    UnsqueezeTransform,
    VecNorm,
)
from torchrl.envs.utils import check_env_specs

torch.manual_seed(0)
env = TransformedEnv(
    GymEnv("Pendulum-v1"),
    Compose(
        DoubleToFloat(),
        ObservationNorm(in_keys=["observation"], standard_normal=True),
        StepCounter(max_steps=100),
        RewardSum(),
        InitTracker(),
    ),
)
env.transform[1].init_stats(num_iter=200)
env.append_transform(RewardScaling(loc=0.0, scale=0.1))
env.append_transform(UnsqueezeTransform(dim=-2, in_keys=["observation"], out_keys=["observation_frame"]))
env.append_transform(CatFrames(N=4, dim=-2, in_keys=["observation_frame"]))
env.append_transform(VecNorm(in_keys=["observation"], decay=0.99))
print(env)
check_env_specs(env)

td = env.rollout(120)
print(td)
assert td["observation_frame"].shape == (100, 4, 3)
assert td["next", "step_count"].max() == 100 and td["next", "truncated"][-1].all()
print("episode reward:", td["next", "episode_reward"][-1].item())

policy = TensorDictModule(
    nn.Sequential(nn.Flatten(-2), nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 1)),
    in_keys=["observation_frame"],
    out_keys=["action"],
)
collector = Collector(env, policy, frames_per_batch=100, total_frames=300)
for i, data in enumerate(collector):
    print(f"batch {i}: keys {sorted(data.keys())}, "
          f"max step_count {data['step_count'].max().item()}, "
          f"reward {data['next', 'reward'].mean().item():.3f}")
collector.shutdown()
