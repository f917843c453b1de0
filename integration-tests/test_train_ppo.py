"""PPO on CartPole, top to bottom, with reap's Collector, reap-value's GAE and reap-replay's buffer.

Reads like a CleanRL script: if this trains, the pieces fit together the way a TorchRL user
would wire them.
"""

import pytest
import torch
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import nn
from torch.distributions import Categorical

from reap import (
    GAE,
    Collector,
    GymEnv,
    LazyTensorStorage,
    RewardSum,
    SamplerWithoutReplacement,
    TensorDictReplayBuffer,
    TransformedEnv,
)

pytestmark = pytest.mark.slow


def make_env():
    return TransformedEnv(GymEnv("CartPole-v1", num_envs=8), RewardSum())


def mlp(out: int) -> nn.Module:
    return nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out))


def test_ppo_learns_cartpole():
    torch.manual_seed(0)
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(mlp(2), in_keys=["observation"], out_keys=["logits"]),
        ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=Categorical,
                                      return_log_prob=True, log_prob_key="sample_log_prob"),
    )
    critic = TensorDictModule(mlp(1), in_keys=["observation"], out_keys=["state_value"])
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=2.5e-3)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(1024), sampler=SamplerWithoutReplacement(),
                                    batch_size=256)
    returns = []
    with Collector(make_env(), actor, frames_per_batch=1024, total_frames=20 * 1024) as collector:
        collector.set_seed(0)
        for batch in collector:
            done = batch["next", "done"]
            if done.any():
                returns.append(batch["next", "episode_reward"][done].mean().item())
            with torch.no_grad():
                advantage(batch)
            buffer.empty()
            buffer.extend(batch.reshape(-1))
            for _ in range(3):
                for minibatch in buffer:
                    dist = actor.get_dist(minibatch)
                    ratio = (dist.log_prob(minibatch["action"]) - minibatch["sample_log_prob"]).exp()
                    adv = minibatch["advantage"].squeeze(-1)
                    policy_loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
                    value_loss = (critic(minibatch)["state_value"] - minibatch["value_target"]).pow(2).mean()
                    loss = policy_loss + 0.5 * value_loss - 0.01 * dist.entropy().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            collector.update_policy_weights_()
    random_return = sum(returns[:2]) / 2
    final_return = sum(returns[-5:]) / 5
    assert random_return < 40
    assert final_return > 100, returns
