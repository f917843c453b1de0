"""TorchRL 0.14.1's replay API without TorchRL: its keywords, methods and errors, with values
recorded from TorchRL for the same seeds (test_torchrl_compat.py runs both side by side)."""

import multiprocessing
import pickle

import pytest
import torch
from tensordict import TensorDict, tensorclass

from reap_replay import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedReplayBuffer,
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    RemoteTensorDictReplayBuffer,
    ReplayBuffer,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    TensorDictMaxValueWriter,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
    TensorStorage,
)

# ------------------------------------------------------------------------------- keywords


def test_torchrl_keywords_at_a_local_buffers_values_are_taken():
    rb = ReplayBuffer(storage=LazyTensorStorage(10, compilable=False), compilable=False, prefetch=0,
                      shared=False, delayed_init=False, service_backend="direct", transport="auto",
                      transport_options=None, sample_unit=None, checkpointer=None, batch_size=2)
    rb.extend(torch.arange(4))
    assert rb._prefetch is False and rb.initialized and rb.dim_extend == 0
    assert rb.stats() == {"size": 4, "write_count": 4, "prefetch_queue_size": 0, "initialized": True,
                          "capacity": 10, "utilization": 0.4}


@pytest.mark.parametrize("kwargs, error, match", [
    ({"sample_unit": object()}, NotImplementedError, r"sample_unit=...\): TorchRL's sample units .* SliceSampler"),
    ({"checkpointer": object()}, NotImplementedError, r"rb.dumps\(path\).*pass checkpointer=None"),
    ({"consume_after_n_samples": 1}, NotImplementedError, "SamplerWithoutReplacement draws each item once"),
    ({"service_backend": "ray"}, NotImplementedError, "reap_ray.RayReplayBuffer"),
    ({"service_backend": "grpc"}, ValueError, "Unsupported service backend 'grpc'"),
    ({"transport": "distributed"}, ValueError, "only supports transport='auto' or 'direct'"),
    ({"transport_options": {"backend": "gloo"}}, ValueError, "only valid for a remote ReplayBuffer"),
    ({"dim_extend": -1}, ValueError, "dim_extend must be a positive value"),
    ({"dim_extend": 1}, NotImplementedError, "transpose the data before extend"),
    ({"prefetch": 2}, ValueError, "When using prefetch, the batch-size must be specified"),
    ({"prefetch": 2, "batch_size": 4, "shared": True}, ValueError, "Cannot share prefetched replay buffers"),
    ({"sampler": SamplerWithoutReplacement(drop_last=True)}, ValueError, "Samplers with drop_last=True"),
    ({"transform": lambda x: x, "transform_factory": lambda: None}, TypeError, "mutually exclusive"),
    ({"compilable": "yes"}, TypeError, "compilable must be True, False or None"),
])
def test_options_reap_cannot_honour_fail_at_construction(kwargs, error, match):
    with pytest.raises(error, match=match):
        ReplayBuffer(**kwargs)


def test_prioritized_buffers_keywords():
    with pytest.raises(NotImplementedError, match=r"sync=False.*update_priority"):
        PrioritizedReplayBuffer(alpha=1.0, beta=1.0, sync=False)
    with pytest.raises(TypeError, match="sampler_device cannot be passed when sampler is provided"):
        PrioritizedReplayBuffer(alpha=1.0, beta=1.0, sampler=RandomSampler(), sampler_device="cpu")
    rb = PrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(4), sampler=RandomSampler())
    assert isinstance(rb.sampler, RandomSampler)  # a given sampler is used, as TorchRL does
    td = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(4))
    assert td.prioritized_sampler is td.sampler
    with pytest.raises(ValueError, match="finite max_size"):
        PrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=ListStorage())


def test_replacement_false_builds_the_sampler_without_replacement():
    assert type(RandomSampler(replacement=False, drop_last=True)) is SamplerWithoutReplacement
    assert RandomSampler(replacement=False, drop_last=True).drop_last
    assert type(SliceSampler(replacement=False, num_slices=2)) is SliceSamplerWithoutReplacement
    with pytest.raises(TypeError, match="PrioritizedSampler has no without-replacement variant"):
        PrioritizedSampler(4, 1.0, 1.0, replacement=False)


# ------------------------------------------------------------------------- buffer methods


def test_in_place_writes_keep_the_cursor_and_the_length():
    rb = ReplayBuffer(storage=LazyTensorStorage(102))
    rb.extend(TensorDict({"a": torch.arange(100), ("b", "c"): torch.arange(100)}, [100]))
    rb[3:4] = TensorDict({"a": torch.tensor([0]), ("b", "c"): torch.tensor([0])}, [1])
    rb[torch.arange(30, 32)] = TensorDict({"a": torch.tensor([0, 0]), ("b", "c"): torch.tensor([0, 0])}, [2])
    assert len(rb) == 100 and rb._writer._cursor == 100 and rb.write_count == 100
    assert rb["a"][:5].tolist() == [0, 1, 2, 0, 4]
    assert rb["b", "c"][29:33].tolist() == [29, 0, 0, 32]
    with pytest.raises(NotImplementedError, match=r"rb.set_\(key, value\)"):
        rb["a"] = torch.zeros(100)
    rb.set_("a", torch.full((100,), 7))
    rb.set_at_("a", torch.tensor([1, 2]), torch.tensor([0, 1]))
    assert rb["a"][:3].tolist() == [1, 2, 7]


