"""A custom environment written the TorchRL way (EnvBase, spec setters, _reset/_step/_set_seed)."""

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import CatTensors, EnvBase, RewardSum, StepCounter, TransformedEnv
from torchrl.envs.utils import check_env_specs


class PointMassEnv(EnvBase):
    """A point on a line, pushed towards the origin; the episode ends when it gets there."""

    def __init__(self, max_force: float = 1.0, seed: int | None = None, device="cpu"):
        super().__init__(device=device, batch_size=[])
        self.max_force = max_force
        self._make_spec()
        if seed is None:
            seed = torch.empty((), dtype=torch.int64).random_().item()
        self.set_seed(seed)

    def _make_spec(self):
        self.observation_spec = Composite(
            position=Unbounded(shape=(1,), dtype=torch.float32),
            velocity=Unbounded(shape=(1,), dtype=torch.float32),
            shape=(),
        )
        self.state_spec = self.observation_spec.clone()
        self.action_spec = Bounded(low=-self.max_force, high=self.max_force, shape=(1,),
                                   dtype=torch.float32)
        self.reward_spec = Unbounded(shape=(1,))
        self.done_spec = Composite(
            done=Categorical(2, shape=(1,), dtype=torch.bool),
            terminated=Categorical(2, shape=(1,), dtype=torch.bool),
        )

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        position = torch.rand((1,), generator=self.rng) * 4 - 2
        velocity = torch.zeros(1)
        return TensorDict({"position": position, "velocity": velocity}, batch_size=self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        force = tensordict["action"].clamp(-self.max_force, self.max_force)
        velocity = 0.9 * tensordict["velocity"] + 0.1 * force
        position = tensordict["position"] + 0.1 * velocity
        reward = -position.abs()
        done = position.abs() < 0.05
        return TensorDict(
            {"position": position, "velocity": velocity, "reward": reward, "done": done,
             "terminated": done.clone()},
            batch_size=tensordict.shape,
        )

    def _set_seed(self, seed: int | None):
        self.rng = torch.Generator().manual_seed(seed)


env = TransformedEnv(PointMassEnv(seed=0), StepCounter(max_steps=50))
env.append_transform(CatTensors(in_keys=["position", "velocity"], dim=-1, out_key="observation",
                                del_keys=False))
env.append_transform(RewardSum())
print(env)
check_env_specs(env)

rollout = env.rollout(10)
print(rollout)
assert rollout["next", "observation"].shape == (10, 2)


policy = TensorDictModule(
    nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1), nn.Tanh()),
    in_keys=["observation"],
    out_keys=["action"],
)
collector = Collector(env, policy, frames_per_batch=64, total_frames=256)
for i, data in enumerate(collector):
    print(f"batch {i}: {data.batch_size}, mean reward {data['next', 'reward'].mean():.3f}")
collector.shutdown()
