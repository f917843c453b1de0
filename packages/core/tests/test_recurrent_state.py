"""InitTracker, TensorDictPrimer and the collector carrying a policy's ("next", key) output to
the next step's root, zeroed at resets (what recurrent policies need)."""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from reap import Collector, GymEnv, InitTracker, TensorDictPrimer, TransformedEnv
from reap.specs import Unbounded


class Count(torch.nn.Module):
    """The next "memory" is the current one plus 1: it counts steps since the last reset."""

    def forward(self, memory):
        return memory + 1


class Act(torch.nn.Module):
    def forward(self, memory):
        return torch.zeros(memory.shape[:-1], dtype=torch.int64)


def make_env(n):
    env = TransformedEnv(GymEnv("CartPole-v1", num_envs=n, categorical_action_encoding=True), InitTracker())
    return env.append_transform(TensorDictPrimer({"memory": Unbounded(shape=(1,))}, expand_specs=True))


def test_policy_state_is_carried_and_zeroed_at_resets():
    policy = TensorDictSequential(
        TensorDictModule(Count(), in_keys=["memory"], out_keys=[("next", "memory")]),
        TensorDictModule(Act(), in_keys=["memory"], out_keys=["action"]),
    )
    with Collector(make_env(2), policy, frames_per_batch=60, total_frames=120) as collector:
        batches = list(collector)
    for batch in batches:
        is_init = batch["is_init"][..., 0]
        assert is_init[:, 1:].any()  # always pushing left: CartPole falls within ~10 steps
        assert (batch["memory"][is_init] == 0).all()
        torch.testing.assert_close(batch["next", "memory"], batch["memory"] + 1)
        assert not batch["next", "is_init"].any()
    first, second = batches
    go_on = ~second["is_init"][:, 0, 0]
    torch.testing.assert_close(second["memory"][:, 0][go_on], first["next", "memory"][:, -1][go_on])


def test_init_tracker_and_primer_in_rollout_and_reset():
    env = make_env(3)
    td = env.reset()
    assert td["is_init"].all() and (td["memory"] == 0).all() and td["memory"].shape == (3, 1)


def test_primer_bad_arguments():
    with pytest.raises(ValueError, match="The values of the primers must be a subtype of the TensorSpec class"):
        TensorDictPrimer({"a": 3})
    with pytest.raises(ValueError, match="random to True and providing a default_value are incompatible"):
        TensorDictPrimer({"a": Unbounded(shape=(1,))}, random=True, default_value=1.0)
    with pytest.raises(RuntimeError, match="expand_specs wasn't specified"):  # batch dims missing, as TorchRL
        TransformedEnv(GymEnv("CartPole-v1", num_envs=2), TensorDictPrimer({"a": Unbounded(shape=(1,))}))
    with pytest.raises(ValueError, match="init_key can only be of type str"):
        InitTracker(init_key=("a", "b"))


def test_rollout_carries_the_policy_state():
    policy = TensorDictSequential(
        TensorDictModule(Count(), in_keys=["memory"], out_keys=[("next", "memory")]),
        TensorDictModule(Act(), in_keys=["memory"], out_keys=["action"]),
    )
    td = make_env(1).rollout(5, policy)
    steps = td["memory"].shape[-2]
    assert td["memory"].flatten().tolist() == list(range(steps))
    assert td["next", "memory"].flatten().tolist() == list(range(1, steps + 1))