def test_transforms_apply_to_reads_and_their_inverse_to_writes():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
    rb.append_transform(lambda x: x + 1, invert=True)  # on writes
    rb.append_transform(lambda x: x * 10)  # on reads
    rb.extend(torch.zeros(4))
    rb[0] = torch.tensor(5.0)
    assert rb.storage[:].tolist() == [6.0, 1.0, 1.0, 1.0]
    assert rb[:].tolist() == [60.0, 10.0, 10.0, 10.0]
    rb.insert_transform(0, lambda x: x - 1)
    assert rb[1].item() == 0.0 and len(rb.transform) == 3
    with pytest.raises(ValueError, match=r"Index expected to be between \[-3, 3\] got index=4"):
        rb.insert_transform(4, lambda x: x)
    with pytest.raises(RuntimeError, match="transform must be either a Transform instance or a callable"):
        rb.append_transform(42)


def test_generator_state_is_in_state_dict_and_checkpoints(tmp_path):
    rb = ReplayBuffer(storage=LazyTensorStorage(100), generator=torch.Generator().manual_seed(3))
    rb.extend(torch.arange(100))
    state = rb.state_dict()
    rb.dumps(tmp_path)
    first = rb.sample(8)
    assert not torch.equal(first, rb.sample(8))
    rb.load_state_dict(state)
    assert torch.equal(rb.sample(8), first)
    rb.loads(tmp_path)
    assert torch.equal(rb.sample(8), first)


def test_iteration_with_next_and_a_batch_size_warning():
    torch.manual_seed(0)
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(), batch_size=4)
    rb.extend(torch.arange(10))
    assert [b.tolist() for b in rb] == [[4, 1, 7, 5], [3, 9, 0, 8], [6, 2]]  # TorchRL's draws
    assert [b.tolist() for b in rb] == [[3, 9, 4, 2], [7, 8, 6, 0], [5, 1]]
    assert [len(rb.next()) for _ in range(3)] == [4, 4, 2] and rb.next() is None
    with pytest.warns(UserWarning, match=r"conflicting batch_sizes in constructor \(4\) and `sample` \(3\)"):
        rb.sample(3)
    with pytest.raises(RuntimeError, match="Cannot iterate over the replay buffer. Batch_size was not specified"):
        list(ReplayBuffer())


def test_a_plain_sampler_warns_on_priorities_and_can_sample_says_when_it_can():
    rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=SamplerWithoutReplacement(drop_last=True), batch_size=3)
    assert not rb.can_sample()
    rb.extend(torch.arange(2))
    assert not rb.can_sample() and rb.can_sample(2)
    with pytest.warns(UserWarning, match="update_priority\\(\\) on a sampler SamplerWithoutReplacement that is not"):
        rb.update_priority(torch.tensor([0]), torch.tensor([1.0]))


def test_tensordict_buffer_include_info():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8), batch_size=2)
    rb.extend(TensorDict({"a": torch.arange(5)}, [5]))
    with pytest.warns(UserWarning, match="include_info is going to be deprecated"):
        assert sorted(rb.sample(include_info=False).keys()) == ["a"]
    with pytest.raises(ValueError, match="only accepts TensorDictBase subclasses.*regular `ReplayBuffer`"):
        rb.extend(torch.zeros(3))


def test_remote_buffer_methods_take_an_rref_in_place_of_the_buffer():
    """TorchRL's RemoteTensorDictReplayBuffer: ``rpc_sync(owner, Cls.sample, args=(rref, n))``."""
    rb = RemoteTensorDictReplayBuffer(storage=LazyTensorStorage(8), batch_size=2)

    class RRef:  # what torch.distributed.rpc hands a method: the owner's object via local_value
        def local_value(self):
            return rb

    RemoteTensorDictReplayBuffer.extend(RRef(), TensorDict({"a": torch.arange(3)}, [3]))
    assert len(rb) == 3 and RemoteTensorDictReplayBuffer.sample(RRef()).batch_size == (2,)
    assert RemoteTensorDictReplayBuffer.__len__(rb) == 3  # called locally as usual


# ---------------------------------------------------------------------------------- storages


def test_storages_take_ranges_lists_and_arrays():
    s = LazyTensorStorage(10)
    s.set(range(4), torch.arange(4) * 2)
    assert s.get(range(1, 3)).tolist() == [2, 4] and s.get([3, 0]).tolist() == [6, 0]
    assert list(s) == [torch.tensor(v) for v in (0, 2, 4, 6)] and 3 in s and 4 not in s
    lists = ListStorage(3)
    lists.set(range(3), range(3))
    assert lists.get([2, 0]) == [2, 0] and lists[1] == 1
    with pytest.raises(RuntimeError, match="more than one item away from the storage size"):
        ListStorage(5).set(2, "x")
    with pytest.raises(RuntimeError, match="maximum capacity is 3 and the index of the item to be set is 3"):
        lists.set(3, "x")
    with pytest.raises(TypeError, match="Cannot extend a ListStorage with data of type int"):
        lists.set([0], 5)
    with pytest.raises(RuntimeError, match="can only be indexed with one-length tuples"):
        lists.get((0, 1))


