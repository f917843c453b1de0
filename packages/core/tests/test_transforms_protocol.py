"""TorchRL's ``Transform`` protocol on reap: a user's transform written for TorchRL, ``Compose``,
``parent``/``container``, ``clone``, modules and state dicts, and ``TransformedEnv``'s own API.

Each user transform is one class body built on TorchRL's ``Transform`` and on reap's, run on the
same seeded env under the same actions, and compared entry by entry (TorchRL side skipped
without TorchRL); the plain tests check the same behaviour against values computed here.
"""

import os
import warnings

import pytest
import torch
from tensordict import TensorDict
from torch import nn

import reap
from reap.envs.transforms import (
    Compose,
    InitTracker,
    ObservationNorm,
    RewardScaling,
    RewardSum,
    StepCounter,
    Transform,
    TransformedEnv,
)
from reap.specs import Unbounded

ACTIONS = [torch.tensor([v]) for v in torch.linspace(-2, 2, 8).tolist()]


def user_transforms(base, unbounded):
    """Transforms written as TorchRL's docs teach, on ``base`` (TorchRL's or reap's ``Transform``)."""

    class AddOneToObs(base):  # _apply_transform only: steps change, resets do not (TorchRL's rule)
        def __init__(self):
            super().__init__(in_keys=["observation"], out_keys=["observation"])

        def _apply_transform(self, obs):
            return obs + 1

    class SquaredObs(base):  # a new entry, declared in the spec, also written at reset
        def __init__(self):
            super().__init__(in_keys=["observation"], out_keys=["obs_sq"])

        def _apply_transform(self, obs):
            return obs.pow(2)

        def _reset(self, tensordict, tensordict_reset):
            return self._call(tensordict_reset)

        def transform_observation_spec(self, observation_spec):
            observation_spec["obs_sq"] = unbounded(shape=observation_spec["observation"].shape)
            return observation_spec

    class AddActionToObs(base):  # _step reads the root (the action)
        def _step(self, tensordict, next_tensordict):
            next_tensordict["observation"] = next_tensordict["observation"] + tensordict["action"]
            return next_tensordict

    class HalveAction(base):  # acts on the action before the env steps
        def __init__(self):
            super().__init__(in_keys_inv=["action"], out_keys_inv=["action"])

        def _inv_apply_transform(self, action):
            return action / 2

    return {"AddOneToObs": AddOneToObs, "SquaredObs": SquaredObs, "AddActionToObs": AddActionToObs,
            "HalveAction": HalveAction}


REAP_USER = user_transforms(Transform, Unbounded)


def reap_rollout(transform, actions=ACTIONS):
    env = TransformedEnv(reap.GymEnv("Pendulum-v1"), transform)
    env.set_seed(0)  # resets the base env with the seed, as TorchRL's
    return env.rollout(len(actions), actions=actions, break_when_any_done=False)


def raw_rollout(actions=ACTIONS):
    env = reap.GymEnv("Pendulum-v1")
    env.set_seed(0)
    return env.rollout(len(actions), actions=actions, break_when_any_done=False)


def test_a_transform_written_for_torchrl_runs_on_reap():
    raw = raw_rollout()
    add_one = reap_rollout(REAP_USER["AddOneToObs"]())
    torch.testing.assert_close(add_one["next", "observation"], raw["next", "observation"] + 1, rtol=0, atol=0)
    assert torch.equal(add_one["observation"][0], raw["observation"][0])  # no _reset: the reset is untouched
    squared = reap_rollout(REAP_USER["SquaredObs"]())
    assert torch.equal(squared["obs_sq"], raw["observation"].pow(2))
    assert torch.equal(squared["next", "obs_sq"], raw["next", "observation"].pow(2))
    with_action = reap_rollout(REAP_USER["AddActionToObs"]())
    assert torch.equal(with_action["next", "observation"], raw["next", "observation"] + torch.stack(ACTIONS))
    halved = reap_rollout(REAP_USER["HalveAction"]())
    assert torch.equal(halved["action"], torch.stack(ACTIONS))  # the policy's action, as written
    assert torch.equal(halved["next", "observation"], raw_rollout([a / 2 for a in ACTIONS])["next", "observation"])


