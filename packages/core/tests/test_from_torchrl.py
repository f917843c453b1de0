"""TorchRL objects in reap: TorchRL's TensorDictPrimer (as its LSTMModule makes it) on a reap env,
TorchRL's other transforms refused with the fix, and reap's RandomPolicy and exploration_type
against TorchRL's (skipped without TorchRL)."""

import re

import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from reap import Collector, GymEnv, InitTracker, RandomPolicy, TensorDictPrimer
from reap.envs.utils import ExplorationType, exploration_type, set_exploration_type

torchrl_envs = pytest.importorskip("torchrl.envs")
torchrl_modules = pytest.importorskip("torchrl.modules")
torchrl_data = pytest.importorskip("torchrl.data")


def test_torchrl_lstm_primer_on_a_reap_env_carries_the_states():
    """The primer TorchRL's LSTMModule makes becomes reap's on append_transform: the states are
    reset to zeros with TorchRL's shapes, carried from step to step in a rollout and a collector,
    and equal to what TorchRL's module computes over the same observations in recurrent mode."""
    torch.manual_seed(0)
    lstm = torchrl_modules.LSTMModule(input_size=3, hidden_size=8, num_layers=2, in_key="observation",
                                      out_key="embed")
    policy = TensorDictSequential(lstm, TensorDictModule(torch.nn.Linear(8, 1), ["embed"], ["action"]))
    env = GymEnv("Pendulum-v1", num_envs=2).append_transform(InitTracker())
    env = env.append_transform(lstm.make_tensordict_primer())
    primer = env.transform[-1]
    assert type(primer) is TensorDictPrimer
    assert primer.default_value == {"recurrent_state_h": 0.0, "recurrent_state_c": 0.0}
    theirs = torchrl_envs.GymEnv("Pendulum-v1").append_transform(lstm.make_tensordict_primer()).reset()
    reset = env.reset()
    for key in ("recurrent_state_h", "recurrent_state_c"):
        assert reset[key].shape == (2, *theirs[key].shape) == (2, 2, 8)
        assert not reset[key].any()

    td = env.rollout(6, policy)
    assert td["next", "recurrent_state_h"].abs().sum() > 0
    torch.testing.assert_close(td["recurrent_state_h"][:, 1:], td["next", "recurrent_state_h"][:, :-1])
    with torchrl_modules.set_recurrent_mode(True):
        again = lstm(td.select("observation", "is_init", "recurrent_state_h", "recurrent_state_c").clone())
    torch.testing.assert_close(again["embed"], td["embed"])

    with Collector(env, policy, frames_per_batch=8, total_frames=8) as collector:
        batch = next(iter(collector))
    assert batch.shape == (2, 4)
    torch.testing.assert_close(batch["recurrent_state_c"][:, 1:], batch["next", "recurrent_state_c"][:, :-1])


def test_torchrl_transforms_reap_cannot_take_say_what_to_use():
    env = GymEnv("Pendulum-v1")
    with pytest.raises(TypeError, match=re.escape(
            "StepCounter is TorchRL's transform; a reap env takes reap's transforms: use "
            "reap's (`from reap.envs import StepCounter`) with the same arguments")):
        env.append_transform(torchrl_envs.StepCounter())
    with pytest.raises(TypeError, match="insert_transform: Timer is TorchRL's transform; .* reap has no "
                                        "transform of that name"):
        env.append_transform(InitTracker()).insert_transform(0, torchrl_envs.Timer())
    with pytest.raises(ValueError, match="expected a transform or a callable, but received an object of type"):
        env.append_transform(3)
    two_defaults = torchrl_envs.TensorDictPrimer(
        {"a": torchrl_data.Unbounded(shape=(3,)), "b": torchrl_data.Unbounded(shape=(3,))},
        default_value={"a": 0.0, "b": 1.0})
    td = env.append_transform(two_defaults).reset()  # converted, with a default per key
    assert (td["a"] == 0).all() and (td["b"] == 1).all()
    multi_one_hot = torchrl_envs.TensorDictPrimer({"a": torchrl_data.MultiOneHot([2, 3])})
    with pytest.raises(TypeError, match="has a MultiOneHot spec at 'a', which reap does not convert"):
        env.append_transform(multi_one_hot)


def test_random_policy_and_exploration_type_match_torchrl():
    env, theirs = GymEnv("Pendulum-v1"), torchrl_envs.GymEnv("Pendulum-v1")
    torch.manual_seed(0)
    mine = RandomPolicy(env.action_spec)(env.reset())["action"]
    torch.manual_seed(0)
    expected = torchrl_modules.RandomPolicy(theirs.action_spec)(theirs.reset())["action"]
    assert torch.equal(mine, expected)
    with Collector(GymEnv("Pendulum-v1", num_envs=2), RandomPolicy(), frames_per_batch=8,
                   total_frames=8) as collector:  # the collector gives it the env's spec
        action = next(iter(collector))["action"]
    assert action.shape == (2, 4, 1) and action.abs().max() <= 2 and action.unique().numel() == 8
    with pytest.raises(RuntimeError, match=r"RandomPolicy has no action_spec: pass RandomPolicy\(env.action_spec\)"):
        RandomPolicy()(env.reset())
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        assert exploration_type() is torchrl_envs.exploration_type() is ExplorationType.DETERMINISTIC


def test_a_torchrl_env_is_refused_with_the_fix_wherever_reap_takes_an_env():
    """A TorchRL env is an nn.Module, so callable: it is named as TorchRL's, never called as a
    constructor (that raised TorchRL's forward() error about ParallelEnv)."""
    from reap import EnvCreator, SerialEnv

    env = torchrl_envs.GymEnv("CartPole-v1")
    fix = (r"a TorchRL env \(torchrl\.envs\.EnvBase\); reap's collectors and batched envs step reap envs: build it "
           r"from reap\.envs \(GymEnv, TransformedEnv, \.\.\. under TorchRL's names\), or make GymEnv subclass "
           r"reap\.envs\.EnvBase instead of TorchRL's")
    with pytest.raises(TypeError, match=r"^Collector: create_env_fn is GymEnv, " + fix):
        Collector(env, None, frames_per_batch=4)
    with pytest.raises(TypeError, match=r"^Collector: create_env_fn returned GymEnv, " + fix):
        Collector(lambda: env, None, frames_per_batch=4)
    with pytest.raises(TypeError, match=r"^SerialEnv: create_env_fn is GymEnv, " + fix):
        SerialEnv(2, env)
    with pytest.raises(TypeError, match=r"^SerialEnv: create_env_fn returned GymEnv, " + fix):
        SerialEnv(2, lambda: env)
    with pytest.raises(TypeError, match=r"^EnvCreator: create_env_fn is GymEnv, " + fix):
        EnvCreator(env)
    env.close()