def test_tensor_storage_over_given_tensors_is_full():
    s = TensorStorage(torch.arange(10.0).view(5, 2))
    assert len(s) == 5 and s[4].tolist() == [8.0, 9.0]
    with pytest.raises(ValueError, match="Expected storage to be non-null"):
        TensorStorage(None)
    with pytest.raises(ValueError, match=r"max-size and the storage shape mismatch: got max_size=4"):
        TensorStorage(torch.zeros(3), max_size=4)
    with pytest.raises(RuntimeError, match="Cannot get elements out of a non-initialized storage"):
        LazyTensorStorage(3).get(0)


@tensorclass
class Pair:
    x: torch.Tensor
    y: torch.Tensor


def test_pytrees_tensorclasses_and_lists_of_items_in_tensor_storages():
    rb = ReplayBuffer(storage=LazyMemmapStorage(10), batch_size=3)
    rb.extend({"a": torch.arange(4), "b": (torch.ones(4, 2), [torch.zeros(4)])})
    rb.add({"a": torch.tensor(9), "b": (torch.ones(2), [torch.zeros(())])})
    out = rb[:]
    assert out["a"].tolist() == [0, 1, 2, 3, 9] and out["b"][0].shape == (5, 2)
    assert isinstance(out["b"], tuple) and isinstance(out["b"][1], list)
    with pytest.raises(ValueError, match="is not the storage's"):
        rb.extend({"a": torch.arange(2)})
    pairs = ReplayBuffer(storage=LazyTensorStorage(10))
    pairs.extend(Pair(x=torch.arange(3), y=torch.zeros(3, 2), batch_size=[3]))
    assert isinstance(pairs[1:], Pair) and pairs[1:].x.tolist() == [1, 2]
    items = ReplayBuffer(storage=LazyTensorStorage(10))
    items.extend([torch.tensor([1, 2]), torch.tensor([3, 4])])
    assert items[:].tolist() == [[1, 2], [3, 4]]
    with pytest.raises(RuntimeError, match="Stacking the elements of the list resulted in an error"):
        items.extend([torch.zeros(2), torch.zeros(3)])


@tensorclass
class Transition:
    obs: torch.Tensor
    next: Pair


@tensorclass
class Labelled:
    x: torch.Tensor
    text: str


@pytest.mark.parametrize("make", [LazyTensorStorage, LazyMemmapStorage])
def test_a_nested_tensorclass_comes_back_with_its_classes(make):
    data = Transition(obs=torch.arange(12.0).view(3, 4), batch_size=[3, 4],
                      next=Pair(x=-torch.arange(12.0).view(3, 4), y=torch.zeros(3, 4, 2), batch_size=[3, 4]))
    storage = make(10)
    storage.set(list(range(3)), data)
    got = storage.get([1])
    assert type(got) is Transition and type(got.next) is Pair and got.shape == (1, 4)
    assert got.next.x.tolist() == [[-4.0, -5.0, -6.0, -7.0]] and got.obs.tolist() == [[4.0, 5.0, 6.0, 7.0]]
    # a str field is not a tensor: refused, naming it (TorchRL keeps one string per item)
    with pytest.raises(TypeError, match=r"^LazyTensorStorage stores tensors: the tensorclass field 'text' holds "
                                        r"NonTensorData data; keep it out of the stored data, or use ListStorage$"):
        LazyTensorStorage(10).set(range(3), Labelled(x=torch.arange(3), text="some text", batch_size=[3]))


def test_memmap_cleanup(tmp_path):
    s = LazyMemmapStorage(4, scratch_dir=tmp_path / "mm")
    s.set(range(2), torch.zeros(2))
    assert s.cleanup() is True and not (tmp_path / "mm").exists() and s.cleanup() is False


def test_component_checkpoints(tmp_path):
    s = LazyTensorStorage(10)
    s.set(range(3), TensorDict({"a": torch.arange(3)}, [3]))
    s.dumps(tmp_path / "storage")
    other = LazyTensorStorage(10)
    other.loads(tmp_path / "storage")
    assert other[:]["a"].tolist() == [0, 1, 2]
    writer = TensorDictMaxValueWriter(rank_key="a")
    writer.register_storage(other)
    writer.extend(TensorDict({"a": torch.arange(3)}, [3]))
    writer.dumps(tmp_path / "writer")
    loaded = TensorDictMaxValueWriter(rank_key="a")
    loaded.loads(tmp_path / "writer")
    assert loaded._ranks[:3].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(Exception, match="holds the state of a 'TensorDictMaxValueWriter', not of a"):
        SamplerWithoutReplacement().loads(tmp_path / "writer")


