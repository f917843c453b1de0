"""A TorchRL ``rb.dumps(path)`` directory loads into a reap buffer: data, sampler state, cursor.

Checkpoints are written by TorchRL 0.14 itself (skipped without it). Its PrioritizedSampler
needs TorchRL's C++ segment trees, which the CPU torch build here lacks: that test runs
TorchRL's own ``PrioritizedSampler.dumps`` on a sampler whose trees are Python lists.
"""

import logging
import pickle
import warnings

import pytest
import torch
from tensordict import TensorDict

import reap_replay
from reap_replay.checkpoint import CheckpointError

torchrl_data = pytest.importorskip("torchrl.data")
logging.getLogger("torchrl").setLevel(logging.WARNING)
from torchrl.data.replay_buffers.samplers import PrioritizedSampler as TorchRLPrioritized  # noqa: E402

CAPACITY = 10


def _rows(n, start):
    i = torch.arange(start, start + n)
    return TensorDict({"obs": i.float().unsqueeze(-1).expand(n, 3).clone(), "traj": i // 4,
                       "next": {"done": (i % 4 == 3).unsqueeze(-1), "reward": i.double().unsqueeze(-1) / 7}},
                      [n])


def _torchrl_buffer(lib, storage, sampler):
    return lib.TensorDictReplayBuffer(storage=getattr(lib, storage)(CAPACITY), sampler=sampler(lib), batch_size=3)


SAMPLERS = {
    "RandomSampler": lambda lib: lib.RandomSampler(),
    "SamplerWithoutReplacement": lambda lib: lib.SamplerWithoutReplacement(),
    "SliceSampler": lambda lib: lib.SliceSampler(slice_len=2, traj_key="traj"),
}


def _load(rb, path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rb.loads(path)
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("storage", ["LazyTensorStorage", "LazyMemmapStorage"])
@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_torchrl_checkpoint_loads_exactly(tmp_path, storage, sampler):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _torchrl_buffer(torchrl_data, storage, SAMPLERS[sampler])
        theirs.extend(_rows(7, 0))
        theirs.extend(_rows(6, 7))  # wraps: cursor 3, 13 writes
        if sampler == "SamplerWithoutReplacement":
            theirs.sample()  # 3 of 10 drawn: 7 left in its list
        theirs.dumps(tmp_path / "ckpt")
    ours = _torchrl_buffer(reap_replay, storage, SAMPLERS[sampler])
    messages = _load(ours, tmp_path / "ckpt")
    assert messages == [f"{tmp_path / 'ckpt'}: prefetch.pkl is skipped: TorchRL's pickled prefetch queue "
                        "(reap never unpickles a checkpoint)"]
    assert len(ours) == len(theirs) == CAPACITY
    expected = theirs[:]
    got = ours[:]
    # TorchRL's TensorDictReplayBuffer stores each row's position as "index"; reap's adds it
    # when sampling, so it is not stored data here (and later writes need not carry it)
    assert set(got.keys(True, True)) == set(expected.keys(True, True)) - {"index"}
    for key in got.keys(True, True):
        assert got[key].dtype == expected[key].dtype and torch.equal(got[key], expected[key]), key
    assert torch.equal(expected["index"], torch.arange(CAPACITY))
    assert got["obs"][:, 0].tolist() == [10, 11, 12, 3, 4, 5, 6, 7, 8, 9]
    assert (ours._writer._cursor, ours._writer._write_count) == (theirs._writer._cursor, theirs._writer._write_count) == (3, 13)
    assert ours.storage._last_cursor == 3
    if sampler == "SamplerWithoutReplacement":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            remaining = theirs._sampler._sample_list.clone()
            next_theirs = [theirs.sample(return_info=True)[1]["index"].tolist() for _ in range(2)]
        assert torch.equal(ours._sampler._sample_list, remaining)
        next_ours = [ours.sample(return_info=True)[1]["index"].tolist() for _ in range(2)]
        assert next_ours == next_theirs  # the draws TorchRL had left, in its order
    ours.extend(_rows(1, 13))  # writing goes on at TorchRL's cursor
    assert ours[3]["obs"][0] == 13


def test_torchrl_prioritized_sampler_state_loads(tmp_path):
    alpha, beta, eps = 0.7, 0.5, 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _torchrl_buffer(torchrl_data, "LazyMemmapStorage", SAMPLERS["RandomSampler"])
        theirs.extend(_rows(8, 0))
        theirs.dumps(tmp_path / "ckpt")
    priorities = torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25, 1.5, 0.75, 1.25], dtype=torch.float64)
    leaves = [0.0] * CAPACITY
    for i, p in enumerate(priorities.tolist()):
        leaves[i] = (p + eps) ** alpha
    # TorchRL's own dumps on a sampler whose C++ trees are stood in for by Python lists
    sampler = object.__new__(TorchRLPrioritized)
    sampler.__dict__.update(_max_capacity=CAPACITY, _alpha=alpha, _beta=beta, _eps=eps,
                            _max_priority=(3.0, 3), _sum_tree=leaves, _min_tree=list(leaves))
    sampler.dumps(tmp_path / "ckpt" / "sampler")

    ours = reap_replay.TensorDictPrioritizedReplayBuffer(alpha=0.1, beta=0.1, storage=reap_replay.LazyMemmapStorage(CAPACITY),
                                                         batch_size=4)
    _load(ours, tmp_path / "ckpt")
    state = ours._sampler.state_dict()
    assert (state["_alpha"], state["_beta"], state["_eps"], state["_max_priority"]) == (alpha, beta, eps, 3.0)
    tree = state["_leaves"]  # reap's tree (float32, as TorchRL's default) rounds its width up
    assert torch.equal(tree[:CAPACITY], torch.tensor(leaves, dtype=torch.float64).to(tree.dtype))
    assert not tree[CAPACITY:].any()
    assert len(ours) == 8 and ours[:]["obs"][:, 0].tolist() == list(range(8))
    ours.extend(_rows(1, 8))  # a new item gets the max priority, TorchRL's rule
    assert ours._sampler.state_dict()["_leaves"][8] == pytest.approx((3.0 + eps) ** alpha)


