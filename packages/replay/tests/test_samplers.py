"""Samplers: prioritized definitions, epochs without replacement, trajectory slices."""

import warnings

import pytest
import torch
from tensordict import TensorDict

from reap_replay import (
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    RandomSampler,
    SamplerWithoutReplacement,
    SliceSampler,
    TensorDictReplayBuffer,
    _warn,
)


def filled(n, capacity=None, data=None):
    storage = LazyTensorStorage(capacity or n)
    storage.set(slice(0, n), torch.arange(n) if data is None else data)
    storage._record_progress(n % (capacity or n), n)
    return storage


# ------------------------------------------------------------------------------ prioritized
def test_priorities_probabilities_and_weights_match_the_definitions():
    alpha, beta, eps = 0.7, 0.4, 0.01
    raw = torch.tensor([0.5, 2.0, 0.0, 3.0], dtype=torch.float64)
    sampler = PrioritizedSampler(8, alpha, beta, eps, dtype=torch.float64)
    storage = filled(4, 8)
    sampler.extend(torch.arange(4))
    sampler.update_priority(torch.arange(4), raw)
    p = (raw + eps) ** alpha
    tree = sampler._tree
    assert torch.allclose(tree[torch.arange(4)], p)
    # exact probabilities: evenly spaced draws give counts proportional to P(i)
    k = 100_000
    grid = (torch.arange(k, dtype=torch.float64) + 0.5) / k
    counts = torch.bincount(tree.sample(grid), minlength=4).double()
    assert torch.allclose(counts / k, p / p.sum(), atol=2 / k)
    # weights: (N * P(i)) ** -beta / max_j (N * P(j)) ** -beta
    index, info = sampler.sample(storage, 64)
    n = 4
    prob = p / p.sum()
    expected = (n * prob[index]) ** -beta / ((n * prob.min()) ** -beta)
    assert torch.allclose(info["priority_weight"], expected)
    assert float(info["priority_weight"].max()) <= 1.0


def test_sampling_distribution_chi_square():
    torch.manual_seed(1)
    sampler = PrioritizedSampler(16, alpha=1.0, beta=1.0, eps=0.0)
    storage = filled(6, 16)
    raw = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 5.0])
    sampler.update_priority(torch.arange(6), raw)
    counts = torch.zeros(6, dtype=torch.float64)
    for _ in range(10):
        index, _ = sampler.sample(storage, 3000)
        counts += torch.bincount(index, minlength=6).double()
    expected = raw.double() / raw.sum() * 30_000
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 20.52  # 5 degrees of freedom, p = 0.001


def test_new_items_get_the_max_priority_so_far():
    sampler = PrioritizedSampler(8, alpha=1.0, beta=0.5, eps=0.0)
    assert sampler.default_priority == 1.0
    sampler.extend(torch.tensor([0, 1]))
    assert sampler._tree[torch.tensor([0, 1])].tolist() == [1.0, 1.0]
    sampler.update_priority(torch.tensor([0, 1]), torch.tensor([0.5, 7.0]))
    sampler.extend(torch.tensor([2]))
    assert sampler._tree[torch.tensor([2])].tolist() == [7.0]
    sampler.update_priority(torch.tensor([1]), torch.tensor([0.1]))  # max ever set stays 7
    sampler.add(3)
    assert sampler._tree[torch.tensor([3])].tolist() == [7.0]


def test_max_priority_within_buffer():
    sampler = PrioritizedSampler(8, alpha=1.0, beta=0.5, eps=0.0, max_priority_within_buffer=True)
    sampler.update_priority(torch.tensor([0, 1]), torch.tensor([9.0, 2.0]))
    sampler.update_priority(torch.tensor([0]), torch.tensor([1.0]))
    sampler.extend(torch.tensor([2]))
    assert sampler._tree[torch.tensor([2])].tolist() == [2.0]


def test_alpha_zero_is_uniform_and_negative_index_skipped():
    sampler = PrioritizedSampler(4, alpha=0.0, beta=1.0)
    sampler.update_priority(torch.tensor([0, 1, -1, 2]), torch.tensor([5.0, 1.0, 3.0, 0.2]))
    assert sampler._tree[torch.arange(4)].tolist() == [1.0, 1.0, 1.0, 0.0]