# ------------------------------------------------------------------------------------ writers


def test_max_value_writer_refuses_other_data_and_works_over_a_list():
    rb = ReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictMaxValueWriter())
    with pytest.raises(RuntimeError, match="TensorDictMaxValueWriter expects data to be a tensor collection"):
        rb.add(torch.zeros(1))
    with pytest.raises(RuntimeError, match="expects data to be a tensor collection"):
        rb.extend({"a": torch.zeros(2)})
    lists = TensorDictReplayBuffer(storage=ListStorage(3), writer=TensorDictMaxValueWriter(rank_key="r"))
    assert lists.extend(TensorDict({"r": torch.tensor([1.0, 5.0, 3.0])}, [3])).tolist() == [0, 1, 2]
    assert lists.extend(TensorDict({"r": torch.tensor([2.0, 0.0, 9.0])}, [3])).tolist() == [-1, -1, 0]
    assert sorted(lists[:]["r"].tolist()) == [3.0, 5.0, 9.0]


# ----------------------------------------------------------------------------------- samplers


def trajectories(n_traj=5, length=6):
    return TensorDict({"obs": torch.arange(n_traj * length), "episode": torch.arange(n_traj * length) // length},
                      [n_traj * length])


def test_slices_of_a_full_ring_are_torchrls():
    torch.manual_seed(0)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(6), sampler=SliceSampler(slice_len=3), batch_size=6)
    rb.extend(TensorDict({"obs": torch.arange(9), "next": {"done": torch.zeros(9, 1, dtype=torch.bool)}}, [9]))
    sample = rb.sample()
    assert sample["obs"].tolist() == [3, 4, 5, 3, 4, 5]  # TorchRL's, seed 0
    assert sample["next", "done"].view(-1).tolist() == [False, False, True] * 2
    assert sample["index"].shape == (6, 1)


def test_padded_slices_are_torchrls():
    torch.manual_seed(0)
    data = TensorDict({"traj": torch.tensor([1, 1] + [0] * 10), "x": torch.arange(12),
                       "is_init": torch.zeros(12, 1, dtype=torch.bool)}, [12])
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(12), batch_size=8, sampler=SliceSampler(
        num_slices=2, traj_key="traj", strict_length=False, pad_output=True))
    rb.extend(data)
    s = rb.sample()
    assert s["x"].tolist() == [0, 1, 1, 1, 2, 3, 4, 5]
    assert s["collector", "mask"].tolist() == [True, True, False, False, True, True, True, True]
    assert s["next", "truncated"].view(-1).tolist() == [False, True, False, False, False, False, False, True]
    assert s["is_init"].view(-1).tolist() == [True, False, False, False, True, False, False, False]


