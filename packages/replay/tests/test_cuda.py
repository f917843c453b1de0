"""The whole buffer on a GPU: CUDA storage, the Triton priority tree, slices, prefetch, pinned
memory and a collector storing on CUDA. Skipped without a GPU (nothing in the suite needs one)."""

import pytest
import torch
from tensordict import TensorDict

from reap_replay import (
    LazyTensorStorage,
    PrioritizedSliceSampler,
    SliceSampler,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


def trajectories(n: int = 60) -> TensorDict:
    """``n`` rows of trajectories of lengths 10, 20 and 30; ``obs`` is the row number."""
    traj = torch.cat([torch.full((length,), i) for i, length in enumerate((10, 20, 30))])[:n]
    return TensorDict({"obs": torch.arange(n, dtype=torch.float32)[:, None], "traj": traj,
                       "next": {"reward": torch.ones(n, 1)}}, [n])


def test_cuda_storage_extends_and_samples_on_the_gpu():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100, device="cuda"), batch_size=16)
    rb.extend(trajectories())
    sample, info = rb.sample(return_info=True)
    assert sample["obs"].device.type == "cuda" and sample["next", "reward"].device.type == "cuda"
    assert torch.equal(sample["obs"][:, 0].long().cpu(), info["index"].cpu())


def test_prioritized_buffer_on_cuda_runs_the_kernels_and_draws_in_proportion():
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=0.5, eps=0.0, storage=LazyTensorStorage(1000, device="cuda"),
                                           batch_size=4096)
    rb.extend(trajectories())
    rb.sample()  # the tree follows the storage to its device
    tree = rb._sampler._tree
    assert tree.device.type == "cuda" and tree.backend == "triton"
    priority = torch.zeros(60, device="cuda")
    priority[[3, 30, 59]] = torch.tensor([1.0, 2.0, 5.0], device="cuda")
    rb.update_priority(torch.arange(60, device="cuda"), priority)
    counts = torch.zeros(60)
    for _ in range(10):
        sample, info = rb.sample(return_info=True)
        assert info["priority_weight"].device.type == "cuda"
        counts += torch.bincount(info["index"].cpu(), minlength=60)[:60].float()
    assert set(torch.nonzero(counts).flatten().tolist()) == {3, 30, 59}
    torch.testing.assert_close(counts[[3, 30, 59]] / counts.sum(), torch.tensor([0.125, 0.25, 0.625]), atol=0.01, rtol=0)
    with pytest.raises(ValueError, match="priority nan at index 30"):
        rb.update_priority(torch.tensor([3, 30], device="cuda"), torch.tensor([1.0, float("nan")], device="cuda"))
    with pytest.raises(IndexError, match="names no item"):
        rb.update_priority(torch.tensor([3, 70], device="cuda"), torch.tensor([1.0, 1.0], device="cuda"))


@pytest.mark.parametrize("prioritized", [False, True])
def test_slice_samplers_on_cuda_storage_return_whole_slices_of_one_trajectory(prioritized):
    sampler = (PrioritizedSliceSampler(100, alpha=0.7, beta=0.5, slice_len=5, traj_key="traj") if prioritized
               else SliceSampler(slice_len=5, traj_key="traj"))
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100, device="cuda"), sampler=sampler, batch_size=20)
    rb.extend(trajectories())
    for _ in range(5):
        sample = rb.sample()
        obs = sample["obs"].view(4, 5).cpu()
        assert torch.equal(obs - obs[:, :1], torch.arange(5.0).expand(4, 5))  # consecutive rows
        assert (sample["traj"].view(4, 5).cpu() == sample["traj"].view(4, 5)[:, :1].cpu()).all()


def test_prefetch_with_cuda_storage_and_pinned_batches_from_cpu_storage():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100, device="cuda"), batch_size=8, prefetch=3)
    rb.extend(trajectories())
    for _ in range(6):
        assert rb.sample()["obs"].device.type == "cuda"
    pinned = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=8, pin_memory=True)
    pinned.extend(trajectories())
    batch = pinned.sample()
    assert batch["obs"].is_pinned()
    assert batch.to("cuda", non_blocking=True)["obs"].device.type == "cuda"


def test_collector_storing_on_cuda_fills_a_cuda_buffer():
    from reap import Collector
    from reap.envs import GymEnv

    policy = torch.nn.Linear(4, 2).cuda()

    def act(td):
        td["action"] = torch.nn.functional.one_hot(policy(td["observation"].cuda()).argmax(-1), 2).to(td.device)
        return td

    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(1000, device="cuda"), batch_size=32)
    collector = Collector(lambda: GymEnv("CartPole-v1"), act, frames_per_batch=64, total_frames=256,
                          storing_device="cuda")
    try:
        for batch in collector:
            assert batch["observation"].device.type == "cuda" and batch["next", "reward"].device.type == "cuda"
            rb.extend(batch)
    finally:
        collector.shutdown()
    assert len(rb) == 256
    sample = rb.sample()
    assert sample["observation"].device.type == "cuda" and sample["next", "reward"].shape == (32, 1)
