"""Envs that reset themselves (``auto_reset=True``: ``AutoResetEnv``/``AutoResetTransform``),
side by side with TorchRL's where it is installed, in rollouts, batched envs and collectors."""

import functools

import pytest
import torch

from reap.collectors import Collector
from reap.envs import SerialEnv, StepCounter, TransformedEnv
from reap.envs.transforms import AutoResetEnv, AutoResetTransform
from reap_testing.looping import LoopingEnv, looping_env_class

NAN = float("nan")


def as_lists(rollout):
    keys = [("next", "count"), ("next", "parity"), ("next", "odd"), ("next", "done"), "count"]
    return {key: rollout[key].flatten(1).tolist() for key in keys}


def test_a_done_steps_observations_are_filled_and_kept_for_the_reset():
    env = LoopingEnv(auto_reset=True)
    assert type(env) is AutoResetEnv and isinstance(env.transform, AutoResetTransform)
    got = as_lists(env.rollout(6, break_when_any_done=False))
    # env 0 is done every 2 steps, env 1 every 3: NaN / -1 / False in "next", zeros at the next root
    assert got[("next", "count")][0] == pytest.approx([1, NAN, 1, NAN, 1, NAN], nan_ok=True)
    assert got[("next", "count")][1] == pytest.approx([1, 2, NAN, 1, 2, NAN], nan_ok=True)
    assert got[("next", "parity")][0] == [1, -1, 1, -1, 1, -1]
    assert got[("next", "odd")][1] == [True, False, False, True, False, False]
    assert got["count"] == [[0, 1, 0, 1, 0, 1], [0, 1, 2, 0, 1, 2]]
    first = env.rollout(6)  # break_when_any_done: stops at env 0's first done
    assert first.shape == (2, 2) and not first["done"].any()


def test_replace_false_keeps_what_the_env_returned():
    env = LoopingEnv(auto_reset=True, auto_reset_replace=False)
    rollout = env.rollout(4, break_when_any_done=False)
    assert rollout["next", "count"][0].flatten().tolist() == [1, 0, 1, 0]
    assert rollout["count"][0].flatten().tolist() == [0, 1, 0, 1]


def test_fill_values_are_chosen_per_dtype():
    transform = AutoResetTransform(fill_float=-5.0, fill_int=7, fill_bool=True)
    rollout = AutoResetEnv(LoopingEnv(), transform).rollout(2, break_when_any_done=False)
    assert rollout["next", "count"][0].flatten().tolist() == [1.0, -5.0]
    assert rollout["next", "parity"][0].flatten().tolist() == [1, 7]
    assert rollout["next", "odd"][0].flatten().tolist() == [True, True]
    keep = AutoResetEnv(LoopingEnv(), AutoResetTransform(fill_float=None)).rollout(2, break_when_any_done=False)
    assert keep["next", "count"][0].flatten().tolist() == [1.0, 0.0] and keep["next", "parity"][0, 1].item() == -1


@pytest.mark.parametrize("kwargs,match", [
    ({"replace": "yes"}, "replace must be True, False or None, got 'yes'"),
    ({"fill_float": "inf"}, "fill_float must be a float or None, got 'inf'"),
    ({"fill_int": 1.5}, "fill_int must be a int or None, got 1.5"),
    ({"fill_int": True}, "fill_int must be a int or None, got True"),
    ({"fill_bool": 0}, "fill_bool must be a bool or None, got 0"),
])
def test_bad_fill_values_are_named(kwargs, match):
    with pytest.raises(TypeError, match=match):
        AutoResetTransform(**kwargs)


def test_rollouts_are_torchrls():
    torchrl_envs = pytest.importorskip("torchrl.envs")
    torchrl_data = pytest.importorskip("torchrl.data")
    theirs_class = looping_env_class(torchrl_envs.EnvBase, torchrl_data.Composite, torchrl_data.Unbounded,
                                     torchrl_data.Categorical)
    def policy(td):
        return td.set("action", torch.ones(2, 1, dtype=torch.int64))

    for kwargs in ({}, {"auto_reset_replace": False}):
        ours = LoopingEnv(auto_reset=True, **kwargs).rollout(7, policy, break_when_any_done=False)
        theirs = theirs_class(auto_reset=True, **kwargs).rollout(7, policy, break_when_any_done=False)
        assert type(theirs_class(auto_reset=True)).__name__ == "AutoResetEnv"
        for key in theirs.keys(True, True):
            torch.testing.assert_close(ours[key], theirs[key], equal_nan=True, msg=str(key))


def test_in_a_transformed_env_and_a_serial_env():
    env = TransformedEnv(LoopingEnv(auto_reset=True), StepCounter())
    assert type(env.base_env) is AutoResetEnv
    rollout = env.rollout(4, break_when_any_done=False)
    assert rollout["count"][1].flatten().tolist() == [0, 1, 2, 0]
    assert rollout["next", "step_count"][0].flatten().tolist() == [1, 2, 1, 2]  # the counter restarts too
    serial = SerialEnv(2, functools.partial(LoopingEnv, auto_reset=True))
    rollout = serial.rollout(3, break_when_any_done=False)
    assert rollout.shape == (2, 2, 3)
    assert rollout["count"][:, 0].flatten(1).tolist() == [[0, 1, 0], [0, 1, 0]]


def test_a_collector_gives_the_filled_steps_and_the_kept_resets():
    with Collector(functools.partial(LoopingEnv, auto_reset=True), None, frames_per_batch=8,
                   total_frames=8) as collector:
        (batch,) = list(collector)
    assert collector.path == "tensordict"
    assert batch["count"].flatten(1).tolist() == [[0, 1, 0, 1], [0, 1, 2, 0]]
    assert batch["next", "count"][1].flatten().tolist() == pytest.approx([1, 2, NAN, 1], nan_ok=True)
    assert batch["collector", "traj_ids"].tolist() == [[0, 0, 2, 2], [1, 1, 1, 3]]


def test_the_transform_needs_its_env():
    with pytest.raises(RuntimeError, match="The AutoResetTransform container must be of type AutoResetEnv"):
        TransformedEnv(LoopingEnv(), AutoResetTransform()).rollout(2)
    with pytest.raises(RuntimeError, match="Cannot insert a transform in AutoResetEnv"):
        LoopingEnv(auto_reset=True).insert_transform(0, StepCounter())