def test_spanning_slices_are_torchrls():
    torch.manual_seed(0)
    data = TensorDict({"obs": torch.arange(1, 11).repeat(10), "eps": torch.arange(100) // 10 + 1}, [100])
    rb = TensorDictReplayBuffer(sampler=SliceSampler(num_slices=5, traj_key="eps", span=(2, 2)),
                                batch_size=25, storage=LazyMemmapStorage(100))
    rb.extend(data)
    s = rb.sample()
    assert s["obs"].tolist() == [5, 6, 7, 8, 9, 3, 4, 5, 6, 7, 7, 8, 9, 10, 3, 4, 5, 6, 7, 5, 6, 7, 8, 9]
    assert s["next", "truncated"].view(-1).nonzero().view(-1).tolist() == [4, 9, 13, 18, 23]


def test_slices_without_replacement_are_torchrls():
    torch.manual_seed(0)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=10,
                                sampler=SliceSamplerWithoutReplacement(num_slices=2, traj_key="episode"))
    rb.extend(trajectories())
    assert [b["obs"].tolist() for b in rb] == [
        [24, 25, 26, 27, 28, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 19, 20, 21, 22, 23], [12, 13, 14, 15, 16]]


def test_slices_from_end_keys_or_static_ends():
    done = torch.zeros(20, 1, dtype=torch.bool).index_fill_(0, torch.tensor([4, 19]), True)
    truncated = torch.zeros(20, 1, dtype=torch.bool).index_fill_(0, torch.tensor([9]), True)
    data = TensorDict({"obs": torch.arange(20), "next": {"done": done, "truncated": truncated}}, [20])
    storage = LazyTensorStorage(20)
    storage.set(range(20), data)
    for sampler in (SliceSampler(slice_len=5, end_keys=[("next", "done"), ("next", "truncated")]),
                    SliceSampler(slice_len=5, ends=(done | truncated).squeeze(1), cache_values=True)):
        starts = {int(sampler.sample(storage, 5)[0][0]) for _ in range(40)}
        assert starts <= {0, 5, 10, 11, 12, 13, 14, 15}  # trajectories 0-4, 5-9, 10-19
        assert {0, 5} <= starts
    with pytest.raises(RuntimeError, match="requires `cache_values` to be set to `True`"):
        SliceSampler(slice_len=2, ends=done.squeeze(1))
    with pytest.raises(RuntimeError, match="`end_key` and `end_keys` are exclusive"):
        SliceSampler(slice_len=2, end_key="a", end_keys=["b"])
    with pytest.raises(NotImplementedError, match="fragmented=True"):
        SliceSampler(slice_len=2, fragmented=True)


def test_cached_trajectories_are_found_again_after_a_write():
    storage = LazyTensorStorage(20)
    storage.set(range(6), TensorDict({"episode": torch.tensor([0, 0, 0, 1, 1, 1])}, [6]))
    sampler = SliceSampler(slice_len=3, traj_key="episode", cache_values=True)
    assert sampler._bounds(storage)[1].tolist() == [3, 3]
    storage.set(range(6, 9), TensorDict({"episode": torch.tensor([2, 2, 2])}, [3]))
    assert sampler._bounds(storage)[1].tolist() == [3, 3, 3]


def test_prioritized_slices_start_where_the_priorities_are():
    torch.manual_seed(0)
    storage = LazyTensorStorage(30)
    storage.set(range(30), trajectories())
    sampler = PrioritizedSliceSampler(30, 1.0, 1.0, eps=0.0, slice_len=3, traj_key="episode")
    sampler.extend(torch.arange(30))
    priority = torch.zeros(30)
    priority[[4, 5, 13]] = 1.0  # 4, 5: too near their trajectory's end to start a slice
    sampler.update_priority(torch.arange(30), priority)
    index, info = sampler.sample(storage, 12)
    assert index.tolist() == [13, 14, 15] * 4
    assert info["priority_weight"].tolist() == [1.0] * 12
    assert info["next", "truncated"].view(-1).tolist() == [False, False, True] * 4
    short = PrioritizedSliceSampler(30, 1.0, 1.0, slice_len=8, traj_key="episode", strict_length=False)
    short.extend(torch.arange(30))
    index, _ = short.sample(storage, 16)
    assert index.numel() == 12 and index.tolist()[:6] in ([0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11],
                                                       [12, 13, 14, 15, 16, 17], [18, 19, 20, 21, 22, 23],
                                                       [24, 25, 26, 27, 28, 29])
    with pytest.warns(UserWarning, match="Left spanning is disabled for PrioritizedSliceSampler"):
        assert PrioritizedSliceSampler(4, 1.0, 1.0, slice_len=2, span=True).span == (0, True)


# ------------------------------------------------------------------------- other processes


def test_plain_pickles_are_independent_copies():
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(8), batch_size=2,
                                           prefetch=2, generator=torch.Generator().manual_seed(0))
    rb.extend(TensorDict({"a": torch.arange(4)}, [4]))
    copy = pickle.loads(pickle.dumps(rb))
    copy.extend(TensorDict({"a": torch.arange(4, 6)}, [2]))
    assert len(rb) == 4 and len(copy) == 6 and copy.sample()["a"].shape == (2,)
    assert rb.__dict__.keys() == copy.__dict__.keys()


def test_a_buffer_sent_to_a_spawned_process_shares_its_rows_and_counters():
    ctx = multiprocessing.get_context("spawn")
    buffers = [TensorDictReplayBuffer(storage=storage(21), batch_size=4, prefetch=1)
               for storage in (LazyTensorStorage, LazyMemmapStorage)]
    for rb in buffers:
        rb.extend(TensorDict({"a": torch.zeros(10)}, [10]))
    data = [TensorDict({"a": torch.ones(10)}, [10])] * 2
    # one child (a process costs seconds) runs rb.extend(data) on its copy of each buffer
    child = ctx.Process(target=list, args=(map(TensorDictReplayBuffer.extend, buffers, data),))
    child.start()
    try:
        child.join(120)
        assert child.exitcode == 0
        for rb in buffers:
            assert len(rb) == 20 and rb.write_count == 20 and rb["a"].tolist() == [0.0] * 10 + [1.0] * 10
            rb.extend(TensorDict({"a": torch.full((3,), 2.0)}, [3]))  # from the child's cursor: it wraps
            assert rb["a"][:2].tolist() == [2.0, 2.0] and rb["a"][20] == 2.0
    finally:
        if child.is_alive():
            child.kill()
            child.join(10)


def a_list_buffer():
    rb = ReplayBuffer(storage=ListStorage(4))
    rb.extend([1, 2])
    return rb


def a_prioritized_buffer():
    rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=PrioritizedSampler(4, 1.0, 1.0))
    rb.extend(torch.arange(2.0))
    return rb


def a_max_value_buffer():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4), writer=TensorDictMaxValueWriter())
    rb.extend(TensorDict({("next", "reward"): torch.arange(2.0)}, [2]))
    return rb