def test_a_transform_that_writes_an_undeclared_entry_is_told_to_declare_it():
    class Sneaky(Transform):
        def _call(self, next_tensordict):
            return next_tensordict.set("extra", torch.zeros(1))

    env = TransformedEnv(reap.GymEnv("Pendulum-v1"), Sneaky())
    env.reset()
    with pytest.raises(KeyError, match="Sneaky wrote 'extra', which no spec declares"):
        env.rand_step()
    with pytest.raises(KeyError, match="The key 'new' is unaccounted for by the transform"):
        TransformedEnv(reap.GymEnv("Pendulum-v1"), Transform(in_keys=["observation"], out_keys=["new"]))


@pytest.mark.parametrize("name", ["AddOneToObs", "SquaredObs", "AddActionToObs", "HalveAction"])
def test_user_transforms_match_torchrl(name):
    torchrl_envs = pytest.importorskip("torchrl.envs")
    torchrl_data = pytest.importorskip("torchrl.data")
    theirs = user_transforms(torchrl_envs.Transform, torchrl_data.Unbounded)[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = torchrl_envs.TransformedEnv(torchrl_envs.GymEnv("Pendulum-v1"), theirs)
        env.set_seed(0)
        expected = env.rollout(len(ACTIONS), actions=ACTIONS, break_when_any_done=False)
    got = reap_rollout(REAP_USER[name]())
    assert set(got.keys(True, True)) == set(expected.keys(True, True))
    for key in expected.keys(True, True):
        assert torch.equal(got[key], expected[key]), key


def test_transforms_are_modules_with_torchrl_state_dicts():
    scaling = RewardScaling(loc=0.5, scale=2.0)
    out = nn.Sequential(scaling)(TensorDict(reward=torch.ones(2, 1), batch_size=[2]))
    assert out["reward"].flatten().tolist() == [2.5, 2.5]
    assert scaling(reward=torch.ones(1)).tolist() == [2.5]  # keyword calls map to the keys (dispatch)
    compose = Compose(scaling, ObservationNorm(0.0, 1.0, in_keys=["observation"]))
    assert list(compose.state_dict()) == ["transforms.0.standard_normal", "transforms.0.loc", "transforms.0.scale",
                                          "transforms.1.standard_normal", "transforms.1.loc", "transforms.1.scale"]
    assert [name for name, _ in compose.named_buffers()][:2] == ["transforms.0.standard_normal", "transforms.0.loc"]
    env = TransformedEnv(reap.GymEnv("Pendulum-v1"), compose)
    assert not compose.training and not scaling.training  # in eval mode, as TorchRL puts them
    state = env.state_dict()
    state["transforms.0.scale"] = torch.tensor(3.0)
    env.load_state_dict(state)
    assert scaling.scale.item() == 3.0


def test_compose_is_a_live_chain():
    first, second = RewardScaling(0.0, 2.0), RewardScaling(0.0, 3.0)
    env = TransformedEnv(reap.GymEnv("Pendulum-v1"), Compose(first, StepCounter(), second))
    assert env.transform[0] is first and env.transform[-1] is second and len(env.transform) == 3
    tail = env.transform[1:]
    assert isinstance(tail, Compose) and tail[-1] is not second
    tail[-1].scale += 1  # a slice holds copies that share the buffers (TorchRL's test)
    assert second.scale.item() == 4.0
    env.transform.append(InitTracker())
    assert "is_init" in env.reset().keys()
    env.transform.insert(0, RewardSum())
    assert [type(t).__name__ for t in env.transform] == ["RewardSum", "RewardScaling", "StepCounter",
                                                          "RewardScaling", "InitTracker"]
    assert "episode_reward" in env.observation_spec.keys()
    assert type(env.transform.pop()) is InitTracker and "is_init" not in env.reset().keys()
    del env.transform[0]
    assert "episode_reward" not in env.observation_spec.keys()
    env.transform[1] = InitTracker()
    assert set(env.reset().keys()) == {"observation", "is_init", "done", "terminated", "truncated"}
    with pytest.raises(ValueError, match=r"Index expected to be between \[-3, 3\] got index=4"):
        env.transform.insert(4, StepCounter())
    with pytest.raises(IndexError, match="pop index -1 is out of range"):
        Compose().pop()


def test_parent_is_the_env_before_and_container_the_env():
    counter, rsum = StepCounter(), RewardSum()
    env = TransformedEnv(reap.GymEnv("Pendulum-v1"), Compose(counter, rsum))
    assert counter.container is env and rsum.container is env
    assert type(counter.parent.transform) is Compose and len(counter.parent.transform) == 0
    parent = rsum.parent
    assert parent is rsum.parent  # cached
    assert [type(t) for t in parent.transform] == [StepCounter] and parent.transform[0] is not counter
    assert parent.base_env is env.base_env and "step_count" in parent.observation_spec.keys()
    env.insert_transform(0, InitTracker())
    assert rsum.parent is not parent and [type(t) for t in rsum.parent.transform] == [InitTracker, StepCounter]
    env.transform = StepCounter()
    assert rsum.parent is None and rsum.container is None  # out of the chain
    assert Transform().parent is None and Transform().container is None


def test_a_transform_joins_one_env_and_clone_gives_a_free_copy():
    norm = ObservationNorm(0.5, 2.0, in_keys=["observation"])
    env = TransformedEnv(reap.GymEnv("Pendulum-v1"), norm)
    with pytest.raises(AttributeError, match=r"already set. Call `transform.clone\(\)`"):
        TransformedEnv(reap.GymEnv("Pendulum-v1"), norm)
    copy = norm.clone()
    assert copy.container is None and copy.loc is norm.loc  # buffers shared, as TorchRL's
    other = TransformedEnv(reap.GymEnv("Pendulum-v1"), copy)
    assert copy.container is other and norm.container is env
    assert norm.to("cpu") is norm


def test_transformed_env_api():
    base = reap.GymEnv("Pendulum-v1")
    counter = StepCounter()
    env = TransformedEnv(base, counter)
    assert env.base_env is base and env.transform is counter  # a single transform stays itself
    env.append_transform(RewardSum())
    assert isinstance(env.transform, Compose) and env.transform[0] is counter  # then a Compose
    assert TransformedEnv(base_env=base).transform.__class__ is Compose
    with pytest.raises(TypeError, match="'env' argument has been removed"):
        TransformedEnv(env=base)
    with pytest.raises(RuntimeError, match="set it on the base env"):
        env.observation_spec = env.observation_spec.clone()
    with pytest.raises(RuntimeError, match="set it on the base env"):
        env.action_spec = Unbounded(shape=(1,))
    with pytest.raises(ValueError, match="expected a transform or a callable, but received an object of type"):
        env.append_transform(3)
    assert env.env_name == "Pendulum-v1"  # other attributes are the base env's (TorchRL's)
    callable_env = TransformedEnv(base, lambda td: td.set("observation", td["observation"] * 0))
    assert not callable_env.reset()["observation"].any()  # a callable runs at reset and step


def test_nested_transformed_envs_are_unwrapped_unless_told_not_to():
    base = reap.GymEnv("Pendulum-v1")
    inner = TransformedEnv(base, RewardScaling(0.0, 1.0))
    env = TransformedEnv(inner, RewardScaling(0.0, 2.0))
    assert env.base_env is base and [t.scale.item() for t in env.transform] == [1.0, 2.0]
    nested = TransformedEnv(inner, RewardScaling(0.0, 2.0), auto_unwrap=False)
    assert nested.base_env is inner and isinstance(nested.transform, RewardScaling)
    reward = torch.ones(1)
    assert nested.transform(reward=reward).item() == 2.0


def test_auto_unwrap_setting_as_torchrl_s(monkeypatch):
    from reap._utils import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env

    monkeypatch.delenv("AUTO_UNWRAP_TRANSFORMED_ENV", raising=False)
    base = reap.GymEnv("Pendulum-v1")
    inner = TransformedEnv(base, RewardScaling(0.0, 1.0))
    assert auto_unwrap_transformed_env() is True and auto_unwrap_transformed_env(allow_none=True) is None
    with set_auto_unwrap_transformed_env(False):
        assert os.environ["AUTO_UNWRAP_TRANSFORMED_ENV"] == "False"  # worker processes started now agree
        assert TransformedEnv(inner, RewardScaling(0.0, 2.0)).base_env is inner
        assert TransformedEnv(inner, RewardScaling(0.0, 2.0), auto_unwrap=True).base_env is base  # the keyword wins
    assert "AUTO_UNWRAP_TRANSFORMED_ENV" not in os.environ and auto_unwrap_transformed_env(allow_none=True) is None

    @set_auto_unwrap_transformed_env(False)
    def nested():
        return TransformedEnv(inner, RewardScaling(0.0, 2.0))

    assert nested().base_env is inner and TransformedEnv(inner).base_env is base
    monkeypatch.setenv("AUTO_UNWRAP_TRANSFORMED_ENV", "0")
    assert TransformedEnv(inner).base_env is inner
    monkeypatch.setenv("AUTO_UNWRAP_TRANSFORMED_ENV", "maybe")
    with pytest.raises(ValueError, match="AUTO_UNWRAP_TRANSFORMED_ENV='maybe' is not a boolean"):
        TransformedEnv(inner)
    with pytest.raises(TypeError, match="mode must be a bool, got 'no'"):
        set_auto_unwrap_transformed_env("no")


class _DoneAtReset(reap.envs.EnvBase):
    """Done as soon as it is reset (an env that needs allow_done_after_reset)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = reap.specs.Composite(observation=Unbounded((1,)))
        self.action_spec = Unbounded((1,))

    def _reset(self, tensordict):
        done = torch.ones(1, dtype=torch.bool)
        return self.full_observation_spec.zero().update(self.full_done_spec.zero()).set("done", done)

    def _step(self, tensordict):
        return self.full_observation_spec.zero().update(self.full_done_spec.zero()).set("reward", torch.zeros(1))

    def _set_seed(self, seed):
        return seed


def test_a_transformed_env_follows_its_base_envs_allow_done_after_reset():
    base = _DoneAtReset(allow_done_after_reset=True)
    env = TransformedEnv(base, StepCounter())
    assert env.reset()["done"].item() and env.allow_done_after_reset  # was refused: the wrapper's own False
    with pytest.raises(RuntimeError, match="_allow_done_after_reset is a read-only property for TransformedEnvs"):
        env.allow_done_after_reset = False
    base.allow_done_after_reset = False
    with pytest.raises(RuntimeError, match="was \\(partially\\) True after a call to reset"):
        env.reset()


def test_failed_append_leaves_the_chain_as_it_was():
    env = TransformedEnv(reap.GymEnv("Pendulum-v1"), StepCounter())
    with pytest.raises(KeyError, match="Key pixels not found in the environment outputs"):
        env.append_transform(reap.ExcludeTransform("pixels"))
    assert [type(t) for t in env.transform] == [StepCounter]
    assert sorted(env.rollout(2)["next"].keys()) == ["done", "observation", "reward", "step_count", "terminated",
                                                     "truncated"]


def test_an_empty_tuple_is_no_keys():
    # TorchRL reads in_keys=() as no keys (an empty tuple cannot name an entry)
    rename = reap.envs.transforms.RenameTransform(in_keys=(), out_keys=(), in_keys_inv=("action",),
                                                  out_keys_inv=("torque",))
    assert rename.in_keys == [] and rename.out_keys == [] and rename.in_keys_inv == ["action"]
    env = TransformedEnv(reap.GymEnv("Pendulum-v1"), rename)
    assert list(env.full_action_spec.keys()) == ["torque"]
    assert env.rollout(2)["torque"].shape == (2, 1)


def test_a_transform_with_none_of_its_in_keys_does_nothing_and_says_so():
    base = reap.GymEnv("Pendulum-v1")
    with pytest.warns(UserWarning, match=r"ObservationNorm: none of its in_keys \['pixels'\] is produced by the env"):
        env = TransformedEnv(reap.GymEnv("Pendulum-v1"), Compose(ObservationNorm(5.0, 2.0, in_keys=["pixels"]),
                                                                 RewardScaling(0.0, 2.0)))
    assert [type(t) for t in env.transform] == [ObservationNorm, RewardScaling]  # kept in the chain, as TorchRL's
    assert env.observation_spec == base.observation_spec
    base.set_seed(0), env.set_seed(0)
    zero = lambda td: td.set("action", torch.zeros(1))  # noqa: E731
    raw, out = base.rollout(3, policy=zero), env.rollout(3, policy=zero)
    torch.testing.assert_close(out["next", "observation"], raw["next", "observation"])
    torch.testing.assert_close(out["next", "reward"], 2 * raw["next", "reward"])


def test_shipped_transforms_run_on_the_arrays_and_subclasses_that_override_a_hook_do_not():
    from reap.envs.transforms.transform import runs_on_arrays

    shipped = [StepCounter(), RewardSum(), InitTracker(), RewardScaling(0.5, 2.0), reap.RewardClipping(0.0, 1.0),
               ObservationNorm(0.0, 1.0, in_keys=["observation"]), reap.VecNorm(in_keys=["observation"]),
               reap.CatFrames(2, -1, in_keys=["observation"]), reap.ClipTransform(in_keys=["observation"], low=0.0),
               reap.DoubleToFloat(in_keys_inv=["action"]), reap.RenameTransform(["a"], ["b"], ["action"], ["act"]),
               reap.ExcludeTransform("a"), reap.SelectTransform("a"), reap.CatTensors(["a"]),
               reap.UnsqueezeTransform(-1, in_keys=["a"]), reap.SqueezeTransform(-1, in_keys=["a"]),
               reap.PermuteTransform([-1, -2], in_keys=["a"]), reap.Stack(["a", "b"], "c"), reap.ToTensorImage(),
               reap.LineariseRewards(["r"]), reap.TargetReturn(1.0), reap.FrameSkipTransform(2), reap.NoopResetEnv(),
               reap.TensorDictPrimer(a=Unbounded(shape=(1,))), reap.DTypeCastTransform(torch.float32, torch.float64)]
    assert [type(t).__name__ for t in shipped if not runs_on_arrays(t)] == []
    assert not runs_on_arrays(REAP_USER["AddOneToObs"]())  # TorchRL's hooks only
    assert not runs_on_arrays(ObservationNorm(0.0, 1.0, in_keys=["observation"], in_keys_inv=["action"]))

    class Shifted(RewardScaling):
        def _apply_transform(self, reward):
            return super()._apply_transform(reward) + 1

    class Renamed(RewardScaling):  # a new name or constructor keeps the array hooks
        def __init__(self):
            super().__init__(0.0, 2.0)

    assert not runs_on_arrays(Shifted(0.0, 2.0)) and runs_on_arrays(Renamed())
    env = TransformedEnv(reap.GymEnv("Pendulum-v1"), Shifted(0.0, 2.0))
    raw = raw_rollout()
    env.set_seed(0)  # resets the base env with the seed, as TorchRL's
    rewards = env.rollout(len(ACTIONS), actions=ACTIONS)["next", "reward"]
    torch.testing.assert_close(rewards, raw["next", "reward"] * 2 + 1, rtol=0, atol=0)
