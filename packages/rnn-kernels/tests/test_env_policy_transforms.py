"""The transforms a recurrent policy needs on its env, as TorchRL 0.14.1 adds them: the env's
``policy=`` keyword, ``get_primers_from_module`` and ``get_env_transforms_from_module``; side by
side with TorchRL where it is installed (the bench group)."""

from __future__ import annotations

import warnings

import pytest
import torch
from tensordict.nn import TensorDictSequential

from reap import GRUModule, GymEnv, LSTMModule
from reap.collectors.policy_transforms import env_with_policy_transforms
from reap.envs.transforms import Compose, InitTracker, TensorDictPrimer
from reap.modules.utils import get_env_transforms_from_module, get_primers_from_module

KEYS = {"in_keys": ["observation", "recurrent_state", "is_init"], "out_keys": ["features", ("next", "recurrent_state")]}


def gru(cls=GRUModule):
    return cls(input_size=4, hidden_size=8, **KEYS)


def names(env):
    """The class names of the transforms ``env`` has (one transform, or a Compose of them)."""
    transform = getattr(env, "transform", None)
    if transform is None:
        return []
    return [type(t).__name__ for t in (transform if type(transform).__name__ == "Compose" else [transform])]


def test_env_policy_keyword_appends_what_the_policy_needs():
    env = GymEnv("CartPole-v1", policy=gru())
    assert names(env) == ["InitTracker", "TensorDictPrimer"]
    td = env.reset()
    assert td["recurrent_state"].shape == (1, 8) and bool(td["is_init"].all())
    # a module that is not recurrent still gets the InitTracker (TorchRL's rule); a function nothing
    assert names(GymEnv("CartPole-v1", policy=torch.nn.Linear(4, 2))) == ["InitTracker"]
    assert type(GymEnv("CartPole-v1", policy=lambda td: td)) is GymEnv
    # nothing twice: an env that already has them is returned as it is
    assert env_with_policy_transforms(env, gru()) is env


def test_primers_and_env_transforms_from_module():
    lstm = LSTMModule(input_size=4, hidden_size=8, in_key="observation", out_key="features")
    assert isinstance(get_primers_from_module(gru()), TensorDictPrimer)
    both = get_primers_from_module(TensorDictSequential(gru(), lstm))
    assert isinstance(both, Compose) and len(both) == 2
    with pytest.warns(UserWarning, match="no primers found"):
        assert get_primers_from_module(torch.nn.Linear(2, 2)) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_primers_from_module(torch.nn.Linear(2, 2), warn=False) is None
    assert isinstance(get_env_transforms_from_module(torch.nn.Linear(2, 2)), InitTracker)
    transforms = get_env_transforms_from_module(TensorDictSequential(gru(), lstm), init_key="start")
    assert [type(t).__name__ for t in transforms] == ["InitTracker", "Compose"]  # nested, as TorchRL's
    assert [type(t).__name__ for t in transforms[1]] == ["TensorDictPrimer", "TensorDictPrimer"]
    assert transforms[0].init_key == "start"
    env = GymEnv("CartPole-v1").append_transform(transforms)  # a reap env takes reap's Compose
    assert {"start", "recurrent_state", "recurrent_state_h", "recurrent_state_c"} <= set(env.reset().keys())


def test_strict_false_leaves_a_failing_primer_out():
    class Broken(torch.nn.Module):
        def make_tensordict_primer(self):
            raise RuntimeError("needs input_shape")

    policy = torch.nn.Sequential(Broken(), gru())
    with pytest.raises(RuntimeError, match="needs input_shape"):
        get_primers_from_module(policy)
    with pytest.warns(UserWarning, match="Broken: needs input_shape"):
        assert isinstance(get_primers_from_module(policy, strict=False), TensorDictPrimer)


def test_same_as_torchrl():
    torchrl_envs = pytest.importorskip("torchrl.envs")
    torchrl_modules = pytest.importorskip("torchrl.modules")
    from torchrl.modules.utils import get_env_transforms_from_module as their_transforms

    ours = GymEnv("CartPole-v1", policy=gru())
    theirs = torchrl_envs.GymEnv("CartPole-v1", policy=gru(torchrl_modules.GRUModule))
    assert names(ours) == names(theirs)
    assert set(ours.reset().keys()) == set(theirs.reset().keys())
    linear = torch.nn.Linear(4, 2)
    assert names(GymEnv("CartPole-v1", policy=linear)) == names(torchrl_envs.GymEnv("CartPole-v1", policy=linear))
    assert [type(t).__name__ for t in get_env_transforms_from_module(gru())] == [
        type(t).__name__ for t in their_transforms(gru(torchrl_modules.GRUModule))]
