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
    with pytest.warns(UserWarning, match="conflicting batch_sizes in constructor \\(8\\) and `sample` \\(3\\)"):
        assert rb.sample(3)["action"].shape == (3, 6)  # TorchRL's warning, once per buffer
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
    with pytest.raises(ValueError, match="ndim must be a positive integer, got ndim=0"):
        LazyTensorStorage(10, ndim=0)
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedReplayBuffer(alpha=-1, beta=0.5, storage=LazyTensorStorage(4))
    with pytest.raises(TypeError, match="storage must be"):
        ReplayBuffer(storage=42)
    with pytest.raises(NotImplementedError, match=r"ReplayBuffer\(sample_unit=...\): TorchRL's sample units"):
        ReplayBuffer(sample_unit=object())
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
    with pytest.warns(UserWarning, match="conflicting batch_sizes"):
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
    assert rb.storage[:5].tolist() == [1.0] * 5
    assert rb[:5].tolist() == [10.0] * 5  # reads by index are transformed too, as TorchRL's
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
    with pytest.warns(UserWarning, match="conflicting batch_sizes"):
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


# ------------------------------------------- bad input is refused before anything changes
def prioritized_full(capacity=8):
    """A full, wrapped prioritized buffer with distinct priorities (torn writes would show)."""
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(capacity), batch_size=4
    )
    data = transitions(capacity + 3)
    data["count"] = torch.arange(capacity + 3)
    data["td_error"] = torch.ones(capacity + 3, dtype=torch.float64)
    rb.extend(data)
    rb.update_priority(torch.arange(capacity), torch.arange(1.0, capacity + 1.0))
    return rb


def snapshot(rb):
    return {
        "rows": rb.storage._storage.clone(),
        "len": len(rb),
        "writer": rb.writer.state_dict(),
        "leaves": rb.sampler._tree.leaves().clone(),
        "max": float(rb.sampler.default_priority),
        "total": float(rb.sampler._tree.total()),
    }


def assert_unchanged(rb, before):
    after = snapshot(rb)
    assert (after["rows"] == before["rows"]).all()
    assert {k: v for k, v in after.items() if k not in ("rows", "leaves")} == {
        k: v for k, v in before.items() if k not in ("rows", "leaves")
    }
    assert torch.equal(after["leaves"], before["leaves"])


BAD_PRIORITIES = [
    (float("nan"), "nan"),
    (float("inf"), "inf"),
    (float("-inf"), "-inf"),
    (-0.5, "negative"),
    (1e39, "overflows"),  # (p + eps) ** alpha does not fit the float32 tree
]


@pytest.mark.parametrize("bad, why", BAD_PRIORITIES)
@pytest.mark.parametrize("route", ["update_priority", "update_tensordict_priority", "extend"])
def test_bad_priorities_are_refused_naming_the_index(bad, why, route):
    rb = prioritized_full()
    before = snapshot(rb)
    priority = torch.ones(4, dtype=torch.float64)
    priority[2] = bad
    where = r"index 2 of the batch" if route == "extend" else r"index 5\b"
    with pytest.raises(ValueError, match=rf"{where}.*{why}|{why}.*{where}"):
        if route == "update_priority":
            rb.update_priority(torch.tensor([3, 4, 5, 6]), priority)
        elif route == "update_tensordict_priority":
            rb.update_tensordict_priority(
                TensorDict({"index": torch.tensor([3, 4, 5, 6]), "td_error": priority}, [4])
            )
        else:  # the buffer's cursor is at 3: these rows land at 3, 4, 5, 6
            data = transitions(4)
            data["count"] = torch.arange(4)
            data["td_error"] = priority
            rb.extend(data)
    assert_unchanged(rb, before)
    assert rb.sample()["index"].shape == (4,)  # still samples


def test_priority_index_past_the_written_rows_is_refused():
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(256))
    rb.extend(transitions(28))
    before = rb.sampler._tree.leaves().clone()
    with pytest.raises(IndexError, match=r"index 100 .*28 items"):
        rb.update_priority(torch.tensor([1, 100, 2]), torch.tensor([1.0, 9.0, 1.0]))
    assert torch.equal(rb.sampler._tree.leaves(), before)
    rb.update_priority(torch.tensor([27]), torch.tensor([2.0]))  # the last written row is fine
    assert set(rb.sample(256)["index"].tolist()) <= set(range(28))


