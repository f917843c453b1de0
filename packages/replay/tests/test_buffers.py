"""Replay buffers: TorchRL's behaviour for extend, add, sample, iteration, priorities, state."""

import io

import pytest
import torch
from tensordict import TensorDict

from reap_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedReplayBuffer,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictMaxValueWriter,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)


def transitions(n, start=0):
    ids = torch.arange(start, start + n, dtype=torch.float32)
    return TensorDict(
        {
            "observation": ids[:, None].expand(n, 17).clone(),
            "action": ids[:, None].expand(n, 6).clone(),
            "done": torch.zeros(n, 1, dtype=torch.bool),
            "next": {
                "observation": ids[:, None].expand(n, 17).clone() + 1,
                "reward": ids[:, None].clone(),
                "done": torch.zeros(n, 1, dtype=torch.bool),
            },
        },
        [n],
    )


def test_extend_add_len_and_ring():
    rb = ReplayBuffer(storage=LazyTensorStorage(4))
    assert rb.extend(torch.arange(3)).tolist() == [0, 1, 2]
    assert rb.add(torch.tensor(10)) == 3
    assert len(rb) == 4
    assert rb.extend(torch.arange(20, 26)).tolist() == [0, 1, 2, 3, 0, 1]
    assert rb[:].tolist() == [24, 25, 22, 23]
    assert rb.writer._cursor == 2 and rb.writer._write_count == 10
    assert rb[1].item() == 25


@pytest.mark.parametrize("storage", [LazyTensorStorage, LazyMemmapStorage])
def test_indexing_sees_written_rows_only(storage):
    rb = TensorDictReplayBuffer(storage=storage(10))
    rb.extend(transitions(4))
    assert rb[:]["action"][:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert rb[-1]["next", "reward"].item() == 3.0
    assert rb[2:8].batch_size == (2,)
    assert rb[::-2]["action"][:, 0].tolist() == [3.0, 1.0]
    assert rb.storage[0]["action"].shape == (6,)
    with pytest.raises(IndexError, match="index 4 is out of range: the storage holds 4 rows"):
        rb[4]
    with pytest.raises(IndexError, match="index -5 is out of range"):
        rb[-5]


def test_sample_shapes_and_info():
    torch.manual_seed(0)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=8)
    rb.extend(transitions(20))
    sample, info = rb.sample(return_info=True)
    assert sample.batch_size == (8,)
    assert sorted(info) == ["index"]
    assert torch.equal(sample["index"], info["index"])
    assert torch.equal(sample["observation"][:, 0], info["index"].float())
    assert torch.equal(sample["next", "observation"][:, 0], info["index"].float() + 1)
    assert rb.sample(3)["action"].shape == (3, 6)


def test_two_dim_batches_are_stored_along_the_first_dim():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
    batch = TensorDict({"obs": torch.arange(12.0).view(2, 6, 1)}, [2, 6])
    assert rb.extend(batch).tolist() == [0, 1]
    assert len(rb) == 2
    sample = rb.sample()
    assert sample.batch_size == (4, 6)
    assert sample["index"].shape == (4, 6)
    assert rb.storage._storage.batch_size == (10, 6)
    assert "index" not in batch.keys()  # the caller's batch is left alone


def test_sample_without_batch_size_is_a_clear_error():
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(3))
    with pytest.raises(RuntimeError, match="batch_size not specified"):
        rb.sample()
    with pytest.raises(ValueError, match="batch_size"):
        rb.sample(0)
    with pytest.raises(RuntimeError, match="empty storage"):
        ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2).sample()


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="max_size"):
        LazyTensorStorage(0)
    with pytest.raises(ValueError, match="max_size"):
        LazyMemmapStorage(-3)
    with pytest.raises(ValueError, match="max_size"):
        ListStorage(0)
    with pytest.raises(ValueError, match="batch_size"):
        ReplayBuffer(batch_size=-1)
    with pytest.raises(ValueError, match="prefetch"):
        ReplayBuffer(prefetch=0.5)
    with pytest.raises(NotImplementedError, match="ndim=2"):
        LazyTensorStorage(10, ndim=2)
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedReplayBuffer(alpha=-1, beta=0.5, storage=LazyTensorStorage(4))
    with pytest.raises(TypeError, match="storage must be"):
        ReplayBuffer(storage=42)
    with pytest.raises(NotImplementedError, match="shared"):
        ReplayBuffer(shared=True)
    with pytest.raises(ValueError, match="TensorDict"):
        TensorDictReplayBuffer(storage=LazyTensorStorage(4)).extend(torch.zeros(3))


def test_iteration_walks_one_epoch():
    rb = ReplayBuffer(
        storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(), batch_size=4
    )
    rb.extend(torch.arange(10))
    for _ in range(2):
        batches = list(rb)
        assert [len(b) for b in batches] == [4, 4, 2]
        assert sorted(torch.cat(batches).tolist()) == list(range(10))
    rb_drop = ReplayBuffer(
        storage=LazyTensorStorage(10),
        sampler=SamplerWithoutReplacement(drop_last=True),
        batch_size=4,
    )
    rb_drop.extend(torch.arange(10))
    assert [len(b) for b in rb_drop] == [4, 4]
    with pytest.raises(RuntimeError, match="batch_size"):
        iter(ReplayBuffer(storage=LazyTensorStorage(4))).__next__()


def test_random_sampler_iteration_does_not_end():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=RandomSampler(), batch_size=2)
    rb.extend(torch.arange(10))
    it = iter(rb)
    assert all(len(next(it)) == 2 for _ in range(25))


