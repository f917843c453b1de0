"""TorchRL's PPO tutorial, as written, with ``torchrl.`` replaced by ``reap.`` for collection.

The training loop of TorchRL's "Reinforcement Learning (PPO) with TorchRL" tutorial: TorchRL's
``MLP``, ``ProbabilisticActor``, ``TanhNormal``, ``ValueOperator`` and ``ClipPPOLoss``, built from
reap's env specs; the collector, env, data and value imports are TorchRL's paths with
``torchrl`` replaced by ``reap``. Changes from the tutorial: Pendulum-v1 instead of HalfCheetah,
fewer frames, a ``MultiSyncCollector`` (so the envs are built by a function in each worker,
with the normalisation statistics computed once here), and checks of what the loop produced.

Needs TorchRL: ``uv run --group bench pytest integration-tests/test_torchrl_ppo_tutorial.py``
(``uv run pytest`` skips it).
"""

import copy
import sys
from collections import defaultdict

import cloudpickle
import pytest
import torch

pytest.importorskip("torchrl")

# ---- the tutorial's imports: torchrl.{collectors,envs,data,objectives.value} -> reap.* ----
from tensordict.nn import TensorDictModule  # noqa: E402
from tensordict.nn.distributions import NormalParamExtractor  # noqa: E402
from torch import nn  # noqa: E402
from torchrl.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator  # noqa: E402
from torchrl.objectives import ClipPPOLoss  # noqa: E402

from reap.collectors import MultiSyncCollector  # noqa: E402
from reap.data.replay_buffers import ReplayBuffer  # noqa: E402
from reap.data.replay_buffers.samplers import SamplerWithoutReplacement  # noqa: E402
from reap.data.replay_buffers.storages import LazyTensorStorage  # noqa: E402
from reap.envs import Compose, DoubleToFloat, ObservationNorm, StepCounter, TransformedEnv  # noqa: E402
from reap.envs.libs.gym import GymEnv  # noqa: E402
from reap.envs.utils import ExplorationType, check_env_specs, set_exploration_type  # noqa: E402
from reap.objectives.value import GAE  # noqa: E402

pytestmark = pytest.mark.slow

# worker processes cannot import a test file: send make_env by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

device = torch.device("cpu")
num_cells = 64
lr = 3e-4
max_grad_norm = 1.0
frames_per_batch = 256
total_frames = 5 * frames_per_batch
sub_batch_size = 64
num_epochs = 2
clip_epsilon = 0.2
gamma = 0.99
lmbda = 0.95
entropy_eps = 1e-4


def make_env(loc=None, scale=None):
    base_env = GymEnv("Pendulum-v1", device=device)
    return TransformedEnv(
        base_env,
        Compose(
            # normalize observations
            ObservationNorm(loc=loc, scale=scale, in_keys=["observation"]),
            DoubleToFloat(),
            StepCounter(),
        ),
    )


def test_ppo_tutorial_runs_on_reap():
    torch.manual_seed(0)
    env = make_env()
    env.transform[0].init_stats(num_iter=1000, reduce_dim=0, cat_dim=0)
    loc, scale = env.transform[0].loc, env.transform[0].scale
    assert loc.shape == (3,)
    print("observation_spec:", env.observation_spec)
    print("reward_spec:", env.reward_spec)
    print("input_spec:", env.input_spec)
    print("action_spec (as defined by input_spec):", env.action_spec)
    check_env_specs(env)
    rollout = env.rollout(3)
    print("rollout of three steps:", rollout)

    actor_net = nn.Sequential(
        MLP(out_features=2 * env.action_spec.shape[-1], num_cells=[num_cells, num_cells],
            activation_class=nn.Tanh, device=device),
        NormalParamExtractor(),
    )
    policy_module = TensorDictModule(actor_net, in_keys=["observation"], out_keys=["loc", "scale"])
    policy_module = ProbabilisticActor(
        module=policy_module,
        spec=env.action_spec,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={
            "low": env.action_spec_unbatched.space.low,
            "high": env.action_spec_unbatched.space.high,
        },
        return_log_prob=True,
    )
    value_net = MLP(out_features=1, num_cells=[num_cells, num_cells], activation_class=nn.Tanh,
                    device=device)
    value_module = ValueOperator(module=value_net, in_keys=["observation"])
    print("Running policy:", policy_module(env.reset()))
    print("Running value:", value_module(env.reset()))

    collector = MultiSyncCollector(
        [lambda: make_env(loc, scale)] * 2,
        policy_module,
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
        split_trajs=False,
        device=device,
    )
    replay_buffer = ReplayBuffer(
        storage=LazyTensorStorage(max_size=frames_per_batch),
        sampler=SamplerWithoutReplacement(),
    )
    advantage_module = GAE(gamma=gamma, lmbda=lmbda, value_network=value_module, average_gae=True,
                           device=device)
    loss_module = ClipPPOLoss(
        actor_network=policy_module,
        critic_network=value_module,
        clip_epsilon=clip_epsilon,
        entropy_bonus=bool(entropy_eps),
        entropy_coeff=entropy_eps,
        # these keys match by default but we set this for completeness
        critic_coeff=1.0,
        loss_critic_type="smooth_l1",
    )
    optim = torch.optim.Adam(loss_module.parameters(), lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optim, total_frames // frames_per_batch, 0.0)

    logs = defaultdict(list)
    losses = []
    pushed = copy.deepcopy(policy_module.module[0])  # what the workers run
    first_policy = copy.deepcopy(pushed)
    try:
        for i, tensordict_data in enumerate(collector):
            # the batch was collected with the weights last pushed to the workers
            with torch.no_grad():
                expected = pushed(tensordict_data.select("observation").clone())
            torch.testing.assert_close(tensordict_data["loc"], expected["loc"])
            if i > 0:
                with torch.no_grad():
                    untrained = first_policy(tensordict_data.select("observation").clone())
                assert not torch.allclose(tensordict_data["loc"], untrained["loc"])
            for _ in range(num_epochs):
                advantage_module(tensordict_data)
                data_view = tensordict_data.reshape(-1)
                replay_buffer.extend(data_view.cpu())
                for _ in range(frames_per_batch // sub_batch_size):
                    subdata = replay_buffer.sample(sub_batch_size)
                    loss_vals = loss_module(subdata.to(device))
                    loss_value = (
                        loss_vals["loss_objective"] + loss_vals["loss_critic"] + loss_vals["loss_entropy"]
                    )
                    losses.append(loss_value.item())
                    loss_value.backward()
                    torch.nn.utils.clip_grad_norm_(loss_module.parameters(), max_grad_norm)
                    optim.step()
                    optim.zero_grad()
            logs["reward"].append(tensordict_data["next", "reward"].mean().item())
            logs["step_count"].append(tensordict_data["step_count"].max().item())
            logs["lr"].append(optim.param_groups[0]["lr"])
            collector.update_policy_weights_()
            pushed = copy.deepcopy(policy_module.module[0])
            if i % 10 == 0:
                with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
                    eval_rollout = env.rollout(1000, policy_module)
                    logs["eval reward"].append(eval_rollout["next", "reward"].mean().item())
                    logs["eval reward (sum)"].append(eval_rollout["next", "reward"].sum().item())
                    logs["eval step_count"].append(eval_rollout["step_count"].max().item())
                    del eval_rollout
            scheduler.step()
    finally:
        collector.shutdown()
    assert len(logs["reward"]) == total_frames // frames_per_batch
    assert losses and all(torch.isfinite(torch.tensor(losses)))
    assert logs["eval step_count"] == [199]  # Pendulum truncates at 200 steps
