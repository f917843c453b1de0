"""``EnvBase.register_gym``: a reap env registered in gymnasium and run through ``gymnasium.make``."""

import itertools
import pickle
import warnings

import gymnasium
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from reap.envs import EnvBase, GymEnv
from reap.envs.gym import space_to_spec
from reap.envs.gym_export import ReapGymEnv, spec_to_space
from reap.envs.transforms import Compose, RewardScaling, StepCounter
from reap.specs import (
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    Unbounded,
)

_counter = itertools.count()


@pytest.fixture
def new_id():
    """Unique gymnasium ids (its registry is global), removed after the test."""
    ids = []

    def make(name="Env"):
        ids.append(f"reap-test/{name}{next(_counter)}-v0")
        return ids[-1]

    yield make
    for env_id in ids:
        gymnasium.registry.pop(env_id, None)


@pytest.fixture(autouse=True)
def _quiet_env_checker():
    # gymnasium's env checker warns that tensors (to_numpy=False, TorchRL's default) are not arrays
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*expecting a numpy array.*")
        warnings.filterwarnings("ignore", message=".*Casting input x to numpy array.*")
        yield


def _gym_after_set_seed(env_id, seed):
    """gymnasium's own env, seeded as reap's (and TorchRL's) ``GymEnv.set_seed(seed)`` then
    ``reset()`` seed it: ``reset(seed=seed)``, then the ``reset()`` that starts the episode."""
    env = gymnasium.make(env_id)
    env.reset(seed=seed)
    return env, env.reset()[0]


PENDULUM_ACTIONS = [np.array([a], dtype=np.float32) for a in np.linspace(-2, 2, 25)]


def test_pendulum_matches_gymnasium_and_the_reap_env(new_id):
    env_id = new_id("Pendulum")
    GymEnv.register_gym(env_id, env_name="Pendulum-v1", to_numpy=True)
    env = gymnasium.make(env_id)
    assert isinstance(env.unwrapped, ReapGymEnv) and isinstance(env.unwrapped.reap_env, GymEnv)
    # TorchRL's form: a Dict of the observation entries
    assert env.observation_space == gymnasium.spaces.Dict(observation=gymnasium.make("Pendulum-v1").observation_space)
    assert env.action_space == gymnasium.make("Pendulum-v1").action_space
    obs, info = env.reset(seed=7)
    obs = obs["observation"]
    ref, ref_obs = _gym_after_set_seed("Pendulum-v1", 7)
    reap_env = GymEnv("Pendulum-v1")
    reap_env.set_seed(7)
    td = reap_env.reset()
    assert np.array_equal(obs, ref_obs) and info == {}
    assert np.array_equal(obs, td["observation"].numpy())
    observations = [obs]
    for action in PENDULUM_ACTIONS:
        obs, reward, terminated, truncated, info = env.step(action)
        obs = obs["observation"]
        ref_obs, ref_reward, ref_terminated, ref_truncated, _ = ref.step(action)
        td = reap_env.step(td.set("action", torch.as_tensor(action)))
        assert np.array_equal(obs, ref_obs)
        assert np.array_equal(obs, td["next", "observation"].numpy())
        # the reap env's reward spec is float32, as TorchRL's: gymnasium's float64 reward, rounded
        assert reward == float(np.float32(ref_reward)) == td["next", "reward"].item()
        assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
        assert (terminated, truncated) == (ref_terminated, ref_truncated) == (False, False)
        td = reap_env.step_mdp(td)
        observations.append(obs)
    # each returned observation is its own (no buffer rewritten by the next step)
    ref, first = _gym_after_set_seed("Pendulum-v1", 7)
    again = [first] + [ref.step(a)[0] for a in PENDULUM_ACTIONS]
    assert all(np.array_equal(a, b) for a, b in zip(observations, again))
    env.close()
    assert env.unwrapped.reap_env.is_closed


