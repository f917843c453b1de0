"""PriorityTree: exact sums, mins, duplicates, prefix search and sampling distribution."""

import pytest
import torch

from reap_replay import PriorityTree


def test_sum_min_and_reset():
    tree = PriorityTree(10, dtype=torch.float64)
    assert tree.size == 16
    tree.update(torch.tensor([0, 3, 9]), torch.tensor([2.0, 0.5, 4.0]))
    assert float(tree.total()) == 6.5
    assert float(tree.min()) == 0.5
    tree.update(torch.tensor([3]), torch.tensor([7.0]))
    assert float(tree.total()) == 13.0
    assert float(tree.min()) == 2.0
    tree.reset()
    assert float(tree.total()) == 0.0
    assert tree.min() == float("inf")


@pytest.mark.parametrize("block_size", [1, 2, 4, 16])
def test_duplicates_last_write_wins(block_size):
    tree = PriorityTree(16, dtype=torch.float64, block_size=block_size)
    index = torch.tensor([5, 1, 5, 5, 1, 2])
    value = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    tree.update(index, value)
    assert tree[torch.tensor([1, 2, 5])].tolist() == [5.0, 6.0, 4.0]
    assert float(tree.total()) == 15.0
    assert float(tree.min()) == 4.0


@pytest.mark.parametrize("use_numpy", [True, False])
def test_last_write_wins_against_a_dict(use_numpy):
    """Batches with and without repeats, one after another, against a plain dict of writes."""
    gen = torch.Generator().manual_seed(3)
    tree = PriorityTree(64, dtype=torch.float64, block_size=8, use_numpy=use_numpy)
    expected = {}
    for size, high in ((40, 64), (8, 64), (50, 10), (1, 64), (30, 30)):
        index = torch.randperm(64, generator=gen)[:size] if high == 64 else torch.randint(high, (size,), generator=gen)
        value = torch.rand(size, generator=gen, dtype=torch.float64)
        tree.update(index, value)
        expected.update(zip(index.tolist(), value.tolist()))
        assert tree.leaves().tolist() == [expected.get(i, 0.0) for i in range(64)]


def test_find_prefixsum_boundaries():
    tree = PriorityTree(8, dtype=torch.float64, block_size=2)
    tree.update(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))
    mass = torch.tensor([0.0, 0.999, 1.0, 2.999, 3.0, 5.999, 6.0, 9.999])
    assert tree.find_prefixsum(mass).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_zero_priority_never_found():
    tree = PriorityTree(8, dtype=torch.float32, block_size=4)
    tree.update(torch.tensor([0, 1, 2]), torch.tensor([1.0, 0.0, 1.0]))
    u = torch.linspace(0, 0.9999, 1000)
    found = tree.sample(u)
    assert set(found.tolist()) == {0, 2}
    # masses at or past the end of the filled range land on the last positive slot
    assert tree.find_prefixsum(torch.tensor([2.0, 5.0])).tolist() == [2, 2]


def test_exact_counts_on_a_uniform_grid():
    """Evenly spaced draws hit each slot exactly in proportion to its value."""
    values = torch.tensor([1.0, 3.0, 0.0, 4.0, 2.0, 6.0])  # total 16
    tree = PriorityTree(6, dtype=torch.float64, block_size=2)
    tree.update(torch.arange(6), values)
    k = 1600
    u = (torch.arange(k, dtype=torch.float64) + 0.5) / k
    counts = torch.bincount(tree.sample(u), minlength=6)
    assert counts.tolist() == (values * k / 16).long().tolist()


def test_chi_square_of_random_draws():
    torch.manual_seed(0)
    values = torch.tensor([0.5, 1.0, 2.0, 4.0, 8.0, 0.25, 3.0, 1.25])
    tree = PriorityTree(8, block_size=2)
    tree.update(torch.arange(8), values)
    n = 40_000
    counts = torch.bincount(tree.sample(torch.rand(n)), minlength=8).double()
    expected = values.double() / values.sum() * n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 24.32  # chi-square, 7 degrees of freedom, p = 0.001


def test_load_leaves_rebuilds_blocks():
    tree = PriorityTree(8, dtype=torch.float64, block_size=2)
    leaves = torch.tensor([1.0, 2.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0])
    tree.load_leaves(leaves)
    assert float(tree.total()) == 8.0 and float(tree.min()) == 1.0


def test_bad_arguments():
    with pytest.raises(ValueError, match="capacity"):
        PriorityTree(0)
    with pytest.raises(ValueError, match="block_size"):
        PriorityTree(8, block_size=3)
    with pytest.raises(ValueError, match="dtype"):
        PriorityTree(8, dtype=torch.int64)
    tree = PriorityTree(8)
    with pytest.raises(ValueError, match="value has 2 elements"):
        tree.update(torch.tensor([0, 1, 2]), torch.tensor([1.0, 2.0]))
    with pytest.raises(IndexError, match="out of range"):
        tree.update(torch.tensor([-1]), torch.tensor([1.0]))
    with pytest.raises(ValueError, match="nothing to sample"):
        tree.sample(torch.rand(4, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_numpy_and_torch_paths_agree_bit_for_bit(dtype):
    """The CPU fast path (NumPy views) and the device path (torch ops) are the same tree."""
    fast = PriorityTree(1000, dtype=dtype, block_size=8)
    plain = PriorityTree(1000, dtype=dtype, block_size=8, use_numpy=False)
    assert fast.use_numpy and not plain.use_numpy
    gen = torch.Generator().manual_seed(3)
    # writes that start low and reach the last block, so the live-block bound grows
    for high in (40, 300, 1000, 1000):
        index = torch.randint(0, high, (200,), generator=gen)
        value = torch.rand(200, generator=gen, dtype=dtype) * (index % 5).to(dtype)
        for tree in (fast, plain):
            tree.update(index, value)
        assert torch.equal(fast.leaves(), plain.leaves())
        assert float(fast.total()) == float(plain.total())
        assert float(fast.min()) == float(plain.min())
        uniform = torch.rand(512, generator=gen, dtype=torch.float64)
        index_f, weight_f = fast.sample_with_weights(uniform, beta=0.4)
        index_p, weight_p = plain.sample_with_weights(uniform, beta=0.4)
        assert torch.equal(index_f, index_p)
        torch.testing.assert_close(weight_f, weight_p, rtol=1e-6, atol=0)
        assert bool((fast[index_f] > 0).all())
        mass = uniform * float(fast.total()) * 1.1  # some past the end
        assert torch.equal(fast.find_prefixsum(mass), plain.find_prefixsum(mass))


def test_numpy_path_where_it_cannot_run_warns_and_uses_torch():
    with pytest.warns(RuntimeWarning, match="use_numpy=True.*bfloat16"):
        tree = PriorityTree(8, dtype=torch.bfloat16, use_numpy=True)
    assert not tree.use_numpy
    with pytest.raises(ValueError, match=r"use_numpy must be True, False or None .*got use_numpy='no'"):
        PriorityTree(8, use_numpy="no")
    tree.update(torch.tensor([1, 2]), torch.tensor([1.0, 3.0]))
    assert float(tree.total()) == 4.0