def test_pickled_parts_are_never_opened(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _torchrl_buffer(torchrl_data, "LazyTensorStorage", SAMPLERS["RandomSampler"])
        theirs.extend(_rows(4, 0))
        theirs.dumps(tmp_path / "ckpt")
    marker = tmp_path / "unpickled"

    class Trap:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    for name in ("prefetch.pkl", "transform.t"):
        (tmp_path / "ckpt" / name).write_bytes(pickle.dumps(Trap()))
    ours = _torchrl_buffer(reap_replay, "LazyTensorStorage", SAMPLERS["RandomSampler"])
    messages = _load(ours, tmp_path / "ckpt")
    assert not marker.exists()
    assert any("transform.t is skipped: the transforms' state, a torch.save pickle" in m for m in messages)
    assert len(ours) == 4


def test_mismatched_buffer_is_refused_and_left_as_it_was(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _torchrl_buffer(torchrl_data, "LazyTensorStorage", SAMPLERS["RandomSampler"])
        theirs.extend(_rows(5, 0))
        theirs.dumps(tmp_path / "ckpt")
    prioritized = reap_replay.TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5,
                                                                storage=reap_replay.LazyTensorStorage(CAPACITY))
    with pytest.raises(CheckpointError, match="holds no sampler state .* but this buffer uses PrioritizedSampler"):
        _load(prioritized, tmp_path / "ckpt")
    smaller = reap_replay.TensorDictReplayBuffer(storage=reap_replay.LazyTensorStorage(4))
    smaller.extend(_rows(2, 100))
    with pytest.raises(CheckpointError, match="max_size=10, this buffer's is 4"):
        _load(smaller, tmp_path / "ckpt")
    assert len(smaller) == 2 and smaller[:]["obs"][:, 0].tolist() == [100, 101]