def test_same_seed_same_episode_and_gymnasium_register_options(new_id):
    env_id = new_id("Pendulum")
    GymEnv.register_gym(env_id, env_name="Pendulum-v1", max_episode_steps=3, reward_threshold=-1.0,
                        nondeterministic=True)
    spec = gymnasium.spec(env_id)
    assert (spec.max_episode_steps, spec.reward_threshold, spec.nondeterministic) == (3, -1.0, True)
    env = gymnasium.make(env_id)
    first = env.reset(seed=3)[0]["observation"]
    assert torch.equal(first, env.reset(seed=3)[0]["observation"])
    flags = [env.step(np.zeros(1, np.float32))[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]  # gymnasium's TimeLimit
    # the registered spec pickles (gymnasium's vector envs send it to their workers)
    assert pickle.loads(pickle.dumps(spec)).kwargs["entry_point"] is GymEnv


@pytest.mark.parametrize("to_numpy", [True, False])
def test_to_numpy_gives_arrays_else_tensors(new_id, to_numpy):
    env_id = new_id()
    GymEnv.register_gym(env_id, env_name="Pendulum-v1", to_numpy=to_numpy, transform=StepCounter(),
                        info_keys=["step_count"])
    env = gymnasium.make(env_id)
    leaf = np.ndarray if to_numpy else torch.Tensor
    obs, info = env.reset(seed=0)
    assert isinstance(obs["observation"], leaf) and isinstance(info["step_count"], leaf)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert isinstance(obs["observation"], leaf) and isinstance(info["step_count"], leaf)
    assert obs["observation"].dtype == (np.float32 if to_numpy else torch.float32)
    assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
    # make's keyword overrides the registered one
    obs, _ = gymnasium.make(env_id, to_numpy=not to_numpy).reset(seed=0)
    assert not isinstance(obs["observation"], leaf)


def test_info_keys_move_entries_to_info(new_id):
    env_id = new_id()
    GymEnv.register_gym(env_id, env_name="Pendulum-v1", transform=StepCounter(), to_numpy=True)
    both = gymnasium.make(env_id)
    assert isinstance(both.observation_space, gymnasium.spaces.Dict)
    assert set(both.observation_space.spaces) == {"observation", "step_count"}
    obs, info = both.reset(seed=0)
    assert set(obs) == {"observation", "step_count"} and info == {}
    assert both.observation_space.contains(obs)

    moved = gymnasium.make(env_id, info_keys=["step_count"])
    assert moved.observation_space == gymnasium.spaces.Dict(observation=gymnasium.make("Pendulum-v1").observation_space)
    obs, info = moved.reset(seed=0)
    assert set(obs) == {"observation"} and info == {"step_count": np.array([0])}
    for count in (1, 2):
        obs, _, _, _, info = moved.step(np.ones(1, np.float32))
        assert obs["observation"].shape == (3,) and info["step_count"].tolist() == [count]


def test_transform_at_register_or_at_make(new_id):
    env_id = new_id()
    GymEnv.register_gym(env_id, env_name="Pendulum-v1", to_numpy=True,
                        transform=Compose(StepCounter(), RewardScaling(loc=0.0, scale=2.0)))
    plain_id = new_id()
    GymEnv.register_gym(plain_id, env_name="Pendulum-v1", to_numpy=True)
    action = np.array([1.0], np.float32)

    def first_step(env):
        env.reset(seed=5)
        return env.step(action)

    plain_obs, plain_reward = first_step(gymnasium.make(plain_id))[:2]
    obs, reward = first_step(gymnasium.make(env_id))[:2]
    assert np.array_equal(obs["observation"], plain_obs["observation"]) and obs["step_count"].tolist() == [1]
    assert reward == pytest.approx(2 * plain_reward)
    # at make: replaces the registered transform
    obs, reward = first_step(gymnasium.make(env_id, transform=RewardScaling(loc=1.0, scale=1.0)))[:2]
    assert np.array_equal(obs["observation"], plain_obs["observation"]) and reward == pytest.approx(plain_reward + 1)
    obs, _ = first_step(gymnasium.make(plain_id, transform=StepCounter()))[:2]
    assert obs["step_count"].tolist() == [1]


@pytest.mark.parametrize("categorical", [False, True])
def test_discrete_action_for_one_hot_or_categorical_spec(new_id, categorical):
    env_id = new_id("CartPole")
    GymEnv.register_gym(env_id, env_name="CartPole-v1", to_numpy=True, categorical_action_encoding=categorical)
    env = gymnasium.make(env_id)
    spec = env.unwrapped.reap_env.action_spec
    assert isinstance(spec, Categorical if categorical else OneHot)
    assert env.action_space == gymnasium.spaces.Discrete(2)
    obs, _ = env.reset(seed=11)
    ref, ref_obs = _gym_after_set_seed("CartPole-v1", 11)
    assert np.array_equal(obs["observation"], ref_obs)
    actions = [1, 1, np.int64(0), 1, np.array(0), torch.tensor(1), 0, 1]
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        ref_obs, ref_reward, ref_terminated, ref_truncated, _ = ref.step(int(action))
        assert np.array_equal(obs["observation"], ref_obs) and reward == ref_reward
        assert (terminated, truncated) == (ref_terminated, ref_truncated)
    if not categorical:  # a one-hot row is taken as it is
        obs = env.step(torch.tensor([0, 1]))[0]
        assert np.array_equal(obs["observation"], ref.step(1)[0])


def test_spec_to_space_inverts_space_to_spec():
    spaces = [
        gymnasium.spaces.Box(-2.0, 2.0, (3,), np.float32),
        gymnasium.spaces.Box(np.array([0.0, -1.0]), np.array([1.0, 5.0]), dtype=np.float64),
        gymnasium.spaces.Box(-np.inf, np.inf, (2, 4), np.float32),
        gymnasium.spaces.Box(0, 255, (4, 4, 3), np.uint8),
        gymnasium.spaces.Discrete(5),
        gymnasium.spaces.MultiBinary(4),
        gymnasium.spaces.MultiBinary([2, 3]),
        gymnasium.spaces.Dict({"position": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32),
                               "inner": gymnasium.spaces.Dict({"gear": gymnasium.spaces.Discrete(3),
                                                               "flags": gymnasium.spaces.MultiBinary(2)})}),
    ]
    for space in spaces:
        for categorical in (False, True):
            assert spec_to_space(space_to_spec(space, categorical_action_encoding=categorical)) == space