@pytest.mark.parametrize("make, match", [
    (a_list_buffer, "Cannot share a storage of type ListStorage"),
    (lambda: ReplayBuffer(storage=LazyTensorStorage(4)), "it has not been initialized yet"),
    (a_prioritized_buffer, "PrioritizedSampler cannot be shared between processes"),
    (a_max_value_buffer, "TensorDictMaxValueWriter cannot be shared between processes"),
])
def test_what_cannot_be_shared_with_a_process_is_refused_before_it_starts(make, match):
    rb = make()
    child = multiprocessing.get_context("spawn").Process(target=len, args=(rb,))
    with pytest.raises(RuntimeError, match=match):
        child.start()  # the buffer is pickled before any process starts
    assert child.pid is None
    assert rb._shared_progress is None  # nothing changed


# --------------------------------------------------------------------------- ndim > 1


def test_two_dimensional_storages_are_torchrls():
    torch.manual_seed(0)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100, ndim=2), batch_size=4)
    index = rb.extend(TensorDict({"a": torch.arange(10).view(2, 5)}, [2, 5]))  # 2 envs, 5 steps
    assert index.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1], [3, 0], [3, 1], [4, 0], [4, 1]]
    assert (len(rb), rb.storage.max_size, rb.storage.shape, rb._writer._cursor, rb.write_count) == (
        10, 100, (5, 2), 5, 5)
    assert rb[:]["a"].tolist() == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]  # [envs, steps], as extended
    rb.extend(TensorDict({"a": torch.arange(10).view(2, 5) + 100}, [2, 5]))
    sample, info = rb.sample(return_info=True)
    assert sample["a"].tolist() == [9, 109, 8, 5] and sample["index"].tolist() == [[4, 1], [9, 1], [3, 1], [0, 1]]
    assert [i.tolist() for i in info["index"]] == [[4, 9, 3, 0], [1, 1, 1, 1]]
    odd = ReplayBuffer(storage=LazyMemmapStorage(7, ndim=2))  # rows of 3 items: 9 in all
    odd.extend(torch.arange(6).view(3, 2))
    assert (odd.storage.max_size, len(odd), odd.extend(torch.arange(6).view(3, 2) + 10)[:2].tolist()) == (
        9, 6, [[2, 0], [2, 1]])
    assert odd[:].tolist() == [[11, 1, 10], [13, 3, 12], [15, 5, 14]] and odd._writer._cursor == 1
    odd[0] = torch.zeros(3)  # one env's steps, in place (integral floats cast exactly)
    assert odd[:].tolist() == [[0, 0, 0], [13, 3, 12], [15, 5, 14]] and odd._writer._cursor == 1
    with pytest.raises(NotImplementedError, match="dim_extend=storage.ndim - 1 = 1"):
        ReplayBuffer(storage=LazyTensorStorage(10, ndim=2), dim_extend=0)
    with pytest.raises(ValueError, match="TensorDictMaxValueWriter is not compatible with storages with more"):
        ReplayBuffer(storage=LazyTensorStorage(12, ndim=2), writer=TensorDictMaxValueWriter())


def test_two_dimensional_samplers_are_torchrls():
    torch.manual_seed(0)
    epochs = ReplayBuffer(storage=LazyTensorStorage(12, ndim=2), sampler=SamplerWithoutReplacement(), batch_size=5)
    epochs.extend(torch.arange(12).view(3, 4))
    assert [b.tolist() for b in epochs] == [[10, 0, 9, 3, 6], [5, 8, 7, 1, 4], [11, 2]]
    traj = torch.stack([torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]), torch.arange(2).repeat_interleave(6)])
    rb = TensorDictReplayBuffer(sampler=SliceSampler(traj_key="trajectory", num_slices=2), batch_size=6,
                                storage=LazyTensorStorage(20, ndim=2))  # 10 rows: the last 2 steps wrap
    rb.extend(TensorDict({"trajectory": traj, "steps": torch.arange(12).expand(2, 12)}, [2, 12]))
    slices = [rb.sample() for _ in range(4)]
    assert [s["steps"].tolist() for s in slices] == [
        [3, 4, 5, 3, 4, 5], [2, 3, 4, 2, 3, 4], [3, 4, 5, 6, 7, 8], [9, 10, 11, 9, 10, 11]]
    assert slices[3]["index"].tolist() == [[9, 0], [0, 0], [1, 0]] * 2
    assert slices[0]["next", "truncated"].view(-1).tolist() == [False, False, True] * 2


def test_two_dimensional_priorities_take_row_and_column_indices():
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, priority_key="p", batch_size=4,
                                           storage=LazyTensorStorage(100, ndim=2))
    index = rb.extend(TensorDict({"a": torch.arange(5).expand(2, 5), "p": torch.ones(2, 5) / 2}, [2, 5]))
    tree = rb.sampler._tree
    assert tree[torch.arange(10)].tolist() == [0.5] * 10
    rb.update_priority(index, 2)
    assert tree[torch.arange(10)].tolist() == [2.0] * 10
    sample = rb.sample()
    sample["p"] = torch.full((4,), 10_000.0)
    rb.update_tensordict_priority(sample)
    assert (tree[torch.arange(10)].view(5, 2)[sample["index"].unbind(-1)] == 10_000).all()
    again = rb.sample()["index"]
    assert (again.unsqueeze(0) == sample["index"].unsqueeze(1)).all(-1).any(0).all()
    sliced = ReplayBuffer(storage=LazyTensorStorage(10, ndim=2), batch_size=2,
                          sampler=PrioritizedSliceSampler(10, 1.0, 1.0, slice_len=2))
    sliced.extend(TensorDict({("next", "done"): torch.zeros(2, 3, 1, dtype=torch.bool)}, [2, 3]))
    with pytest.raises(NotImplementedError, match="PrioritizedSliceSampler over a storage with ndim > 1"):
        sliced.sample()