def test_extend_refuses_a_bad_batch_before_writing_any_key():
    rb = prioritized_full()
    before = snapshot(rb)

    def batch():
        data = transitions(4, start=100)
        data["count"] = torch.arange(100, 104)
        data["td_error"] = torch.ones(4, dtype=torch.float64)
        return data

    missing = batch()
    del missing["next", "done"]
    with pytest.raises(KeyError, match=r"\('next', 'done'\)"):
        rb.extend(missing)
    extra = batch()
    extra["new_key"] = torch.zeros(4)
    with pytest.raises(KeyError, match="new_key"):
        rb.extend(extra)
    broadcast = batch()
    broadcast["next", "observation"] = torch.zeros(4, 1)  # would broadcast to [4, 17]
    with pytest.raises(ValueError, match=r"\('next', 'observation'\).*\[4, 1\].*\[4, 17\]"):
        rb.extend(broadcast)
    lossy = batch()
    lossy["count"] = torch.full((4,), 0.9)
    with pytest.raises(ValueError, match="'count'.*float32.*int64"):
        rb.extend(lossy)
    # the wrap-around: rows 6, 7 would be exact, rows 0, 1 not; nothing lands
    rb.extend(batch()[:3])
    before = snapshot(rb)
    wrapping = batch()
    wrapping["count"] = torch.tensor([1.0, 2.0, 3.5, 4.0])
    with pytest.raises(ValueError, match="'count'"):
        rb.extend(wrapping)
    assert_unchanged(rb, before)
    with pytest.raises(ValueError, match="'count'"):
        rb.add(wrapping[2])
    assert_unchanged(rb, before)
    # exact casts are accepted: integral floats into an integer leaf, int32 into int64
    exact = batch()
    exact["count"] = torch.tensor([7.0, 8.0, 9.0, 10.0])
    exact["next", "done"] = torch.zeros(4, 1, dtype=torch.int32)
    rb.extend(exact)
    assert rb.storage._storage["count"][6:8].tolist() == [7, 8]
    assert rb.storage._storage["count"].dtype == torch.int64


def test_extend_of_tensors_refuses_broadcast_shapes_and_lossy_casts():
    rb = ReplayBuffer(storage=LazyTensorStorage(6))
    rb.extend(torch.arange(8).reshape(4, 2))
    before = rb.storage._storage.clone()
    with pytest.raises(ValueError, match=r"\[3, 1\].*\[3, 2\]"):
        rb.extend(torch.zeros(3, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="float32.*int64"):
        rb.extend(torch.full((3, 2), 0.5))
    assert torch.equal(rb.storage._storage, before) and len(rb) == 4 and rb.writer._cursor == 4


def test_add_with_a_bad_priority_writes_nothing():
    rb = prioritized_full()
    before = snapshot(rb)
    item = transitions(1)[0]
    item["count"] = torch.tensor(0)
    item["td_error"] = torch.tensor(float("nan"), dtype=torch.float64)
    with pytest.raises(ValueError, match="index 0 of the batch is NaN"):
        rb.add(item)
    assert_unchanged(rb, before)


def test_priority_tree_refuses_bad_values():
    from reap_replay import PriorityTree

    tree = PriorityTree(8)
    tree.update(torch.tensor([0, 1]), torch.tensor([1.0, 2.0]))
    for bad, why in [(float("nan"), "NaN"), (-1.0, "negative"), (1e39, "overflows")]:
        with pytest.raises(ValueError, match=f"index 3 {why}|at index 3 is {why}"):
            tree.update(torch.tensor([2, 3]), torch.tensor([1.0, bad], dtype=torch.float64))
        with pytest.raises(ValueError, match=f"leaf 5 holds .* {why}|leaf 5 holds .*is {why}"):
            tree.load_leaves(torch.zeros(8, dtype=torch.float64).index_fill_(0, torch.tensor([5]), bad))
    assert tree.leaves().tolist() == [1.0, 2.0] + [0.0] * 6 and float(tree.total()) == 3.0