def test_sampler_on_the_torch_op_tree_matches_the_numpy_tree(monkeypatch):
    """The sampler's device path (torch tensors throughout, as on CUDA) run on the CPU."""
    from reap_replay import trees
    from reap_replay.samplers import prioritized as samplers

    def run():
        torch.manual_seed(5)
        sampler = PrioritizedSampler(64, alpha=0.6, beta=0.4, eps=1e-3)
        storage = filled(40, 64)
        sampler.extend(torch.arange(40))
        out = []
        for step in range(5):
            index, info = sampler.sample(storage, 32)
            sampler.update_priority(index, torch.rand(32) * (step + 1))
            sampler.update_priority(torch.tensor([3, -1, 3]), torch.tensor([0.5, 9.0, 2.0]))
            out.append((index, info["priority_weight"]))
        sampler.extend(torch.tensor([40]))
        return sampler, out

    fast, fast_out = run()
    torch_tree = lambda *args, **kw: trees.PriorityTree(*args, use_numpy=False, **kw)  # noqa: E731
    monkeypatch.setattr(samplers, "PriorityTree", torch_tree)
    plain, plain_out = run()
    assert fast._tree.use_numpy and not plain._tree.use_numpy
    for (i_f, w_f), (i_p, w_p) in zip(fast_out, plain_out):
        assert torch.equal(i_f, i_p)
        torch.testing.assert_close(w_f, w_p)
    assert torch.equal(fast._tree.leaves(), plain._tree.leaves())
    assert fast._tree[torch.tensor([3])].item() == pytest.approx((2.0 + 1e-3) ** 0.6)
    assert float(fast.default_priority) == float(plain.default_priority)
    assert fast.state_dict()["_max_priority"] == plain.state_dict()["_max_priority"]


@pytest.mark.parametrize("use_numpy", [True, False])
def test_priorities_that_require_grad_are_read_detached(use_numpy, monkeypatch):
    from reap_replay import trees
    from reap_replay.samplers import prioritized as samplers

    tree = lambda *args, **kw: trees.PriorityTree(*args, use_numpy=use_numpy, **kw)  # noqa: E731
    monkeypatch.setattr(samplers, "PriorityTree", tree)
    sampler = PrioritizedSampler(8, alpha=1.0, beta=1.0, eps=0.0)
    td_error = (torch.tensor([1.0, 2.0, 4.0], requires_grad=True) * 2).abs()  # a loss's output
    sampler.update_priority(torch.tensor([0, 1, 2]), td_error)
    assert sampler._tree[torch.arange(3)].tolist() == [2.0, 4.0, 8.0]
    assert float(sampler.default_priority) == 8.0 and td_error.requires_grad


def test_prioritized_bad_arguments():
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedSampler(4, alpha=-0.1, beta=0.5)
    with pytest.raises(ValueError, match="beta"):
        PrioritizedSampler(4, alpha=0.5, beta=-1)
    with pytest.raises(ValueError, match="eps"):
        PrioritizedSampler(4, alpha=0.5, beta=0.5, eps=-1e-3)
    with pytest.raises(ValueError, match="max_capacity"):
        PrioritizedSampler(0, alpha=0.5, beta=0.5)
    with pytest.raises(ValueError, match="reduction"):
        PrioritizedSampler(4, alpha=0.5, beta=0.5, reduction="sum")
    sampler = PrioritizedSampler(4, alpha=0.5, beta=0.5)
    with pytest.raises(ValueError, match="priority has 2 elements"):
        sampler.update_priority(torch.tensor([0, 1, 2]), torch.tensor([1.0, 2.0]))
    with pytest.raises(IndexError, match="max_capacity=4"):
        sampler.update_priority(torch.tensor([4]), torch.tensor([1.0]))
    with pytest.raises(RuntimeError, match="empty storage"):
        sampler.sample(LazyTensorStorage(4), 2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_tree_without_cuda_says_so_once(monkeypatch):
    monkeypatch.setattr(_warn, "_WARNED", set())
    with pytest.warns(RuntimeWarning, match="CUDA is unavailable"):
        sampler = PrioritizedSampler(4, alpha=0.5, beta=0.5, device="cuda")
    assert sampler.device.type == "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PrioritizedSampler(4, alpha=0.5, beta=0.5, device="cuda")


# ----------------------------------------------------------------------- without replacement
def test_without_replacement_epochs():
    torch.manual_seed(0)
    storage = filled(10)
    sampler = SamplerWithoutReplacement()
    batches = [sampler.sample(storage, 4)[0] for _ in range(3)]
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(torch.cat(batches).tolist()) == list(range(10))
    assert sampler.ran_out
    again = [sampler.sample(storage, 4)[0] for _ in range(3)]
    assert sorted(torch.cat(again).tolist()) == list(range(10))


def test_without_replacement_drop_last_and_no_shuffle():
    storage = filled(10)
    sampler = SamplerWithoutReplacement(drop_last=True, shuffle=False)
    first, second = sampler.sample(storage, 4)[0], sampler.sample(storage, 4)[0]
    assert first.tolist() == [0, 1, 2, 3] and second.tolist() == [4, 5, 6, 7]
    assert sampler.ran_out
    assert sampler.sample(storage, 4)[0].tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="drop_last"):
        sampler.sample(storage, 11)


def test_random_sampler_in_range():
    storage = filled(5, 10)
    index, info = RandomSampler().sample(storage, 1000)
    assert info == {} and set(index.tolist()) == set(range(5))


