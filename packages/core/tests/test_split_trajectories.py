"""``split_trajectories``: TorchRL's keywords (``prefix``, ``trajectory_key``, ``done_key``,
``as_nested``) and output, checked against TorchRL's function on the same batches when TorchRL is
installed, and against values recorded from it otherwise."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from reap import split_trajectories

IDS = torch.tensor([[0, 0, 2, 2, 2], [1, 3, 3, 4, 4]])


def _done_batch():
    done = torch.zeros(2, 5, 1, dtype=torch.bool)
    done[0, 1] = done[1, 3] = True
    return TensorDict({"x": torch.arange(10).reshape(2, 5), "next": {"done": done}}, [2, 5])


BATCHES = {
    "collector-ids": (lambda: TensorDict({("collector", "traj_ids"): IDS, "x": torch.arange(10).reshape(2, 5),
                                          "y": torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(0))},
                                         [2, 5]), {}),
    "prefix": (lambda: TensorDict({("p", "traj_ids"): IDS, "x": torch.arange(10).reshape(2, 5)}, [2, 5]),
               {"prefix": "p"}),
    "trajectory-key": (lambda: TensorDict({"traj": IDS, "x": torch.arange(10).reshape(2, 5)}, [2, 5]),
                       {"trajectory_key": "traj"}),
    "done-key": (_done_batch, {"done_key": "done"}),
    "done-default": (_done_batch, {}),
    "one-per-row": (lambda: TensorDict({("collector", "traj_ids"): torch.tensor([[0] * 5, [1] * 5]),
                                        "x": torch.arange(10).reshape(2, 5)}, [2, 5]), {}),
    "one-row": (lambda: TensorDict({("collector", "traj_ids"): torch.zeros(4, dtype=torch.long),
                                    "x": torch.arange(4)}, [4]), {}),
    "three-dims": (lambda: TensorDict({("collector", "traj_ids"): torch.arange(12).reshape(2, 2, 3) // 2,
                                       "x": torch.arange(12).reshape(2, 2, 3)}, [2, 2, 3]), {}),
}


@pytest.mark.parametrize("case", list(BATCHES))
def test_same_as_torchrl(case):
    utils = pytest.importorskip("torchrl.collectors.utils")
    make, kwargs = BATCHES[case]
    ours, theirs = split_trajectories(make(), **kwargs), utils.split_trajectories(make(), **kwargs)
    assert ours.batch_size == theirs.batch_size
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    for key in theirs.keys(True, True):
        assert ours[key].dtype == theirs[key].dtype and ours[key].equal(theirs[key]), key


def test_as_nested_same_as_torchrl():
    utils = pytest.importorskip("torchrl.collectors.utils")
    make, _ = BATCHES["collector-ids"]
    ours, theirs = split_trajectories(make(), as_nested=True), utils.split_trajectories(make(), as_nested=True)
    assert ours.batch_size == theirs.batch_size == (5, -1)
    for key in theirs.keys(True, True):
        assert all(a.equal(b) for a, b in zip(ours[key].unbind(), theirs[key].unbind())), key


def test_rows_first_padded_and_masked():
    make, _ = BATCHES["collector-ids"]
    out = split_trajectories(make())
    assert out["x"].tolist() == [[0, 1, 0], [2, 3, 4], [5, 0, 0], [6, 7, 0], [8, 9, 0]]
    assert out["collector", "mask"].tolist() == [[True, True, False], [True, True, True], [True, False, False],
                                                 [True, True, False], [True, True, False]]


def test_ids_from_done_and_keys():
    out = split_trajectories(_done_batch(), done_key="done")
    # recorded from TorchRL 0.14.1
    assert out["x"].tolist() == [[0, 1, 0, 0], [2, 3, 4, 0], [5, 6, 7, 8], [9, 0, 0, 0]]
    assert out["traj_ids"].tolist() == [[0, 0, 0, 0], [1, 1, 1, 0], [2, 2, 2, 2], [3, 0, 0, 0]]
    assert out["mask"].sum().item() == 10
    keyed = split_trajectories(TensorDict({("meta", "traj"): IDS, "x": torch.arange(10).reshape(2, 5)}, [2, 5]),
                               trajectory_key=("meta", "traj"))
    assert ("meta", "mask") in keyed.keys(True) and "mask" not in keyed.keys()


def test_whole_rows_come_back_as_they_are():
    make, _ = BATCHES["one-per-row"]
    out = split_trajectories(make())
    assert out.batch_size == (2, 5) and out["collector", "mask"].all()
    assert split_trajectories(BATCHES["one-row"][0]()).batch_size == (1, 4)


def test_as_nested_and_refusals():
    make, _ = BATCHES["collector-ids"]
    out = split_trajectories(make(), as_nested=True)
    assert [t.tolist() for t in out["x"].unbind()] == [[0, 1], [2, 3, 4], [5], [6, 7], [8, 9]]
    with pytest.raises(ValueError, match="as_nested must be a bool or torch.strided"):
        split_trajectories(make(), as_nested=torch.jagged)
    with pytest.raises(ValueError, match="needs a batch with a time dimension"):
        split_trajectories(TensorDict({"x": torch.zeros(())}, []))