def test_spec_to_space_other_specs():
    assert spec_to_space(Unbounded(shape=(2,), dtype=torch.int64)) == gymnasium.spaces.Box(
        np.iinfo(np.int64).min, np.iinfo(np.int64).max, (2,), np.int64)
    assert spec_to_space(MultiCategorical([2, 3])) == gymnasium.spaces.MultiDiscrete([2, 3])
    assert spec_to_space(MultiOneHot([2, 3])) == gymnasium.spaces.MultiDiscrete([2, 3])
    assert spec_to_space(Categorical(4, shape=(1,))) == gymnasium.spaces.Discrete(4)
    assert spec_to_space(Categorical(4, shape=(3,))) == gymnasium.spaces.MultiDiscrete([4, 4, 4])
    assert spec_to_space(OneHot(4, shape=(2, 4))) == gymnasium.spaces.MultiDiscrete([4, 4])
    with pytest.raises(TypeError, match=r"NonTensor.*supported: Bounded"):
        spec_to_space(NonTensor(shape=()))
    with pytest.raises(TypeError, match="NonTensor"):
        spec_to_space(Composite(ok=Unbounded(shape=(1,)), text=NonTensor(shape=())))


class _TwoActions(EnvBase):
    """Nested observations and two actions, one of them one-hot (a TorchRL-style env)."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(position=Unbounded(shape=(2,)),
                                          sensors=Composite(gear=OneHot(3, dtype=torch.int64),
                                                            heat=Unbounded(shape=(1,))))
        self.action_spec = Composite(push=Bounded(-1.0, 1.0, shape=(2,)), gear=OneHot(3, dtype=torch.int64))
        self.reward_spec = Unbounded(shape=(1,))

    def _obs(self, gear):
        return TensorDict(position=self.position.clone(), sensors=TensorDict(gear=gear, heat=self.position[:1] * 2))

    def _reset(self, td):
        self.position = torch.zeros(2)
        return self._obs(torch.tensor([1, 0, 0]))

    def _step(self, td):
        self.position = self.position + td["push"]
        out = self._obs(td["gear"])
        return out.update(reward=self.position.sum(0, keepdim=True), done=torch.zeros(1, dtype=torch.bool))

    def _set_seed(self, seed):
        pass


def test_nested_observations_several_actions_and_nested_info(new_id):
    env_id = new_id()
    EnvBase.register_gym(env_id, entry_point=_TwoActions, to_numpy=True)
    env = gymnasium.make(env_id)
    assert env.action_space == gymnasium.spaces.Dict(
        push=gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32), gear=gymnasium.spaces.Discrete(3))
    assert env.observation_space["sensors"]["gear"] == gymnasium.spaces.Discrete(3)
    obs, _ = env.reset()
    assert env.observation_space.contains(obs) and obs["sensors"]["gear"] == 0
    obs, reward, terminated, truncated, _ = env.step({"push": np.array([0.5, 0.25], np.float32), "gear": 2})
    assert obs["position"].tolist() == [0.5, 0.25] and obs["sensors"]["gear"] == 2 and reward == 0.75
    assert (terminated, truncated) == (False, False)  # no truncated entry: False

    moved = gymnasium.make(env_id, info_keys=[("sensors", "heat")])
    assert set(moved.observation_space["sensors"].spaces) == {"gear"}
    moved.reset()
    obs, _, _, _, info = moved.step(moved.action_space.sample() | {"push": np.ones(2, np.float32)})
    assert set(obs["sensors"]) == {"gear"} and info == {"sensors": {"heat": np.array([2.0], np.float32)}}


def test_refused_arguments(new_id):
    with pytest.raises(ValueError, match="backend='gym'"):
        GymEnv.register_gym(new_id(), env_name="Pendulum-v1", backend="gym")
    with pytest.raises(ValueError, match="autoreset=True"):
        GymEnv.register_gym(new_id(), env_name="Pendulum-v1", autoreset=True)
    with pytest.raises(ValueError, match="apply_api_compatibility=True"):
        GymEnv.register_gym(new_id(), env_name="Pendulum-v1", apply_api_compatibility=True)
    with pytest.raises(ValueError, match="entry_point="):
        EnvBase.register_gym(new_id())
    env_id = new_id()
    GymEnv.register_gym(env_id, env_name="Pendulum-v1", backend="gymnasium", autoreset=False)
    assert env_id in gymnasium.registry


def test_same_values_as_torchrl_register_gym(new_id):
    torchrl_gym = pytest.importorskip("torchrl.envs.libs.gym")
    reap_id, torchrl_id = new_id("reap"), new_id("torchrl")
    GymEnv.register_gym(reap_id, env_name="Pendulum-v1")
    torchrl_gym.GymEnv.register_gym(torchrl_id, env_name="Pendulum-v1")
    ours, theirs = gymnasium.make(reap_id), gymnasium.make(torchrl_id)
    assert ours.action_space == theirs.action_space
    assert ours.observation_space == theirs.observation_space
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TorchRL's tensor rewards and flags
        assert torch.equal(ours.reset(seed=2)[0]["observation"], theirs.reset(seed=2)[0]["observation"])
        for action in PENDULUM_ACTIONS[:5]:
            obs, reward, terminated, _, _ = ours.step(torch.as_tensor(action))
            t_obs, t_reward, t_terminated, _, _ = theirs.step(torch.as_tensor(action))
            assert torch.equal(obs["observation"], t_obs["observation"])
            assert reward == t_reward.item() and terminated == t_terminated.item()


def test_seed_method_as_torchrl_wrapper(new_id):
    env_id = new_id()
    GymEnv.register_gym(env_id, env_name="Pendulum-v1", to_numpy=True)
    env = gymnasium.make(env_id)
    env.unwrapped.seed(4)
    assert np.array_equal(env.reset()[0]["observation"], env.reset(seed=4)[0]["observation"])
