"""PriorityTree's Triton kernels (reap_replay.tree_kernels) against its NumPy path, bit for bit.

Without a GPU the kernels run under TRITON_INTERPRET=1 (the root conftest sets it) on CPU
tensors; with one, on CUDA as well. Sizes stay small: the interpreter runs every lane in Python.
"""

import pytest
import torch

from reap_replay import PrioritizedSampler, PriorityTree
from reap_replay.samplers import prioritized as prioritized_module

DEVICES = ["cuda"] if torch.cuda.is_available() else ["cpu"]  # the CPU under the interpreter
needs_interpreter = pytest.mark.skipif(
    not torch.cuda.is_available() and __import__("os").environ.get("TRITON_INTERPRET") != "1",
    reason="the Triton kernels need a GPU or TRITON_INTERPRET=1",
)
pytestmark = needs_interpreter


def triton_tree(*args, device="cpu", **kwargs) -> PriorityTree:
    tree = PriorityTree(*args, device=device, backend="triton", **kwargs)
    assert tree.backend == "triton"
    return tree


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("capacity", "block_size"), [(64, 8), (1000, 8), (256, 1), (32, 32)])
def test_writes_and_draws_match_the_numpy_tree_bit_for_bit(device, dtype, capacity, block_size):
    gen = torch.Generator().manual_seed(capacity + block_size)
    reference = PriorityTree(capacity, dtype=dtype, block_size=block_size, backend="numpy")
    tree = triton_tree(capacity, dtype=dtype, block_size=block_size, device=device)
    for _ in range(4):
        index = torch.randint(0, capacity, (60,), generator=gen)  # repeats: the last write wins
        value = torch.rand(60, generator=gen, dtype=dtype) * 10 * (index % 4 > 0)  # some zeros
        reference.update(index, value)
        tree.update(index.to(device), value.to(device))
        assert torch.equal(tree.leaves().cpu(), reference.leaves())
        assert torch.equal(tree._sum_blocks.cpu(), reference._sum_blocks)  # same order of adds
        assert torch.equal(tree._min_blocks.cpu(), reference._min_blocks)
        uniform = torch.rand(300, generator=gen, dtype=torch.float64)
        index_r, weight_r = reference.sample_with_weights(uniform, beta=0.4)
        index_t, weight_t = tree.sample_with_weights(uniform.to(device), beta=0.4)
        assert torch.equal(index_t.cpu(), index_r)
        torch.testing.assert_close(weight_t.cpu(), weight_r, rtol=1e-6, atol=0)
        assert torch.equal(tree.sample(uniform.to(device)).cpu(), index_r)
        assert bool((tree[index_t] > 0).all())


@pytest.mark.parametrize("device", DEVICES)
def test_last_write_wins_over_many_calls_against_a_dict(device):
    """Stamps of earlier calls lose to every write of a later one, whatever their positions."""
    gen = torch.Generator().manual_seed(7)
    tree = triton_tree(64, dtype=torch.float64, block_size=8, device=device)
    expected = {}
    for size, high in ((40, 64), (8, 64), (50, 10), (1, 64), (30, 30), (64, 3)):
        index = torch.randint(high, (size,), generator=gen)
        value = torch.rand(size, generator=gen, dtype=torch.float64)
        tree.update(index.to(device), value.to(device))
        expected.update(zip(index.tolist(), value.tolist()))
        assert tree.leaves().tolist() == [expected.get(i, 0.0) for i in range(64)]
        assert float(tree.total()) == pytest.approx(sum(tree.leaves().tolist()), rel=1e-12, abs=0)


@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_is_refused_with_the_cpu_words_and_nothing_is_written(device):
    reference = PriorityTree(8, block_size=2, backend="numpy")
    tree = triton_tree(8, block_size=2, device=device)
    for t in (reference, tree):
        t.update(torch.arange(4), torch.ones(4))
    cases = [
        ([0, 9], [2.0, 2.0], IndexError),
        ([0, -1], [2.0, 2.0], IndexError),
        ([0, 1], [2.0, float("nan")], ValueError),
        ([0, 1], [-1.0, 2.0], ValueError),
        ([2, 3], [2.0, float("inf")], ValueError),
    ]
    for index, value, error in cases:
        messages = []
        for t in (reference, tree):
            with pytest.raises(error) as info:
                t.update(torch.tensor(index, device=t.device), torch.tensor(value, device=t.device))
            messages.append(str(info.value))
        assert messages[0] == messages[1]
        assert tree.leaves().tolist() == [1.0] * 4 + [0.0] * 4
        assert float(tree.total()) == 4.0


