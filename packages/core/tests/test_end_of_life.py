"""``EndOfLifeTransform``: lives read from the gymnasium env, the flag at each lost life."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from reap.envs import GymEnv, SerialEnv
from reap.envs.transforms import EndOfLifeTransform, StepCounter, TransformedEnv
from reap.envs.utils import check_env_specs
from reap_testing import CountingEnv


class Lives:
    """ALE's lives counter, as ``env.unwrapped.ale.lives()`` reads it."""

    def __init__(self):
        self.n = 3

    def lives(self):
        return self.n


class LivesGame(gym.Env):
    """Loses a life at random (p = 0.3 a step); over at zero lives. Keeps each step's lives."""

    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.ale, self.history = Lives(), []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.ale.n = 3
        self.history.append(("reset", 3))
        return np.zeros(2, np.float32), {}

    def step(self, action):
        if self.np_random.random() < 0.3:
            self.ale.n -= 1
        self.history.append(("step", self.ale.n))
        return np.zeros(2, np.float32), 1.0, self.ale.n <= 0, False, {}


gym.register("ReapTest/LivesGame-v0", entry_point=LivesGame)


def test_lives_and_end_of_life_flags_follow_the_game():
    env = TransformedEnv(GymEnv("ReapTest/LivesGame-v0"), EndOfLifeTransform())
    assert env.observation_spec["lives"].shape == () and env.observation_spec["lives"].dtype == torch.int64
    assert env.observation_spec["end-of-life"].shape == (1,)
    check_env_specs(env)
    env.set_seed(0)
    rollout = env.rollout(40, break_when_any_done=False)
    history = env.base_env.unwrapped.history  # the GymEnv passes attributes it lacks to the gymnasium env
    steps = [n for kind, n in history if kind == "step"][-40:]
    assert rollout["next", "lives"].tolist() == steps
    lost = rollout["lives"] > rollout["next", "lives"]
    done = rollout["next", "done"].squeeze(-1)
    assert done.any() and lost.sum() > done.sum()  # lives lost without the game ending
    assert torch.equal(rollout["next", "end-of-life"].squeeze(-1), lost | done)
    starts = torch.cat([torch.ones(1, dtype=torch.bool), done[:-1]])
    assert (rollout["lives"][starts] == 3).all() and not rollout["end-of-life"][starts].any()
    assert torch.equal(rollout["end-of-life"][1:][~starts[1:]], rollout["next", "end-of-life"][:-1][~starts[1:]])


def test_sub_envs_of_a_serial_env_are_each_asked():
    with pytest.warns(UserWarning, match="The base_env is not a gym env"):  # as TorchRL's: works all the same
        env = TransformedEnv(SerialEnv(2, lambda: GymEnv("ReapTest/LivesGame-v0")), EndOfLifeTransform())
    env.set_seed(1)
    rollout = env.rollout(30, break_when_any_done=False)
    assert rollout["next", "lives"].shape == (2, 30) and not torch.equal(*rollout["next", "lives"].unbind(0))
    lost = rollout["lives"] > rollout["next", "lives"]
    assert torch.equal(rollout["next", "end-of-life"].squeeze(-1), lost | rollout["next", "done"].squeeze(-1))


class Recorder:
    def set_keys(self, **keys):
        self.keys = keys


def test_register_keys_points_a_loss_at_the_flag_and_errors():
    loss = Recorder()
    EndOfLifeTransform(eol_key="eol").register_keys(loss)
    assert loss.keys == {"done": "eol", "terminated": "eol"}
    with pytest.raises(RuntimeError, match="cannot be executed without a parent environment"):
        EndOfLifeTransform()(torch.zeros(1))
    with pytest.warns(UserWarning, match="The base_env is not a gym env"):
        TransformedEnv(CountingEnv(), EndOfLifeTransform(eol_attribute="limit"))
    with pytest.raises(AttributeError, match="'GymEnv' object has no attribute 'not_there', nor has its gymnasium env"):
        TransformedEnv(GymEnv("CartPole-v1"), StepCounter()).base_env.not_there  # noqa: B018
