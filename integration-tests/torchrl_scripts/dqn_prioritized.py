"""DQN on CartPole with a prioritized replay buffer (TorchRL's DQN idioms)."""

import torch
from tensordict.nn import TensorDictSequential
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictPrioritizedReplayBuffer
from torchrl.envs import Compose, GymEnv, RewardSum, StepCounter, TransformedEnv
from torchrl.modules import MLP, EGreedyModule, QValueActor
from torchrl.objectives import DQNLoss, SoftUpdate

torch.manual_seed(0)
env = TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter(max_steps=200), RewardSum()))
env.set_seed(0)

value_net = MLP(in_features=env.observation_spec["observation"].shape[-1],
                out_features=env.action_spec.shape[-1], num_cells=[64, 64])
actor = QValueActor(value_net, in_keys=["observation"], spec=env.action_spec)
exploration = EGreedyModule(env.action_spec, annealing_num_steps=1_000, eps_init=1.0, eps_end=0.05)
policy = TensorDictSequential(actor, exploration)

loss_module = DQNLoss(actor, action_space=env.action_spec, delay_value=True)
loss_module.make_value_estimator(gamma=0.99)
target_updater = SoftUpdate(loss_module, eps=0.99)
optim = torch.optim.Adam(loss_module.parameters(), lr=1e-3)

rb = TensorDictPrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=LazyTensorStorage(10_000),
                                       batch_size=64, priority_key="td_error")
collector = Collector(env, policy, frames_per_batch=100, total_frames=1_000, init_random_frames=200)

for i, data in enumerate(collector):
    rb.extend(data.reshape(-1))
    exploration.step(data.numel())
    if len(rb) < 200:
        continue
    for _ in range(4):
        sample = rb.sample()
        loss = loss_module(sample)
        loss["loss"].backward()
        optim.step()
        optim.zero_grad()
        rb.update_tensordict_priority(sample)
        target_updater.step()
    collector.update_policy_weights_()
    done = data["next", "done"]
    if done.any():
        print(f"batch {i}: loss {loss['loss'].item():.3f}, "
              f"return {data['next', 'episode_reward'][done].mean().item():.1f}")
collector.shutdown()