def test_two_dimensional_checkpoints(tmp_path):
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(100, ndim=2, scratch_dir=tmp_path), batch_size=4,
                                sampler=SamplerWithoutReplacement())
    for i in range(25):  # 34 rows of 3: the ring wraps
        rb.extend(TensorDict({"obs": torch.arange(6).view(3, 2) + 10 * i}, [3, 2]))
    rb.sample()
    rb.dumps(tmp_path)  # in place
    rb.dumps(tmp_path / "copy")
    expected = rb.sample()["obs"]
    for other in (TensorDictReplayBuffer(storage=LazyMemmapStorage(100, ndim=2, scratch_dir=tmp_path, existsok=True),
                                         batch_size=4, sampler=SamplerWithoutReplacement()),
                  TensorDictReplayBuffer(storage=LazyMemmapStorage(100, ndim=2), batch_size=4,
                                         sampler=SamplerWithoutReplacement())):
        other.loads(tmp_path if other.storage.scratch_dir == tmp_path else tmp_path / "copy")
        assert len(other) == 102 and torch.equal(other[:]["obs"], rb[:]["obs"])
        assert torch.equal(other.sample()["obs"], expected)  # the sampler's epoch too
    reopened = LazyMemmapStorage.open(tmp_path)
    assert (reopened.ndim, len(reopened), reopened.shape) == (2, 102, (34, 3))
    with pytest.raises(Exception, match="holds a storage of ndim=2, this buffer's is 1"):
        TensorDictReplayBuffer(storage=LazyMemmapStorage(100), sampler=SamplerWithoutReplacement()).loads(
            tmp_path / "copy")


@pytest.mark.parametrize("make", [LazyTensorStorage, LazyMemmapStorage])
def test_stored_items_keep_their_dim_names(make, tmp_path):
    # TorchRL's rule: the dims of an item keep their names ([T] steps named "time" stay so in
    # samples, for RewardSum's or split_trajectories' offline use); a storage's own dims have none
    td = TensorDict({"a": torch.arange(12.0).view(3, 4), ("nested", "b"): torch.zeros(3, 4, 2)}, [3, 4],
                    names=[None, "time"])
    rb = TensorDictReplayBuffer(storage=make(10), batch_size=2)
    rb.extend(td)
    sample = rb.sample()
    assert sample.names == [None, "time"] and sample["nested"].names == [None, "time"]
    assert rb[:].names == [None, "time"] and rb[1].names == ["time"]
    assert rb.storage[torch.tensor([[0, 1]])].names == [None, None, "time"]
    rb.dumps(tmp_path / "ckpt")
    from_dump, from_state = TensorDictReplayBuffer(storage=make(10)), TensorDictReplayBuffer(storage=make(10))
    from_dump.loads(tmp_path / "ckpt")
    from_state.load_state_dict(rb.state_dict())
    assert from_dump[:].names == from_state[:].names == [None, "time"]
    # ndim=2: the "time" dim is the storage's second dim, so items are single steps without names
    two = TensorDictReplayBuffer(storage=make(12, ndim=2), batch_size=2)
    two.extend(td)
    assert two.sample().names == [None] and two[:].names == [None, None]
    # unnamed items: nothing named
    plain = TensorDictReplayBuffer(storage=make(10), batch_size=2)
    plain.extend(TensorDict({"a": torch.zeros(3, 4)}, [3, 4]))
    assert plain.sample().names == [None, None]


def test_a_list_storage_takes_a_write_that_wraps_past_its_end():
    # TorchRL's values: the items go round the ring in order, so the last max_size stay
    rb = ReplayBuffer(storage=ListStorage(3))
    rb.extend(torch.arange(5))  # empty storage: the write starts past its end
    assert len(rb) == 3 and [int(x) for x in rb.storage._storage] == [3, 4, 2] and rb.writer._cursor == 2
    rb = ReplayBuffer(storage=ListStorage(4))
    rb.extend([1, 2])
    index = rb.extend(["a", "b", "c", "d", "e"])
    assert rb[:] == ["c", "d", "e", "b"] and rb.writer._cursor == 3 and index.tolist() == [2, 3, 0, 1, 2]


