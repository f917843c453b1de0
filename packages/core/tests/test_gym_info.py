"""Info-dict readers on GymEnv: gymnasium's ``info`` entries as observations, as TorchRL reads them."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from reap import Collector
from reap.envs import GymEnv, GymWrapper, default_info_dict_reader
from reap.envs.gym_like import BaseInfoDictReader
from reap.specs import Unbounded


class InfoEnv(gym.Env):
    """Four steps an episode; the info has a float, a vector and a private entry (a float only at reset)."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), {"x_position": np.float64(0.0)}

    def step(self, action):
        self.t += 1
        info = {"x_position": np.float64(self.t * 0.5 + int(action)), "counts": np.array([self.t, 2 * self.t]),
                "_private": 1}
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), 1.0, self.t >= 4, False, info


gym.register("ReapTest/Info-v0", entry_point=InfoEnv)


def _rollout(env, steps=6):
    torch.manual_seed(0)
    actions = [env.action_spec.rand() for _ in range(steps)]
    return env.rollout(steps, actions=actions, tensordict=env.reset(seed=1), auto_reset=False,
                       break_when_any_done=False)


@pytest.mark.parametrize("reader", ["all", "keys"])
def test_info_entries_match_torchrl(reader):
    torchrl_envs = pytest.importorskip("torchrl.envs")
    spec = {"x_position": Unbounded((), dtype=torch.float64)}
    ours, theirs = GymEnv("ReapTest/Info-v0"), torchrl_envs.GymEnv("ReapTest/Info-v0")
    if reader == "all":  # every public key, the specs learnt from a first reset and step
        assert ours.set_info_dict_reader() is ours
        theirs.set_info_dict_reader()
    else:
        ours.set_info_dict_reader(default_info_dict_reader(["x_position"], spec=spec))
        theirs.set_info_dict_reader(torchrl_envs.default_info_dict_reader(
            ["x_position"], spec={"x_position": spec["x_position"].to_torchrl()}))
    assert list(ours.observation_spec.keys()) == list(theirs.observation_spec.keys())
    for key in ours.observation_spec.keys():
        mine, other = ours.observation_spec[key], theirs.observation_spec[key]
        assert (mine.shape, mine.dtype) == (other.shape, other.dtype), key
    a, b = _rollout(ours), _rollout(theirs)
    assert set(a.keys(True, True)) == set(b.keys(True, True)) and "_private" not in a.keys()
    for key in a.keys(True, True):
        assert torch.equal(a.get(key), b.get(key)), key
    assert a["next", "x_position"][:4].tolist() != [0.0] * 4 and a["x_position"][0].item() == 0.0


def test_a_vector_env_reads_each_sub_envs_info_and_a_collector_batches_it():
    env = GymWrapper(gym.make_vec("ReapTest/Info-v0", num_envs=2, vectorization_mode="sync",
                                  vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.DISABLED}))
    env.set_info_dict_reader()
    assert env.observation_spec["x_position"].shape == (2,) and env.observation_spec["counts"].shape == (2, 2)
    with Collector(env, None, frames_per_batch=12, total_frames=12) as collector:
        batch = next(iter(collector))
    counts, done = batch["next", "counts"][..., 0], batch["next", "done"][..., 0]
    assert counts.shape == (2, 6) and counts[0].tolist()[:4] == [1, 2, 3, 4] and done[:, 3].all()
    assert torch.equal(batch["counts"][:, 1:, 0], counts[:, :-1] * ~done[:, :-1])  # zeros after a reset


def test_readers_refuse_what_they_cannot_read():
    env = GymEnv("ReapTest/Info-v0")
    with pytest.raises(TypeError, match="set_info_dict_reader: expected a BaseInfoDictReader"):
        env.set_info_dict_reader(lambda info, td: td)
    with pytest.raises(ValueError, match="a sequence of specs must have one spec per key"):
        default_info_dict_reader(["a", "b"], spec=[Unbounded(())])
    with pytest.raises(KeyError, match="info has no 'counts' and the reader no spec for it"):
        default_info_dict_reader(["counts"], spec={})({"x": 1}, TensorDict())

    class Extra(BaseInfoDictReader):
        info_spec = None

        def __call__(self, info_dict, tensordict):
            return tensordict.set("undeclared", torch.zeros(()))

    sneaky = GymEnv("ReapTest/Info-v0").set_info_dict_reader(default_info_dict_reader(["x_position"]))
    sneaky.info_dict_reader.append(Extra())
    with pytest.raises(KeyError, match="an info reader wrote 'undeclared', which its info_spec does not declare"):
        sneaky.reset()


def _doubling(base):
    """``base`` (reap's GymEnv or TorchRL's) with TorchRL's GymLikeEnv hooks overridden:
    observations doubled, rewards times ten."""

    class Doubled(base):
        def read_obs(self, observations):
            out = super().read_obs(observations)
            out["observation"] = out["observation"] * 2
            return out

        def read_reward(self, reward):
            return reward * 10

    return Doubled


_Doubled = _doubling(GymEnv)


class _Flipped(GymEnv):
    """The action flipped on its way to gymnasium; every end reported as a truncation."""

    def read_action(self, action):
        return 1 - super().read_action(action)

    def read_done(self, terminated=None, truncated=None, done=None):
        return terminated & False, terminated | truncated, done, False


@pytest.mark.parametrize("num_envs", [None, 2])
def test_read_hooks_a_subclass_overrides_run_where_torchrl_runs_them(num_envs):
    push = torch.tensor([0, 1]) if num_envs is None else torch.tensor([[0, 1]] * 2)
    policy = lambda td: td.set("action", push)  # noqa: E731

    def run(cls, steps=30, policy=policy):
        env = cls("CartPole-v1", num_envs=num_envs)
        env.set_seed(0)
        return env.rollout(steps, policy, break_when_any_done=False)

    plain, doubled = run(GymEnv), run(_Doubled)
    assert torch.equal(doubled["observation"], plain["observation"] * 2)
    assert torch.equal(doubled["next", "observation"], plain["next", "observation"] * 2)
    assert torch.equal(doubled["next", "reward"], plain["next", "reward"] * 10)
    pulled = run(GymEnv, policy=lambda td: td.set("action", 1 - push))
    flipped = run(_Flipped)
    assert torch.equal(flipped["next", "observation"], pulled["next", "observation"])
    assert pulled["next", "terminated"].any() and not flipped["next", "terminated"].any()  # read_done's flags
    assert torch.equal(flipped["next", "truncated"], pulled["next", "done"])
    with Collector(_Doubled("CartPole-v1", num_envs=num_envs), policy, frames_per_batch=8, total_frames=8) as c:
        assert c.path == "arrays" and next(iter(c))["next", "reward"].eq(10).all()


def test_read_hooks_give_torchrl_values():
    torchrl_envs = pytest.importorskip("torchrl.envs")

    TorchRLDoubled = _doubling(torchrl_envs.GymEnv)  # noqa: N806

    def run(cls):
        env = cls("CartPole-v1")
        env.set_seed(0)
        return env.rollout(5, lambda td: td.set("action", torch.tensor([1, 0])))

    ours, theirs = run(_Doubled), run(TorchRLDoubled)
    for key in ["observation", ("next", "observation"), ("next", "reward")]:
        assert torch.equal(ours[key], theirs[key]), key