def test_list_storage_any_objects():
    rb = ReplayBuffer(storage=ListStorage(3), batch_size=2)
    rb.extend(["a", {"b": 1}, 3])
    sample = rb.sample()
    assert isinstance(sample, list) and len(sample) == 2
    rb.extend([torch.tensor(1.0)] * 3)
    assert rb.sample(5).shape == (5,)
    unbounded = ReplayBuffer(storage=ListStorage())
    unbounded.extend(list(range(5000)))
    assert len(unbounded) == 5000


def test_empty():
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=1.0, beta=1.0, storage=LazyTensorStorage(8), batch_size=2
    )
    rb.extend(transitions(5))
    rb.empty()
    assert len(rb) == 0 and rb.writer._cursor == 0 and rb.writer._write_count == 0
    assert float(rb.sampler._tree.total()) == 0.0
    with pytest.raises(RuntimeError, match="empty storage"):
        rb.sample()
    rb.extend(transitions(2))
    assert len(rb) == 2


def test_transform_and_inverse():
    class Scale:
        def __call__(self, data):
            return data * 10

        def inv(self, data):
            return data + 1

    rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=Scale(), batch_size=3)
    rb.extend(torch.zeros(5))
    assert rb[:5].tolist() == [1.0] * 5
    assert rb.sample().tolist() == [10.0] * 3
    rb.append_transform(lambda x: x - 1)
    assert rb.sample().tolist() == [9.0] * 3


def test_prioritized_buffer_end_to_end():
    torch.manual_seed(0)
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(16), batch_size=64
    )
    data = transitions(4)
    data["td_error"] = torch.tensor([0.0, 0.0, 1.0, 3.0])
    rb.extend(data)
    sample, info = rb.sample(return_info=True)
    assert sorted(info) == ["index", "priority_weight"]
    assert set(sample["index"].tolist()) <= {2, 3}
    expected = torch.where(sample["index"] == 2, 1.0, 1 / 3)
    assert torch.allclose(sample["priority_weight"], expected)
    # update through the sampled TensorDict, then through the alias
    sample["td_error"] = torch.where(sample["index"] == 2, 0.0, 5.0)
    rb.update_tensordict_priority(sample)
    assert rb.sampler._tree[torch.tensor([2, 3])].tolist() == [0.0, 5.0]
    rb.update_priorities(torch.tensor([0]), torch.tensor([5.0]))
    assert set(rb.sample()["index"].tolist()) == {0, 3}
    rb.update_priority(sample)  # TensorDict form reads index and td_error
    plain = PrioritizedReplayBuffer(alpha=0.5, beta=0.5, storage=LazyTensorStorage(8))
    plain.extend(torch.arange(8.0))
    plain.update_priority(torch.arange(8), torch.arange(8.0))
    assert 0 not in plain.sample(200).tolist()


def test_extend_can_skip_the_priority_entry():
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(4))
    data = TensorDict({"x": torch.zeros(2), "td_error": torch.tensor([4.0, 0.5])}, [2])
    rb.extend(data, update_priority=False)
    assert rb.sampler._tree[torch.tensor([0, 1])].tolist() == [1.0, 1.0]
    rb.extend(data)
    assert rb.sampler._tree[torch.tensor([2, 3])].tolist() == [4.0, 0.5]


def test_max_value_writer():
    rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(3), writer=TensorDictMaxValueWriter(rank_key="r"), batch_size=2
    )
    assert rb.extend(TensorDict({"r": torch.tensor([1.0, 5.0, 3.0]), "x": torch.arange(3)}, [3])).tolist() == [0, 1, 2]
    assert rb.extend(TensorDict({"r": torch.tensor([2.0, 0.0, 9.0]), "x": torch.arange(3, 6)}, [3])).tolist() == [-1, -1, 0]
    assert rb.storage._storage["r"].tolist() == [9.0, 5.0, 3.0]
    assert rb.storage._storage["x"].tolist() == [5, 1, 2]
    assert rb.add(TensorDict({"r": torch.tensor(0.5), "x": torch.tensor(9)}, [])) is None
    assert rb.add(TensorDict({"r": torch.tensor(7.0), "x": torch.tensor(9)}, [])) == 2
    assert rb.storage._storage["r"].tolist() == [9.0, 5.0, 7.0]
    with pytest.raises(KeyError, match="rank_key"):
        rb.extend(TensorDict({"x": torch.arange(2)}, [2]))


def test_prefetch_returns_batches_and_stops():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=5, prefetch=3)
    rb.extend(transitions(50))
    for _ in range(20):
        sample = rb.sample()
        assert sample.batch_size == (5,)
        assert torch.equal(sample["observation"][:, 0], sample["index"].float())
    assert rb.sample(7).batch_size == (7,)  # another size bypasses the prefetch queue
    rb.close()
    assert rb.sample().batch_size == (5,)


def test_state_dict_round_trip_with_weights_only_torch_save():
    torch.manual_seed(0)
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=0.6, beta=0.4, storage=LazyTensorStorage(32), batch_size=4
    )
    rb.extend(transitions(20))
    rb.update_priority(torch.arange(20), torch.rand(20))
    buffer = io.BytesIO()
    torch.save(rb.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    other = TensorDictPrioritizedReplayBuffer(
        alpha=0.6, beta=0.4, storage=LazyTensorStorage(32), batch_size=4
    )
    other.load_state_dict(state)
    assert len(other) == 20 and other.writer._cursor == 20
    assert torch.equal(other.sampler._tree.leaves(), rb.sampler._tree.leaves())
    assert torch.equal(other[:20]["observation"], rb[:20]["observation"])
    torch.manual_seed(3)
    a = rb.sample()
    torch.manual_seed(3)
    b = other.sample()
    assert torch.equal(a["index"], b["index"]) and torch.equal(a["priority_weight"], b["priority_weight"])