def test_a_tensor_storage_over_a_tensordict_without_entries_takes_them_from_the_first_write():
    # TorchRL's pre-allocated storage (TorchRL's ensemble tests build them so): full from the start
    rb = ReplayBuffer(storage=TensorStorage(TensorDict(batch_size=[100])), batch_size=4)
    assert len(rb) == 100
    rb.extend(TensorDict({"root": torch.arange(90)}, [90]))
    assert len(rb) == 100 and rb[:3]["root"].tolist() == [0, 1, 2] and rb[95]["root"].item() == 0
    rb.extend(TensorDict({"root": torch.arange(20)}, [20]))
    assert rb[88:92]["root"].tolist() == [88, 89, 0, 1] and rb.writer._cursor == 10
    with pytest.raises(ValueError, match=r"TensorStorage: a TensorDict without entries gives the rows of an "
                                         r"ndim=1 storage; for ndim=2 use LazyTensorStorage\(max_size, ndim=2\)"):
        TensorStorage(TensorDict(batch_size=[10, 3]), ndim=2)


def test_a_pytree_goes_into_a_two_dimensional_storage():
    rb = ReplayBuffer(storage=LazyTensorStorage(100, ndim=2), batch_size=4)
    rb.extend({"x": (torch.arange(24.0).view(4, 3, 2),), "y": [torch.arange(12.0).view(4, 3)]})
    sample, every = rb.sample(), rb[:]
    assert len(rb) == 12 and sample["x"][0].shape == (4, 2) and sample["y"][0].shape == (4,)
    assert torch.equal(every["y"][0], torch.arange(12.0).view(4, 3)) and every["x"][0].shape == (4, 3, 2)


def test_the_transform_chain_runs_through_its_forward_as_a_compose():
    # TorchRL's tests (and users' hooks) replace rb._transform.forward: sample() must go through it
    from reap.envs import RewardScaling

    rb = TensorDictReplayBuffer(transform=RewardScaling(0.0, 2.0, in_keys=["r"]), batch_size=1)
    rb.add(TensorDict(r=torch.ones(1)))
    assert rb.sample()["r"].tolist() == [[2.0]]
    seen = []
    rb._transform.forward = lambda data: seen.append(data) or data.set("r", torch.zeros(1, 1))
    assert rb.sample()["r"].tolist() == [[0.0]] and len(seen) == 1


@pytest.mark.parametrize("stack_dim", [0, -1])
def test_lazy_stack_storage_reads_ragged_items_as_one_lazy_stack(stack_dim):
    from tensordict import LazyStackedTensorDict

    from reap_replay import LazyStackStorage

    rb = ReplayBuffer(storage=LazyStackStorage(max_size=10, stack_dim=stack_dim))
    rb.add(TensorDict(a=torch.zeros(2, 10), b=torch.rand(2, 4), c="a string!", batch_size=[2]))
    rb.add(TensorDict(a=torch.ones(2, 11), b=torch.rand(2, 4), c="another string!", batch_size=[2]))
    sample = rb.sample(6)
    assert isinstance(sample, LazyStackedTensorDict) and sample.stack_dim == (0 if stack_dim == 0 else 1)
    assert sample.batch_size == ((6, 2) if stack_dim == 0 else (2, 6))
    assert sample["b"].shape == (*sample.batch_size, 4)  # entries of one shape read whole
    rows = sample.unbind(sample.stack_dim)
    texts = [row["c"] if isinstance(row["c"], str) else row["c"][0] for row in rows]
    assert all((row["a"].shape[-1] == 10) == (text == "a string!") for row, text in zip(rows, texts))
    assert set(texts) <= {"a string!", "another string!"}
    assert rb.storage.get(0)["c"] == "a string!" and len(rb) == 2
    with pytest.raises(TypeError, match="stack_dim must be an int"):
        LazyStackStorage(stack_dim="0")


@pytest.mark.parametrize("storage_cls", [LazyTensorStorage, LazyMemmapStorage])
def test_in_place_writes_of_a_two_dim_storage_index_the_layout_extend_took(storage_cls, tmp_path):
    kwargs = {"scratch_dir": tmp_path} if storage_cls is LazyMemmapStorage else {}
    rb = ReplayBuffer(storage=storage_cls(20, ndim=2, **kwargs))
    rb.extend(TensorDict({"a": torch.arange(8).expand(2, 8), ("b", "c"): torch.ones(2, 8, 3)}, [2, 8]))
    zero = TensorDict({"a": torch.zeros(1, dtype=torch.long), ("b", "c"): torch.zeros(1, 3)}, [1])
    rb[1, 2:3] = zero
    assert rb[1]["a"].tolist() == [0, 1, 0, 3, 4, 5, 6, 7] and rb[0]["a"].tolist() == list(range(8))
    rb[:, 5:7] = zero.expand(2).clone()  # broadcast over the envs and the steps
    assert rb[:, 5:7]["b", "c"].abs().sum() == 0 and rb[:]["a"][:, 4].tolist() == [4, 4]
    assert len(rb) == 16 and rb.writer._cursor == 8
    with pytest.raises(ValueError, match=r"entry \('b', 'c'\) has shape \[1, 2\], expected \[1, 3\] for 1 items"):
        rb[0, 0:1] = TensorDict({"a": torch.zeros(1, dtype=torch.long), ("b", "c"): torch.zeros(1, 2)}, [1])