@pytest.mark.parametrize("device", DEVICES)
def test_prioritized_sampler_on_the_kernels_matches_the_numpy_sampler(device, monkeypatch):
    """Draws, weights, skipped -1 indices, duplicates, the max priority and bad input."""

    def run(backend):
        def tree(*args, **kw):
            return PriorityTree(*args, **{**kw, "backend": backend, "device": device if backend == "triton" else "cpu"})

        monkeypatch.setattr(prioritized_module, "PriorityTree", tree)
        sampler = PrioritizedSampler(64, alpha=0.6, beta=0.4, eps=1e-3)
        sampler._rng = torch.Generator().manual_seed(5)
        storage = list(range(40))
        sampler.extend(torch.arange(40))
        gen = torch.Generator().manual_seed(1)
        out = []
        for step in range(4):
            index, info = sampler.sample(storage, 32)
            sampler.update_priority(index, torch.rand(32, generator=gen) * (step + 1))
            sampler.update_priority(torch.tensor([3, -1, 3]), torch.tensor([0.5, 9.0, 2.0]))
            out.append((index.cpu(), info["priority_weight"].cpu()))
        sampler.extend(torch.tensor([40]))
        errors = []
        for index, priority in (([1, 64], [1.0, 1.0]), ([1, 2], [1.0, float("nan")]), ([1, 50], [1.0, 1.0])):
            with pytest.raises((IndexError, ValueError)) as info:
                sampler.update_priority(torch.tensor(index), torch.tensor(priority), storage=storage + [0])
            errors.append(str(info.value))
        return sampler, out, errors

    reference, reference_out, reference_errors = run("numpy")
    sampler, sampler_out, sampler_errors = run("triton")
    assert sampler._tree.backend == "triton" and sampler._tree.device.type == device
    for (i_r, w_r), (i_t, w_t) in zip(reference_out, sampler_out):
        assert torch.equal(i_t, i_r)
        torch.testing.assert_close(w_t, w_r, rtol=1e-6, atol=0)
    # (p + eps) ** alpha is exp(alpha * log(p + eps)) in the kernel: a float32 leaf may differ
    # from NumPy's pow by one unit in the last place
    torch.testing.assert_close(sampler._tree.leaves().cpu(), reference._tree.leaves(), rtol=2.4e-7, atol=0)
    assert float(sampler.default_priority) == float(reference.default_priority)
    assert sampler.state_dict()["_max_priority"] == reference.state_dict()["_max_priority"]
    assert sampler_errors == reference_errors


def test_load_leaves_rebuilds_blocks_in_the_order_writes_keep():
    values = torch.rand(64, dtype=torch.float64) * torch.arange(64).remainder(3)
    reference = PriorityTree(64, dtype=torch.float64, block_size=8, backend="numpy")
    tree = triton_tree(64, dtype=torch.float64, block_size=8, device=DEVICES[0])
    reference.load_leaves(values)
    tree.load_leaves(values.to(DEVICES[0]))
    assert torch.equal(tree._sum_blocks.cpu(), reference._sum_blocks)
    assert torch.equal(tree._min_blocks.cpu(), reference._min_blocks)


def test_a_backend_that_cannot_run_says_why_and_uses_torch_ops(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.warns(RuntimeWarning, match=r"backend='triton'\) on cpu: Triton kernels run on the CPU only under TRITON_INTERPRET=1"):
        tree = PriorityTree(8, backend="triton")
    assert tree.backend == "torch" and "backend='torch'" in repr(tree)
    with pytest.raises(ValueError, match=r"backend must be one of \('numpy', 'torch', 'triton'\) or None .*got backend='cuda'"):
        PriorityTree(8, backend="cuda")
    assert PriorityTree(8).backend == "numpy" and PriorityTree(8, use_numpy=False).backend == "torch"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_tree_runs_the_kernels_by_default_and_draws_in_proportion():
    tree = PriorityTree(1 << 16, device="cuda")
    assert tree.backend == "triton"
    weights = torch.tensor([1.0, 2.0, 3.0, 4.0], device="cuda")
    tree.update(torch.tensor([5, 900, 40_000, 65_535], device="cuda"), weights)
    draws = tree.sample(torch.rand(400_000, dtype=torch.float64, device="cuda"))
    counts = torch.stack([(draws == i).sum() for i in (5, 900, 40_000, 65_535)]).double().cpu()
    torch.testing.assert_close(counts / counts.sum(), (weights / weights.sum()).double().cpu(), atol=4e-3, rtol=0)
