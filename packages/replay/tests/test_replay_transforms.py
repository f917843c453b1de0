"""Replay-side transforms: ``MultiStepTransform`` (n-step returns as data is extended),
``RandomCropTensorDict`` (random windows of sampled sequences) and ``BurnInTransform``
(recurrent states brought up to date over the first steps of sampled sequences)."""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from reap.envs import GymEnv, SerialEnv
from reap.envs.transforms import (
    BurnInTransform,
    MultiStepTransform,
    RandomCropTensorDict,
    StepCounter,
    TransformedEnv,
)
from reap.postprocs import MultiStep
from reap_replay import LazyTensorStorage, ReplayBuffer


def rollout_chunks(n=6, steps=13):
    env = TransformedEnv(SerialEnv(2, lambda: GymEnv("CartPole-v1")), StepCounter())
    env.set_seed(0)
    torch.manual_seed(0)
    td, chunks = env.reset(), []
    for _ in range(n):
        chunk = env.rollout(max_steps=steps, break_when_any_done=False, tensordict=td, auto_reset=False)
        chunks.append(chunk)
        td = chunk[..., -1]["next"]
    return chunks


def test_multi_step_transform_over_extends_equals_multistep_over_the_whole_sequence():
    chunks = rollout_chunks()
    rb = ReplayBuffer(storage=LazyTensorStorage(200, ndim=2), transform=MultiStepTransform(n_steps=3, gamma=0.95))
    lengths = [len(rb.extend(chunk.clone())) for chunk in chunks]
    assert lengths[0] == 2 * (13 - 3) and lengths[1:] == [2 * 13] * 5  # the last 3 steps wait for the next extend
    whole = torch.cat([c.to_tensordict() for c in chunks], -1)
    step = MultiStep(gamma=0.95, n_steps=3)
    step.mask_key = "mask"
    expected = step(whole)[..., :-3]
    stored = rb[:]
    assert stored.shape == expected.shape == (2, 13 * 6 - 3)
    assert whole["next", "done"].any()  # trajectories end within the data
    for key in expected.keys(True, True):
        assert torch.equal(stored[key], expected[key]), key
    assert torch.equal(stored["next", "step_count"], stored["step_count"] + stored["steps_to_next_obs"].unsqueeze(-1))


def test_multi_step_transform_holds_back_and_takes_a_new_n_steps():
    chunks = rollout_chunks(n=2, steps=3)
    t = MultiStepTransform(n_steps=4, gamma=0.9)
    assert t.inv(chunks[0].clone()) is None  # 3 steps: fewer than the look-ahead
    out = t.inv(chunks[1].clone())
    assert out.shape == (2, 2) and torch.equal(out["step_count"], chunks[0]["step_count"][:, :2])
    t.n_steps = 1
    assert t.n_steps == 1
    with pytest.raises(ValueError, match="The value of n_steps must be a strictly positive integer, got 0."):
        t.n_steps = 0


def test_multi_step_transform_is_refused_in_an_env():
    with pytest.raises(ValueError, match="The MultiStepTransform is only an inverse transform and can be applied "
                                         "exclusively to replay buffers."):
        TransformedEnv(GymEnv("Pendulum-v1"), MultiStepTransform(3, 0.9)).rollout(2)


def sequences():
    return TensorDict(step=torch.arange(10).expand(500, 10), batch_size=[500, 10])


def test_random_crop_draws_every_window_start():
    torch.manual_seed(0)
    crop = RandomCropTensorDict(4)(sequences())
    assert crop.shape == (500, 4) and bool((crop["step"].diff(dim=-1) == 1).all())
    assert set(crop["step"][:, 0].tolist()) == set(range(7))  # starts 0..6, the last one included
    assert torch.equal(RandomCropTensorDict(10)(sequences())["step"], sequences()["step"])


def test_random_crop_within_the_valid_steps_of_a_mask_and_as_a_buffer_transform():
    data = sequences()
    lengths = torch.arange(500) % 6 + 4  # 4 to 9 valid steps
    data["mask"] = torch.arange(10) < lengths.unsqueeze(-1)
    torch.manual_seed(0)
    crop = RandomCropTensorDict(4, mask_key="mask")(data)
    assert crop["mask"].all()
    ends = crop["step"][:, -1]
    assert bool((ends < lengths).all()) and bool((ends == lengths - 1).any()) and bool((crop["step"][:, 0] == 0).any())
    rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=RandomCropTensorDict(3), batch_size=4)
    rb.extend(sequences()[:10])
    assert rb.sample()["step"].shape == (4, 3)


def test_random_crop_errors():
    with pytest.raises(RuntimeError, match=r"Cannot sample trajectories of length 11 along dimension -1 given a "
                                           r"tensordict of shape torch.Size\(\[500, 10\]\)"):
        RandomCropTensorDict(11)(sequences())
    short = sequences()
    short["mask"] = torch.arange(10).expand(500, 10) < 2
    with pytest.raises(RuntimeError, match="Cannot sample trajectories of length 3 when the minimum trajectory length "
                                           "is 2."):
        RandomCropTensorDict(3, mask_key="mask")(short)
    with pytest.raises(ValueError, match="RandomCropTensorDict: sub_seq_len must be a positive int, got 0"):
        RandomCropTensorDict(0)


class RunningSum(torch.nn.Module):
    """A recurrent module over whole sequences: the state after step t is the state before the
    sequence plus the inputs up to t (a parameter, so the transform can ask its device)."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(()))

    def forward(self, obs, hidden):
        return hidden[:, :1] + (obs * self.scale).cumsum(1)


def test_burn_in_carries_the_state_after_the_burnt_in_steps():
    module = TensorDictModule(RunningSum(), in_keys=["obs", "hidden"], out_keys=[("next", "hidden")])
    t = BurnInTransform([module], burn_in=4)
    assert sorted(t.in_keys) == ["hidden", "obs"]
    assert t.out_keys == ["hidden"]
    data = TensorDict(obs=torch.arange(12.0).view(2, 6, 1), hidden=torch.full((2, 6, 1), 100.0), batch_size=[2, 6])
    rb = ReplayBuffer(storage=LazyTensorStorage(4), transform=t, batch_size=2)
    rb.extend(data)
    sample = rb.sample()
    assert sample.shape == (2, 2)
    expected = {0.0: 100.0 + 0 + 1 + 2 + 3, 6.0: 100.0 + 6 + 7 + 8 + 9}  # by each sequence's first obs
    for row in range(2):
        first = float(sample["obs"][row, 0]) - 4  # the kept steps start at the fifth
        assert float(sample["hidden"][row, 0]) == expected[first] and float(sample["hidden"][row, 1]) == 100.0
    assert torch.equal(rb.storage[:]["hidden"], data["hidden"])  # the stored data is untouched
    assert BurnInTransform([module], burn_in=0)(data) is data
    with pytest.raises(ValueError, match="All modules must be TensorDictModules, but a"):
        BurnInTransform([RunningSum()], burn_in=2)
    with pytest.raises(RuntimeError, match="BurnInTransform can only be appended to a ReplayBuffer"):
        TransformedEnv(GymEnv("Pendulum-v1"), BurnInTransform([module], 2))
