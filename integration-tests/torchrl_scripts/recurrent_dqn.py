"""TorchRL's recurrent DQN tutorial on CartPole's state (TorchRL's own LSTMModule and its primer)."""

import torch
from tensordict.nn import TensorDictModule as Mod
from tensordict.nn import TensorDictSequential as Seq
from torchrl.collectors import Collector
from torchrl.data import LazyMemmapStorage, TensorDictReplayBuffer
from torchrl.envs import (
    Compose,
    ExplorationType,
    GymEnv,
    InitTracker,
    RewardScaling,
    StepCounter,
    TransformedEnv,
    set_exploration_type,
)
from torchrl.modules import MLP, EGreedyModule, LSTMModule, QValueModule, set_recurrent_mode
from torchrl.objectives import DQNLoss, SoftUpdate

torch.manual_seed(0)
device = torch.device("cpu")
env = TransformedEnv(
    GymEnv("CartPole-v1", device=device),
    Compose(StepCounter(), InitTracker(), RewardScaling(loc=0.0, scale=0.1)),
)

feature = Mod(MLP(out_features=64, num_cells=[64], device=device), in_keys=["observation"],
              out_keys=["embed"])
n_cells = feature(env.reset())["embed"].shape[-1]
lstm = LSTMModule(input_size=n_cells, hidden_size=64, device=device, in_key="embed", out_key="embed")
print("in_keys", lstm.in_keys)
print("out_keys", lstm.out_keys)
env.append_transform(lstm.make_tensordict_primer())

mlp = MLP(out_features=2, num_cells=[64], device=device)
mlp[-1].bias.data.fill_(0.0)
mlp = Mod(mlp, in_keys=["embed"], out_keys=["action_value"])
qval = QValueModule(spec=env.action_spec)

stoch_policy = Seq(feature, lstm, mlp, qval)
exploration_module = EGreedyModule(annealing_num_steps=1_000, spec=env.action_spec, eps_init=0.2)
stoch_policy = Seq(stoch_policy, exploration_module)
policy = Seq(feature, lstm, mlp, qval)
policy(env.reset())

loss_fn = DQNLoss(policy, action_space=env.action_spec, delay_value=True)
updater = SoftUpdate(loss_fn, eps=0.95)
optim = torch.optim.Adam(policy.parameters(), lr=3e-4)

collector = Collector(env, stoch_policy, frames_per_batch=50, total_frames=200, device=device)
rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(1_000), batch_size=4, prefetch=2)

utd = 4
longest = 0
traj_lens = []
for i, data in enumerate(collector):
    if i == 0:
        print("Let us print the first batch of data.\nPay attention to the key names "
              "which will reflect what can be found in this data structure, in particular: "
              "the output of the QValueModule (action_values, action and chosen_action_value),"
              "the 'is_init' key that will tell us if a step is initial or not, and the "
              "recurrent_state keys.\n", data)
    rb.extend(data.unsqueeze(0).to_tensordict().cpu())
    for _ in range(utd):
        s = rb.sample().to(device, non_blocking=True)
        with set_recurrent_mode(True):
            loss_vals = loss_fn(s)
        loss_vals["loss"].backward()
        optim.step()
        optim.zero_grad()
    longest = max(longest, data["step_count"].max().item())
    exploration_module.step(data.numel())
    updater.step()

    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        rollout = env.rollout(200, stoch_policy)
        traj_lens.append(rollout.get(("next", "step_count")).max().item())
    print(f"batch {i}: steps {longest}, loss {loss_vals['loss'].item():.3f}, eval {traj_lens[-1]}")
collector.shutdown()
