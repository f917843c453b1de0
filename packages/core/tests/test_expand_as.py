"""``ExpandAs``: an env-level flag expanded to per-agent entries, in envs and offline."""

import pytest
import torch
from tensordict import TensorDict

from reap.envs import EnvBase
from reap.envs.transforms import ExpandAs, TransformedEnv
from reap.envs.utils import check_env_specs
from reap.specs import Bounded, Categorical, Composite, Unbounded


class ThreeAgents(EnvBase):
    """Three agents under ``"agents"``; one done flag for the team; over after 4 steps."""

    def __init__(self):
        super().__init__(batch_size=[])
        self.observation_spec = Composite(agents=Composite(obs=Unbounded(shape=(3, 2)), shape=(3,)))
        self.action_spec = Composite(agents=Composite(action=Bounded(-1.0, 1.0, shape=(3, 1)), shape=(3,)))
        self.reward_spec = Composite(agents=Composite(reward=Unbounded(shape=(3, 1)), shape=(3,)))
        flag = Categorical(2, shape=(1,), dtype=torch.bool)
        self.done_spec = Composite(done=flag, terminated=flag.clone())

    def _reset(self, td):
        self.t = 0
        done = torch.zeros(1, dtype=torch.bool)
        return TensorDict(agents=TensorDict(obs=torch.zeros(3, 2), batch_size=[3]), done=done, terminated=done.clone())

    def _step(self, td):
        self.t += 1
        action, done = td["agents", "action"], torch.tensor([self.t >= 4])
        return TensorDict(agents=TensorDict(obs=action.expand(3, 2) * self.t, reward=action * 2, batch_size=[3]),
                          done=done, terminated=done.clone())

    def _set_seed(self, seed):
        pass


def test_done_expanded_to_each_agent():
    env = TransformedEnv(ThreeAgents(), ExpandAs("done", ("agents", "reward"), out_key=("agents", "done")))
    assert env.full_observation_spec["agents", "done"].shape == (3, 1)
    assert env.full_done_spec["done"].shape == (1,)  # the env's own flag stays
    check_env_specs(env)
    rollout = env.rollout(6, lambda td: td.set(("agents", "action"), torch.full((3, 1), 0.5)),
                          break_when_any_done=False)
    per_agent = rollout["next", "agents", "done"]
    assert per_agent.shape == (6, 3, 1) and per_agent[:, :, 0].tolist() == [[False] * 3] * 3 + [[True] * 3] + [[False] * 3] * 2
    assert not rollout["agents", "done"].any()  # a reset's flags expanded too (no reward to read there: the spec's shape)


def test_expand_to_an_observation_shape_offline_and_errors():
    t = ExpandAs("done", ("agents", "obs"), out_key="done_all")
    td = TensorDict(done=torch.tensor([True]), agents=TensorDict(obs=torch.zeros(3, 2), batch_size=[3]))
    assert t(td)["done_all"].shape == (3, 2) and t(td)["done_all"].all()
    with pytest.raises(KeyError, match="'reward' not found in tensordict"):
        ExpandAs("done", "reward")(TensorDict(done=torch.ones(1)))
    with pytest.raises(ValueError, match=r"ExpandAs: the done flags .* must stay as they are .* under another key \(out_keys\)"):
        TransformedEnv(ThreeAgents(), ExpandAs("done", ("agents", "reward")))
