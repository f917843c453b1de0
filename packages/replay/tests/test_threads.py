"""One writer thread and many sampling threads (prefetch included) on one buffer."""

import threading
import time

import torch
from tensordict import TensorDict

from reap_replay import LazyTensorStorage, TensorDictPrioritizedReplayBuffer, TensorDictReplayBuffer


def rows(start, n):
    ids = torch.arange(start, start + n, dtype=torch.float32)
    return TensorDict(
        {"obs": ids[:, None].expand(n, 8).clone(), "next": {"obs": ids[:, None].expand(n, 8) + 1}},
        [n],
    )


def check_consistent(sample):
    """Every sampled row must be one whole written row: all its entries agree."""
    obs, nxt = sample["obs"], sample["next", "obs"]
    assert (obs == obs[:, :1]).all()
    assert (nxt == obs + 1).all()


def drive(rb, samplers=3, writes=300, sample_fn=None):
    errors = []
    during = []
    stop = threading.Event()
    rb.extend(rows(0, 64))

    def writer():
        try:
            for i in range(writes):
                rb.extend(rows(1000 + 37 * i, 37))
                if i % 10 == 0:
                    time.sleep(0.001)  # let the samplers in
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)
        finally:
            stop.set()

    def sampler():
        try:
            count = 0
            while not stop.is_set() or count < 5:
                sample = rb.sample() if sample_fn is None else sample_fn()
                check_consistent(sample)
                count += 1
                if not stop.is_set():
                    during.append(1)
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=sampler) for _ in range(samplers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert during, "no sample overlapped the writes"
    assert rb.writer._write_count == 64 + 37 * writes


def test_one_writer_many_samplers():
    drive(TensorDictReplayBuffer(storage=LazyTensorStorage(500), batch_size=32))


def test_one_writer_many_samplers_with_prefetch():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(500), batch_size=32, prefetch=3)
    drive(rb)
    rb.close()


def test_prioritized_updates_from_sampling_threads():
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=0.7, beta=0.5, storage=LazyTensorStorage(300), batch_size=16, prefetch=2
    )

    def sample_and_update():
        sample = rb.sample()
        rb.update_priority(sample["index"], torch.rand(16) + 0.1)
        assert (sample["priority_weight"] > 0).all() and (sample["priority_weight"] <= 1).all()
        return sample

    drive(rb, sample_fn=sample_and_update)
    tree = rb.sampler._tree
    leaves = tree.leaves()[:300]
    assert torch.allclose(tree.total(), leaves.double().sum(), rtol=1e-9)
    assert float(tree.min()) == float(leaves[leaves > 0].min())
    rb.close()
