"""``MultiStep``: TorchRL's output on the same batches (any number of batch dims, ``n_steps``
longer than the batch, a collector mask, rewards and dones without a trailing dim, one done flag
per agent), and values recorded from TorchRL for runs without it; ``DensifyReward`` likewise."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from reap import MultiStep
from reap.postprocs import DensifyReward


def _batch(shape, seed=0, p=0.25):
    g = torch.Generator().manual_seed(seed)
    done = torch.rand(*shape, 1, generator=g) < p
    return TensorDict({
        "observation": torch.randn(*shape, 3, generator=g),
        "next": {"observation": torch.randn(*shape, 3, generator=g), "reward": torch.randn(*shape, 1, generator=g),
                 "done": done, "terminated": done.clone(), "truncated": torch.zeros_like(done)},
    }, list(shape))


def _masked():
    td = _batch((3, 6), seed=3)
    td["collector", "mask"] = torch.rand(3, 6, generator=torch.Generator().manual_seed(1)) < 0.7
    return td


def _flat_flags():
    g = torch.Generator().manual_seed(5)
    return TensorDict({"next": {"observation": torch.randn(2, 6, 3, generator=g), "reward": torch.randn(2, 6, generator=g),
                                "done": torch.rand(2, 6, generator=g) < 0.3}}, [2, 6])


def _per_agent():
    g = torch.Generator().manual_seed(6)
    return TensorDict({"next": {"observation": torch.randn(2, 6, 3, 4, generator=g),
                                "reward": torch.randn(2, 6, 3, 1, generator=g),
                                "done": torch.rand(2, 6, 3, generator=g) < 0.3}}, [2, 6])


def _no_feature_dims():
    g = torch.Generator().manual_seed(7)
    done = torch.zeros(9, dtype=torch.bool)
    done[4] = True
    return TensorDict({"obs": torch.randn(9, generator=g), "action": torch.rand(9, generator=g),
                       "next": {"obs": torch.randn(9, generator=g), "reward": torch.rand(9, generator=g), "done": done}},
                      [9])


BATCHES = {
    "1-dim": lambda: _batch((10,)),
    "no-feature-dims": _no_feature_dims,
    "2-dims": lambda: _batch((3, 10), seed=1),
    "3-dims": lambda: _batch((2, 3, 7), seed=2),
    "mask": _masked,
    "flat-flags": _flat_flags,
    "per-agent": _per_agent,
}


@pytest.mark.parametrize("n_steps", [1, 3, 7, 12])
@pytest.mark.parametrize("case", list(BATCHES))
def test_same_as_torchrl(case, n_steps):
    postprocs = pytest.importorskip("torchrl.data.postprocs")
    td = BATCHES[case]()
    ours, theirs = MultiStep(0.9, n_steps)(td.clone()), postprocs.MultiStep(0.9, n_steps)(td.clone())
    assert ours.batch_size == theirs.batch_size
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    for key in theirs.keys(True, True):
        assert ours[key].dtype == theirs[key].dtype, key
        torch.testing.assert_close(ours[key], theirs[key], msg=lambda m, key=key: f"{key}: {m}")


def test_longer_than_the_batch_and_three_dims():
    done = torch.tensor([False, True, False, False]).reshape(1, 1, 4, 1).expand(2, 2, 4, 1)
    td = TensorDict({"next": {"reward": torch.ones(2, 2, 4, 1), "done": done,
                              "observation": torch.arange(4.0).expand(2, 2, 4).unsqueeze(-1)}}, [2, 2, 4])
    out = MultiStep(gamma=0.5, n_steps=10)(td)
    # recorded from TorchRL 0.14.1
    assert out["next", "reward"][0, 0].flatten().tolist() == [1.5, 1.0, 1.5, 1.0]
    assert out["steps_to_next_obs"][1, 1].tolist() == [2, 1, 2, 1]
    assert out["next", "observation"][0, 1].flatten().tolist() == [1.0, 1.0, 3.0, 3.0]
    assert out["gamma"][0, 0].tolist() == [0.25, 0.5, 0.25, 0.5]
    assert out["nonterminal"][0, 0].tolist() == [True, False, True, False]
    assert out["next", "done"].equal(done) and out["next", "original_reward"].equal(torch.ones(2, 2, 4, 1))


def test_mask_marks_padding_terminal_and_keys_are_attributes():
    td = TensorDict({"next": {"r": torch.ones(1, 4, 1), "done": torch.zeros(1, 4, 1, dtype=torch.bool)},
                     "collector": {"mask": torch.tensor([[True, True, False, False]])}}, [1, 4])
    ms = MultiStep(gamma=0.9, n_steps=2)
    ms.reward_keys = ("r",)
    out = ms(td)
    assert out["nonterminal"].tolist() == [[True, True, False, False]]  # recorded from TorchRL 0.14.1
    assert out["next", "r"].flatten().tolist() == pytest.approx([1.9, 1.9, 1.9, 1.0])
    assert ms.state_dict()["gammas"].flatten().tolist() == pytest.approx([1.0, 0.9, 0.81])


def test_refusals():
    with pytest.raises(ValueError, match="n_steps must be a positive int"):
        MultiStep(0.9, 0)
    with pytest.raises(ValueError, match="gamma must be in"):
        MultiStep(1.5, 2)
    td = TensorDict({"x": torch.zeros(2, 3, 5), "next": {"reward": torch.zeros(2, 3, 1),
                                                         "done": torch.zeros(2, 3, 4, dtype=torch.bool)}}, [2, 3])
    with pytest.raises(RuntimeError, match=r"tensordict shape must be compatible.*\('next', 'done'\) has shape \(2, 3, 4\)"):
        MultiStep(0.9, 2)(td)
    postprocs = pytest.importorskip("torchrl.data.postprocs")
    with pytest.raises(RuntimeError, match="tensordict shape must be compatible"):
        postprocs.MultiStep(0.9, 2)(td)


@pytest.mark.parametrize("kwargs", [{}, {"discount": 0.9, "reward_key_out": "to_go"}])
@pytest.mark.parametrize("shape", [(10,), (3, 12), (2, 3, 7)])
def test_densify_reward_same_as_torchrl(shape, kwargs):
    postprocs = pytest.importorskip("torchrl.data.postprocs")
    td = _batch(shape, seed=len(shape))
    ours, theirs = DensifyReward(**kwargs)(td.clone()), postprocs.DensifyReward(**kwargs)(td.clone())
    for key in theirs.keys(True, True):
        torch.testing.assert_close(ours[key], theirs[key])


def test_densify_reward_sums_each_trajectory():
    done = torch.tensor([False, False, True, False, True, False]).unsqueeze(-1)
    reward = torch.tensor([1.0, 0.0, 2.0, 0.0, 5.0, 4.0]).unsqueeze(-1)
    td = TensorDict({"next": {"reward": reward, "done": done}}, [6])
    out = DensifyReward(discount=0.5, reward_key_out="to_go")(td)
    # recorded from TorchRL 0.14.1: 1 + 0.5 * (0 + 0.5 * 2) = 1.5, ...
    assert out["next", "to_go"].flatten().tolist() == [1.5, 1.0, 2.0, 2.5, 5.0, 4.0]
    assert out["next", "reward"].equal(reward)
    with pytest.raises(RuntimeError, match="reward and done state are expected to have the same shape"):
        DensifyReward()(TensorDict({"next": {"reward": torch.zeros(6), "done": done}}, [6]))
