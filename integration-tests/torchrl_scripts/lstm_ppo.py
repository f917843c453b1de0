"""A recurrent (LSTM) PPO agent on CartPole, TorchRL's LSTMModule and set_recurrent_mode."""

import torch
from tensordict.nn import TensorDictModule as Mod
from tensordict.nn import TensorDictSequential as Seq
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
from torchrl.envs import Compose, GymEnv, InitTracker, RewardSum, StepCounter, TransformedEnv
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.modules.tensordict_module.rnn import LSTMModule, set_recurrent_mode
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

torch.manual_seed(0)
env = TransformedEnv(GymEnv("CartPole-v1"), Compose(InitTracker(), StepCounter(), RewardSum()))
n_obs = env.observation_spec["observation"].shape[-1]

lstm = LSTMModule(input_size=n_obs, hidden_size=32, in_key="observation", out_key="embed")
env.append_transform(lstm.make_tensordict_primer())

actor = ProbabilisticActor(
    Seq(lstm, Mod(MLP(in_features=32, out_features=2, num_cells=[32]), in_keys=["embed"],
                  out_keys=["logits"])),
    in_keys=["logits"],
    spec=env.action_spec,
    distribution_class=OneHotCategorical,
    return_log_prob=True,
)
critic = Seq(lstm, ValueOperator(MLP(in_features=32, out_features=1, num_cells=[32]),
                                 in_keys=["embed"]))

advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True,
                deactivate_vmap=True)  # the LSTM branches on is_init: no vmap
loss_module = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.01)
optim = torch.optim.Adam(loss_module.parameters(), lr=3e-4)

frames_per_batch = 128
collector = Collector(env, actor, frames_per_batch=frames_per_batch, total_frames=4 * frames_per_batch)
rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=SamplerWithoutReplacement(), batch_size=2)

for i, data in enumerate(collector):
    assert "recurrent_state_h" in data.keys() and ("next", "recurrent_state_h") in data.keys(True)
    # [T] -> [2, T/2]: two sequences the recurrent mode runs through the LSTM in one go
    data = data.reshape(2, frames_per_batch // 2)
    data["is_init"][:, 0] = True
    with set_recurrent_mode(True):
        with torch.no_grad():
            advantage(data)
        rb.extend(data)
        for _ in range(2):
            sample = rb.sample()
            losses = loss_module(sample)
            loss = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
            loss.backward()
            torch.nn.utils.clip_grad_norm_(loss_module.parameters(), 1.0)
            optim.step()
            optim.zero_grad()
    collector.update_policy_weights_()
    print(f"batch {i}: loss {loss.item():.3f}, "
          f"longest episode {data['next', 'step_count'].max().item()}")
collector.shutdown()
