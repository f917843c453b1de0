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
