"""``Choice`` (TorchRL's spec of a value drawn from one of several specs or non-tensor values),
side by side with TorchRL's where it is installed, and in an env that a collector drives."""

import pytest
import torch
from tensordict import NonTensorData, NonTensorStack

import reap.specs
from reap.collectors import Collector
from reap.envs import EnvBase
from reap.envs.utils import check_env_specs
from reap.specs import Bounded, Categorical, Choice, Composite, Unbounded

CHOICES = {
    "specs": (lambda m: [m.Bounded(0, 2.5, ()), m.Bounded(10, 12, ())], torch.tensor(11.0), torch.tensor(9.0)),
    "non-tensor": (lambda m: [NonTensorData("a"), NonTensorData("b")], NonTensorData("b"), NonTensorData("c")),
    "non-tensor stacks": (lambda m: [NonTensorStack("a", "b", "c"), NonTensorStack("d", "e", "f")],
                          NonTensorStack("a", "b", "c"), NonTensorStack("a", "c", "b")),
}


@pytest.mark.parametrize("kind", list(CHOICES))
def test_draws_one_of_the_choices(kind):
    build, inside, outside = CHOICES[kind]
    spec = Choice(build(reap.specs))
    torch.manual_seed(0)
    drawn = [spec.rand() for _ in range(20)]
    assert all(spec.is_in(value) for value in drawn)
    assert spec.is_in(inside) and not spec.is_in(outside)
    assert spec.num_choices == 2 and spec.clone() == spec
    assert spec.is_in(spec.zero()) and spec.is_in(spec.one())
    if kind != "specs":  # the values themselves, the first one for zero()
        assert spec.zero().tolist() == build(reap.specs)[0].tolist()


@pytest.mark.parametrize("kind", list(CHOICES))
def test_values_are_torchrls_under_the_same_seed(kind):
    torchrl_data = pytest.importorskip("torchrl.data")
    build, _, _ = CHOICES[kind]
    ours, theirs = Choice(build(reap.specs)), torchrl_data.Choice(build(torchrl_data))
    for spec in (ours, theirs):
        torch.manual_seed(1)
        values = [spec.rand() for _ in range(8)]
        spec.drawn = [v.tolist() if isinstance(v, torch.Tensor) else v.tolist() for v in values]
    assert ours.drawn == theirs.drawn
    assert (ours.shape, ours.dtype, ours.device) == (theirs.shape, theirs.dtype, theirs.device)
    assert ours.to_torchrl() == theirs


def test_shape_ops_and_enumeration_follow_every_choice():
    spec = Choice([Categorical(3), Categorical(3)])
    assert spec.cardinality() == 6 and [v.item() for v in spec.enumerate()] == [0, 1, 2, 0, 1, 2]
    assert spec.expand(2, 4).shape == (2, 4) and spec.expand(2, 4).rand().shape == (2, 4)
    assert spec.unsqueeze(0).shape == (1,) and spec.unsqueeze(0).squeeze(0).shape == ()
    assert spec.expand(4)[1:3].shape == (2,) and len(spec.expand(3).unbind(0)) == 3
    words = Choice([NonTensorData("left"), NonTensorData("right")])
    assert words.cardinality() == 2 and words.dtype is None and words.expand(3).rand().batch_size == (3,)
    with pytest.raises(NotImplementedError, match="Choice cannot project a value"):
        Choice([Bounded(0.0, 1.0, (1,)), Bounded(2.0, 3.0, (1,))]).project(torch.tensor([1.5]))


@pytest.mark.parametrize("choices,error,match", [
    ("abc", TypeError, "must be a list"),
    (["abc"], TypeError, "must be either a TensorSpec, NonTensorData, or NonTensorStack"),
    ([Bounded(0, 1, (1,)), Categorical(10, (1,))], TypeError, "must be the same type"),
    ([Categorical(10, (1,)), Categorical(10, (2,))], ValueError, "must have the same shape"),
    ([Categorical(10, (2,), dtype=torch.long), Categorical(10, (2,), dtype=torch.float)], ValueError,
     "must have the same dtype"),
    ([], ValueError, "must hold at least one"),
])
def test_bad_choices_are_named(choices, error, match):
    with pytest.raises(error, match=match):
        Choice(choices)


class GoalEnv(EnvBase):
    """A goal drawn among words and a level among two ranges, at each reset and step."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(
            goal=Choice([NonTensorData("left"), NonTensorData("right")]),
            level=Choice([Bounded(0.0, 1.0, (1,)), Bounded(10.0, 11.0, (1,))]),
            observation=Unbounded((1,)))
        self.action_spec = Categorical(2, shape=(1,))
        self.reward_spec = Unbounded((1,))

    def _reset(self, tensordict):
        out = self.observation_spec.rand()
        out["observation"] = torch.zeros(1)
        return out

    def _step(self, tensordict):
        out = self.observation_spec.rand()
        out["observation"] = tensordict["observation"] + 1
        out["reward"] = torch.ones(1)
        out["done"] = out["terminated"] = out["observation"] > 2
        return out

    def _set_seed(self, seed):
        torch.manual_seed(seed)


def test_an_env_with_choices_rolls_out_and_collects():
    env = GoalEnv()
    check_env_specs(env)
    rollout = env.rollout(3)
    assert set(rollout["next", "goal"]) <= {"left", "right"}
    assert all(env.observation_spec["level"].is_in(level) for level in rollout["level"])
    with Collector(GoalEnv, None, frames_per_batch=4, total_frames=8) as collector:
        batches = list(collector)
    assert collector.path == "tensordict"  # non-tensor values: one TensorDict per step
    assert [len(batch["goal"]) for batch in batches] == [4, 4]
    assert all(set(batch["goal"]) <= {"left", "right"} for batch in batches)
