"""``ActionMask``: TorchRL's transform, its masked spec driving random actions everywhere."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from tensordict import TensorDict

from reap.collectors import Collector
from reap.data import LazyTensorStorage, ReplayBuffer
from reap.envs import ActionMask, Compose, EnvBase, GymEnv, GymWrapper, SerialEnv, TransformedEnv
from reap.envs.utils import check_env_specs, step_mdp
from reap.specs import Binary, Categorical, Composite, Unbounded


class MaskedEnv(EnvBase):
    """TorchRL's test env: each action taken becomes illegal; done once none is left."""

    def __init__(self):
        super().__init__()
        self.action_spec = Categorical(4)
        self.state_spec = Composite(action_mask=Binary(4, dtype=torch.bool))
        self.observation_spec = Composite(obs=Unbounded(3), action_mask=Binary(4, dtype=torch.bool))
        self.reward_spec = Unbounded(1)

    def _reset(self, tensordict):
        return TensorDict(obs=torch.zeros(3), action_mask=torch.ones(4, dtype=torch.bool))

    def _step(self, tensordict):
        mask = tensordict["action_mask"].scatter(-1, tensordict["action"].unsqueeze(-1), False)
        return TensorDict(obs=torch.zeros(3), action_mask=mask, reward=torch.zeros(1), done=~mask.any().view(1))

    def _set_seed(self, seed):
        pass


class Board(gym.Env):
    """A gymnasium env that refuses an illegal move: each move is legal once per episode."""

    def __init__(self):
        self.action_space = spaces.Discrete(5)
        self.observation_space = spaces.Dict({"observation": spaces.Box(0, 1, (5,), dtype=np.float32),
                                              "action_mask": spaces.Box(0, 1, (5,), dtype=bool)})

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.mask = np.ones(5, dtype=bool)
        return {"observation": np.zeros(5, np.float32), "action_mask": self.mask.copy()}, {}

    def step(self, action):
        if not self.mask[action]:
            raise AssertionError(f"illegal action {action}")
        self.mask[action] = False
        return {"observation": np.zeros(5, np.float32), "action_mask": self.mask.copy()}, 1.0, not self.mask.any(), False, {}


def taken_actions_are_legal(data) -> bool:
    action = data["action"]
    if action.shape == data["action_mask"].shape:  # one-hot
        action = action.long().argmax(-1)
    return bool(data["action_mask"].gather(-1, action.unsqueeze(-1)).all())


@pytest.mark.parametrize("make", [
    lambda: TransformedEnv(MaskedEnv(), ActionMask()),
    lambda: TransformedEnv(MaskedEnv(), Compose(ActionMask())),
    lambda: TransformedEnv(SerialEnv(2, MaskedEnv), ActionMask()),
], ids=["env", "compose", "transformed-serial"])
def test_random_actions_are_legal_ones(make):
    env = make()
    check_env_specs(env)
    data = env.rollout(12, break_when_any_done=False)
    assert taken_actions_are_legal(data)
    # four legal moves per episode: the fifth step of each env is the first of a new episode
    assert data["next", "done"].reshape(-1, 12)[:, 3].all()
    env.close()


def test_a_serial_env_of_masked_envs_passes_the_spec_checks():
    """Its sub-envs mask their own specs; the SerialEnv's draws ignore them, as TorchRL's (measured)."""
    env = SerialEnv(2, lambda: TransformedEnv(MaskedEnv(), ActionMask()))
    check_env_specs(env)
    env.close()


def test_an_episode_ends_when_every_action_was_taken():
    env = TransformedEnv(MaskedEnv(), ActionMask())
    td, steps = env.reset(), 0
    while not td["done"] and steps < 10:
        td = env.rand_action(td)
        assert env.action_spec.is_in(td["action"])
        td = step_mdp(env.step(td))
        steps += 1
    assert steps == 4 and not td["action_mask"].any()


@pytest.mark.parametrize("categorical", [True, False])
def test_a_collector_without_policy_draws_legal_actions_from_a_gymnasium_env(categorical):
    """TorchRL 0.14.1's collector draws from the spec it copied when built (measured: Board raises
    'illegal action'); reap's draws from the env's masked spec."""
    make = lambda: TransformedEnv(GymWrapper(Board(), categorical_action_encoding=categorical), ActionMask())  # noqa: E731
    with Collector(make, None, frames_per_batch=50, total_frames=100) as collector:
        for data in collector:
            assert taken_actions_are_legal(data)
            assert int(data["next", "done"].sum()) == 10


def test_action_mask_refuses_what_torchrl_refuses():
    with pytest.raises(ValueError, match="The action key must be a nested key. Got <class 'int'> instead."):
        ActionMask(action_key=1)
    with pytest.raises(ValueError, match="The mask key must be a nested key"):
        ActionMask(mask_key=None)
    with pytest.raises(RuntimeError, match="parent cannot be None"):
        ActionMask()._call(TensorDict())
    with pytest.raises(RuntimeError, match="cannot be executed without a parent environment"):
        ActionMask()(TensorDict())
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.append_transform(ActionMask())
    rb.extend(TensorDict({"a": torch.ones(4)}, [4]))
    with pytest.raises(RuntimeError, match="cannot be executed without a parent environment"):
        rb.sample(2)
    env = TransformedEnv(GymEnv("Pendulum-v1"), ActionMask())
    with pytest.raises(ValueError, match="The action spec must be one of .*Got <class 'reap.specs.continuous.BoundedContinuous'> instead"):
        env.rollout(2)


def test_the_same_masks_as_torchrls():
    torchrl_envs = pytest.importorskip("torchrl.envs")
    results = []
    for envs in (torchrl_envs, __import__("reap.envs", fromlist=["GymWrapper"])):
        env = envs.TransformedEnv(envs.GymWrapper(Board(), categorical_action_encoding=True), envs.ActionMask())
        td = env.reset()
        masks = []
        for action in (2, 0, 4):
            td["action"] = torch.tensor(action)
            td = envs.utils.step_mdp(env.step(td))
            masks.append(env.action_spec.mask.clone())
        results.append(torch.stack(masks))
    assert torch.equal(results[0], results[1])
