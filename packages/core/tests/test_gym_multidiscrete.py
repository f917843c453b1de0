"""gymnasium ``MultiDiscrete`` spaces in ``GymEnv``/``GymWrapper``: TorchRL's specs, the actions
gymnasium receives, the observations written, and a masked grid of cells."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from reap.collectors import Collector
from reap.envs import ActionMask, GymWrapper, TransformedEnv
from reap.envs.utils import check_env_specs
from reap.specs import MultiCategorical, MultiOneHot


class Recorder(gym.Env):
    """Observes a MultiDiscrete counter and records every action it is given."""

    def __init__(self, act=None):
        self.action_space = spaces.MultiDiscrete([3, 4]) if act is None else act
        self.observation_space = spaces.MultiDiscrete([3, 4])
        self.actions = []

    def _obs(self):
        return np.array([self.t % 3, (self.t * 3) % 4], dtype=np.int64)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.actions.append(np.array(action))
        self.t += 1
        return self._obs(), 0.0, False, False, {}


class Grid(gym.Env):
    """A 3x4 board: an action is a cell's (row, column); a cell taken is illegal (it raises)."""

    def __init__(self):
        self.action_space = spaces.MultiDiscrete([3, 4])
        self.observation_space = spaces.Dict({"observation": spaces.Box(0, 1, (2,), np.float32),
                                              "action_mask": spaces.Box(0, 1, (3, 4), dtype=bool)})

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.mask = np.ones((3, 4), bool)
        return {"observation": np.zeros(2, np.float32), "action_mask": self.mask.copy()}, {}

    def step(self, action):
        row, col = np.asarray(action)
        if not self.mask[row, col]:
            raise AssertionError(f"illegal cell {(row, col)}")
        self.mask[row, col] = False
        obs = {"observation": np.zeros(2, np.float32), "action_mask": self.mask.copy()}
        return obs, 1.0, not self.mask.any(), False, {}


@pytest.mark.parametrize("categorical", [True, False])
def test_actions_reach_gymnasium_as_one_index_per_entry(categorical):
    gym_env = Recorder()
    env = GymWrapper(gym_env, categorical_action_encoding=categorical)
    spec_cls = MultiCategorical if categorical else MultiOneHot
    assert type(env.action_spec) is spec_cls and type(env.observation_spec["observation"]) is spec_cls
    check_env_specs(env)
    rollout = env.rollout(6)
    sent = np.stack(gym_env.actions[-6:])
    action = rollout["action"]
    if not categorical:  # [1,0,0, 0,0,1,0] -> [0, 2]
        action = torch.stack([part.argmax(-1) for part in action.split([3, 4], -1)], -1)
    assert np.array_equal(sent, action.numpy()) and sent.shape == (6, 2)
    # observations: the counter's (t % 3, 3t % 4), as indices or one-hot rows
    expected = torch.tensor([[t % 3, (t * 3) % 4] for t in range(1, 7)])
    obs = rollout["next", "observation"]
    if not categorical:
        assert obs.dtype == torch.int64 and obs.shape == (6, 7) and bool((obs.sum(-1) == 2).all())
        obs = torch.stack([part.argmax(-1) for part in obs.split([3, 4], -1)], -1)
    assert torch.equal(obs, expected)


def test_a_vector_env_takes_a_row_per_sub_env():
    vector = gym.vector.SyncVectorEnv([Recorder, Recorder], autoreset_mode=gym.vector.AutoresetMode.DISABLED)
    env = GymWrapper(vector, categorical_action_encoding=True)
    assert env.action_spec.shape == (2, 2)
    rollout = env.rollout(3)
    sent = np.stack([np.stack(sub.actions) for sub in vector.envs], 1)  # [T, B, 2]
    assert np.array_equal(sent, rollout["action"].transpose(0, 1).numpy())
    env.close()


@pytest.mark.parametrize("categorical", [True, False])
def test_a_mask_shaped_as_the_grid_makes_one_index_per_cell(categorical):
    """TorchRL's layout (Categorical/OneHot over the 12 cells); gymnasium gets the cell's
    (row, column), and ActionMask's grid mask keeps random moves legal (TorchRL 0.14.1 hands
    gymnasium the flat index: Grid refuses it)."""
    make = lambda: TransformedEnv(GymWrapper(Grid(), categorical_action_encoding=categorical), ActionMask())  # noqa: E731
    env = make()
    assert env.action_spec.space.n == 12 and env.action_spec.shape == (() if categorical else (12,))
    check_env_specs(env)
    assert env.rollout(24, break_when_any_done=False)["next", "done"].sum() == 2
    with Collector(make, None, frames_per_batch=48, total_frames=48) as collector:
        assert int(next(iter(collector))["next", "done"].sum()) == 4


def test_spaces_torchrl_does_not_take_either_are_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"MultiDiscrete spaces must be 1-D and start at 0, got MultiDiscrete"):
        GymWrapper(Recorder(act=spaces.MultiDiscrete([[2, 3], [3, 2]])))
    with pytest.raises(TypeError, match=r"MultiDiscrete spaces must be 1-D and start at 0"):
        GymWrapper(Recorder(act=spaces.MultiDiscrete([2, 3], start=[1, 1])))


@pytest.mark.parametrize("categorical", [True, False])
def test_the_specs_are_torchrls(categorical):
    torchrl_envs = pytest.importorskip("torchrl.envs")
    theirs = torchrl_envs.GymWrapper(Recorder(), categorical_action_encoding=categorical)
    ours = GymWrapper(Recorder(), categorical_action_encoding=categorical)
    for a, b in [(theirs.action_spec, ours.action_spec),
                 (theirs.observation_spec["observation"], ours.observation_spec["observation"])]:
        assert type(a).__name__ == type(b).__name__
        assert (a.shape, a.dtype, list(a.nvec)) == (b.shape, b.dtype, list(b.nvec))
    ours_reset, theirs_reset = ours.reset(), theirs.reset()
    assert torch.equal(ours_reset["observation"], theirs_reset["observation"])
