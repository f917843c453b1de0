"""A2C on CartPole with a one-hot categorical policy (TorchRL's default action encoding)."""

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs import Compose, GymEnv, RewardSum, StepCounter, TransformedEnv
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import A2CLoss
from torchrl.objectives.value import GAE

torch.manual_seed(0)
env = TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter(max_steps=200), RewardSum()))
print("action_spec:", env.action_spec)
n_obs = env.observation_spec["observation"].shape[-1]
n_act = env.action_spec.shape[-1]

actor = ProbabilisticActor(
    TensorDictModule(MLP(in_features=n_obs, out_features=n_act, num_cells=[64]),
                     in_keys=["observation"], out_keys=["logits"]),
    in_keys=["logits"],
    spec=env.action_spec,
    distribution_class=OneHotCategorical,
    return_log_prob=True,
)
critic = ValueOperator(MLP(in_features=n_obs, out_features=1, num_cells=[64]), in_keys=["observation"])
td = actor(env.reset())
assert td["action"].shape == (2,) and td["action"].sum() == 1

advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
loss_module = A2CLoss(actor_network=actor, critic_network=critic, entropy_coeff=0.01)
optim = torch.optim.Adam(loss_module.parameters(), lr=1e-3)

collector = Collector(env, actor, frames_per_batch=128, total_frames=1024)
for i, data in enumerate(collector):
    advantage(data)
    losses = loss_module(data)
    loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
    loss.backward()
    nn.utils.clip_grad_norm_(loss_module.parameters(), 1.0)
    optim.step()
    optim.zero_grad()
    collector.update_policy_weights_()
    done = data["next", "done"].squeeze(-1)
    if done.any():
        print(f"batch {i}: mean return {data['next', 'episode_reward'][done].mean().item():.1f}")

with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
    rollout = env.rollout(200, actor)
print("greedy episode length:", rollout["next", "step_count"].max().item())
collector.shutdown()