# ---------------------------------------------------------------------------------- slices
def traj_storage():
    traj = torch.tensor([0] * 5 + [1] * 3 + [2] * 6)
    done = torch.zeros(14, 1, dtype=torch.bool)
    done[[4, 7, 13]] = True
    data = TensorDict(
        {"obs": torch.arange(14), "traj": traj, "next": {"done": done}}, [14]
    )
    return filled(14, 20, data)


@pytest.mark.parametrize("kwargs", [{"traj_key": "traj"}, {"end_key": ("next", "done")}, {}])
def test_slices_stay_inside_one_trajectory(kwargs):
    torch.manual_seed(0)
    storage = traj_storage()
    traj = storage.get_leaf("traj")
    sampler = SliceSampler(slice_len=3, **kwargs)
    for _ in range(50):
        index, info = sampler.sample(storage, 12)
        slices = index.view(4, 3)
        assert (slices[:, 1:] - slices[:, :-1] == 1).all()
        assert (traj[slices] == traj[slices[:, :1]]).all()
        trunc = info[("next", "truncated")].view(4, 3)
        assert trunc[:, 2].all() and not trunc[:, :2].any()
        assert info[("next", "done")].shape == (12, 1)


def test_slice_index_is_one_tensor_per_storage_dim():
    data = TensorDict({"obs": torch.arange(14), "traj": torch.tensor([0] * 5 + [1] * 3 + [2] * 6)}, [14])
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=SliceSampler(slice_len=4, traj_key="traj"),
                                batch_size=8)
    rb.extend(data)
    sample, info = rb.sample(return_info=True)
    (index,) = info["index"]
    assert index.shape == (8,) and torch.equal(index, sample["obs"])
    assert sample["index"].shape == (8, 1) and torch.equal(sample["index"][:, 0], index)
    assert torch.equal(rb[info["index"][0]]["obs"], sample["obs"])


def test_num_slices_and_non_strict_lengths():
    torch.manual_seed(0)
    storage = traj_storage()
    index, _ = SliceSampler(num_slices=2, traj_key="traj").sample(storage, 8)
    assert index.shape == (8,)
    # strict: trajectory 1 (3 steps) is never used for slices of 4
    for _ in range(30):
        index, _ = SliceSampler(slice_len=4, traj_key="traj").sample(storage, 8)
        assert not ((index >= 5) & (index <= 7)).any()
    seen_short = False
    for _ in range(30):
        index, info = SliceSampler(slice_len=4, traj_key="traj", strict_length=False).sample(
            storage, 12
        )
        assert info[("next", "truncated")].sum() == 3
        seen_short |= index.numel() < 12
    assert seen_short


def test_slice_errors():
    storage = traj_storage()
    with pytest.raises(TypeError, match="Either num_slices or slice_len must be not None, and not both"):
        SliceSampler(num_slices=2, slice_len=3)
    with pytest.raises(TypeError, match="Either num_slices or slice_len"):
        SliceSampler()
    with pytest.raises(RuntimeError, match="The batch-size must be divisible by the slice length"):
        SliceSampler(slice_len=3, traj_key="traj").sample(storage, 8)
    with pytest.raises(RuntimeError, match="required=7"):
        SliceSampler(slice_len=7, traj_key="traj").sample(storage, 14)
    with pytest.raises(RuntimeError, match=r"traj_key='nope' or end_key='nope_done'.*none is stored"):
        SliceSampler(slice_len=2, traj_key="nope", end_key="nope_done").sample(storage, 4)
    with pytest.raises(ValueError, match="pad_output=True is incompatible with strict_length=True"):
        SliceSampler(slice_len=2, pad_output=True)
    with pytest.raises(RuntimeError, match="Could not get a tensordict out of the storage"):
        lists = ListStorage(4)
        lists.set(range(2), [TensorDict({"traj": torch.tensor(0)}), TensorDict({"traj": torch.tensor(0)})])
        SliceSampler(slice_len=2, traj_key="traj").sample(lists, 2)


def test_slice_a_full_ring_wraps_and_its_newest_row_ends_a_trajectory():
    """In a full ring, a trajectory runs on from the last row to the first, and the newest row
    ends one (its next step was overwritten), as TorchRL's."""
    torch.manual_seed(0)
    storage = LazyTensorStorage(6)
    data = TensorDict({"next": {"done": torch.zeros(6, 1, dtype=torch.bool)}}, [6])
    storage.set(slice(0, 6), data)
    storage._record_progress(3, 9)  # rows 0-2 newer than rows 3-5: the trajectory is 3,4,5,0,1,2
    sampler = SliceSampler(slice_len=3)
    seen = {tuple(sampler.sample(storage, 3)[0].tolist()) for _ in range(60)}
    assert seen == {(3, 4, 5), (4, 5, 0), (5, 0, 1), (0, 1, 2)}
