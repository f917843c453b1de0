"""Same names, keyword arguments, shapes and info keys as TorchRL (skipped without TorchRL)."""

import inspect
import logging
import pickle
import warnings

import pytest
import torch
from tensordict import TensorDict, is_tensor_collection
from torch.utils._pytree import tree_map

import reap_replay

torchrl_data = pytest.importorskip("torchrl.data")
logging.getLogger("torchrl").setLevel(logging.WARNING)

CLASSES = [
    "ReplayBuffer",
    "TensorDictReplayBuffer",
    "PrioritizedReplayBuffer",
    "TensorDictPrioritizedReplayBuffer",
    "RemoteTensorDictReplayBuffer",
    "ListStorage",
    "LazyTensorStorage",
    "LazyMemmapStorage",
    "TensorStorage",
    "RandomSampler",
    "SamplerWithoutReplacement",
    "PrioritizedSampler",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "PrioritizedSliceSampler",
    "RoundRobinWriter",
    "TensorDictRoundRobinWriter",
    "TensorDictMaxValueWriter",
]

#: TorchRL 0.14.1's public methods and attributes reap-replay does not have (README: "What
#: differs"): its trajectory queries, conditional updates, Ray service, storage hooks and
#: checkpointers, generation tracking.
NOT_OFFERED = {
    "as_remote", "query", "update_if_present", "submit_update_if_present", "register_load_hook",
    "register_save_hook", "checkpointer", "supports_conditional_update", "generations_of",
    "write_at", "get_insert_index",
}


def params(cls, name):
    sig = inspect.signature(cls.__init__)
    return {
        p.name: p
        for p in sig.parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }


@pytest.mark.parametrize("name", CLASSES)
def test_keyword_arguments_and_defaults(name):
    cls = getattr(reap_replay, name)
    mine = params(cls, name)
    forwards = any(p.kind == p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values())
    if forwards and issubclass(cls, reap_replay.ReplayBuffer):
        mine = {**params(reap_replay.ReplayBuffer, "ReplayBuffer"), **mine}
    theirs = params(getattr(torchrl_data, name), name)
    for arg, p in theirs.items():
        assert arg in mine, f"{name} lacks {arg}"
        if p.default is not inspect.Parameter.empty and arg not in ("dtype", "device"):
            assert mine[arg].default == p.default, f"{name}.{arg} default"
        if p.kind == p.KEYWORD_ONLY:
            assert mine[arg].kind == p.KEYWORD_ONLY, f"{name}.{arg} must be keyword-only"


@pytest.mark.parametrize("name", CLASSES)
def test_public_methods(name):
    def public(cls):
        return {a for a in dir(cls) if not a.startswith("_")}

    theirs, mine = getattr(torchrl_data, name), getattr(reap_replay, name)
    instance_attrs = {"fragmented", "step_key"}  # set by reap's __init__, class-level in TorchRL's
    assert public(theirs) - public(mine) - NOT_OFFERED - instance_attrs == set()


def run_both(fn):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = fn(torchrl_data)
    torch.manual_seed(0)
    mine = fn(reap_replay)
    return mine, theirs


def test_tensordict_buffer_shapes_and_info():
    def fn(lib):
        rb = lib.TensorDictReplayBuffer(storage=lib.LazyTensorStorage(10), batch_size=4)
        index = rb.extend(TensorDict({"obs": torch.randn(6, 3)}, [6]))
        sample, info = rb.sample(return_info=True)
        rb2 = lib.TensorDictReplayBuffer(storage=lib.LazyTensorStorage(10), batch_size=4)
        index2 = rb2.extend(TensorDict({"obs": torch.randn(2, 5, 3)}, [2, 5]))
        s2 = rb2.sample()
        return index, sample, info, index2, s2, len(rb), len(rb2)

    mine, theirs = run_both(fn)
    assert torch.equal(mine[0], theirs[0])
    assert mine[1].batch_size == theirs[1].batch_size
    assert set(mine[1].keys()) == set(theirs[1].keys())
    assert sorted(mine[2]) == sorted(theirs[2])
    assert torch.equal(mine[3], theirs[3])
    assert mine[4].batch_size == theirs[4].batch_size
    assert mine[4]["index"].shape == theirs[4]["index"].shape
    assert mine[5:] == theirs[5:]


def test_same_draws_for_uniform_and_epoch_samplers():
    def fn(lib):
        rb = lib.ReplayBuffer(storage=lib.LazyTensorStorage(4), batch_size=3)
        rb.extend(torch.arange(6))
        out = [rb[:].tolist(), rb.sample().tolist()]
        it = lib.ReplayBuffer(
            storage=lib.LazyTensorStorage(10), sampler=lib.SamplerWithoutReplacement(), batch_size=4
        )
        it.extend(torch.arange(10))
        out.append([b.tolist() for b in it])
        return out

    mine, theirs = run_both(fn)
    assert mine == theirs


@pytest.mark.parametrize("storage", ["LazyTensorStorage", "LazyMemmapStorage"])
def test_indexing_counts_only_written_rows(storage):
    def fn(lib):
        rb = lib.TensorDictReplayBuffer(storage=getattr(lib, storage)(10))
        rb.extend(TensorDict({"a": torch.arange(4)}, [4]))
        return [rb[:]["a"].tolist(), rb[1:3]["a"].tolist(), int(rb[-1]["a"]),
                rb[2:8]["a"].tolist(), rb.storage[:]["a"].tolist()]

    mine, theirs = run_both(fn)
    assert mine == theirs == [[0, 1, 2, 3], [1, 2], 3, [2, 3], [0, 1, 2, 3]]


def test_slice_sampler_info_keys():
    def fn(lib):
        traj = torch.tensor([0] * 5 + [1] * 3 + [2] * 6)
        td = TensorDict(
            {"obs": torch.arange(14), "traj": traj, "next": {"done": torch.zeros(14, 1, dtype=torch.bool)}},
            [14],
        )
        rb = lib.TensorDictReplayBuffer(
            storage=lib.LazyTensorStorage(20),
            sampler=lib.SliceSampler(num_slices=2, traj_key="traj"),
            batch_size=8,
        )
        rb.extend(td)
        return rb.sample(return_info=True)

    (mine, mine_info), (theirs, theirs_info) = run_both(fn)
    assert set(mine_info) == set(theirs_info)
    assert mine.batch_size == theirs.batch_size
    for key in [("next", "truncated"), ("next", "done"), ("next", "terminated")]:
        assert mine[key].shape == theirs[key].shape
        assert mine[key].sum() == theirs[key].sum() == 2 or key[1] == "terminated"


def test_slice_sampler_with_traj_key_and_end_key_matches():
    """Given both keys, the trajectories come from traj_key where the storage has it and from
    end_key where it does not; with neither entry stored, both libraries raise."""

    def data(traj: bool, done: bool) -> TensorDict:
        out = TensorDict({"obs": torch.arange(14)}, [14])
        if traj:  # trajectories 0-4, 5-7, 8-13
            out["traj"] = torch.tensor([0] * 5 + [1] * 3 + [2] * 6)
        if done:  # other boundaries: 0-1, 2-10, 11-13
            out["next", "done"] = torch.zeros(14, 1, dtype=torch.bool).index_fill_(0, torch.tensor([1, 10, 13]), True)
        return out

    def fn(lib):
        starts = []
        for traj, done in [(True, True), (True, False), (False, True)]:
            rb = lib.TensorDictReplayBuffer(storage=lib.LazyTensorStorage(20), batch_size=12,
                                            sampler=lib.SliceSampler(slice_len=3, traj_key="traj", end_key=("next", "done")))
            rb.extend(data(traj, done))
            starts.append(sorted({int(s) for _ in range(100) for s in rb.sample()["obs"].view(4, 3)[:, 0]}))
        rb = lib.TensorDictReplayBuffer(storage=lib.LazyTensorStorage(20), batch_size=12,
                                        sampler=lib.SliceSampler(slice_len=3, traj_key="traj", end_key=("next", "done")))
        rb.extend(data(False, False))
        try:
            rb.sample()
        except RuntimeError as exc:
            starts.append((type(exc).__name__, exc.args[0]))
        return starts

    mine, theirs = run_both(fn)
    by_traj, by_end = [0, 1, 2, 5, 8, 9, 10, 11], [2, 3, 4, 5, 6, 7, 8, 11]  # every start of 3 steps
    assert theirs[:3] == mine[:3] == [by_traj, by_traj, by_end]
    assert theirs[3][0] == "RuntimeError"
    assert mine[3] == ("RuntimeError", "SliceSampler needs the entry of traj_key='traj' or end_key=('next', "
                                       "'done') in the storage to find the trajectories; none is stored")


def test_slice_sampler_index_layout_matches():
    def fn(lib):
        td = TensorDict({"obs": torch.arange(14), "traj": torch.tensor([0] * 5 + [1] * 3 + [2] * 6)}, [14])
        out = []
        for cls in (lib.ReplayBuffer, lib.TensorDictReplayBuffer):
            rb = cls(storage=lib.LazyTensorStorage(20), sampler=lib.SliceSampler(num_slices=2, traj_key="traj"),
                     batch_size=8)
            rb.extend(td)
            sample, info = rb.sample(return_info=True)
            index = info["index"]
            out.append((type(index).__name__, [(tuple(i.shape), i.dtype) for i in index]))
            if cls is lib.TensorDictReplayBuffer:  # its index column matches the rows sampled
                out.append((tuple(sample["index"].shape), torch.equal(sample["index"][:, 0], sample["obs"])))
        return out

    mine, theirs = run_both(fn)
    info_index = ("tuple", [((8,), torch.int64)])
    assert mine == theirs == [info_index, info_index, ((8, 1), True)]


def test_max_value_writer_matches():
    def fn(lib):
        rb = lib.TensorDictReplayBuffer(
            storage=lib.LazyTensorStorage(3), writer=lib.TensorDictMaxValueWriter(rank_key="r")
        )
        a = rb.extend(TensorDict({"r": torch.tensor([1.0, 5.0, 3.0])}, [3]))
        b = rb.extend(TensorDict({"r": torch.tensor([2.0, 0.0, 9.0])}, [3]))
        return a.tolist(), b.tolist(), rb[:]["r"].tolist()

    mine, theirs = run_both(fn)
    assert mine == theirs


# ---------------------------------------------------------------------------------------------
# The same calls on both libraries, with the same seed: the same values (random draws included),
# the same errors. Each case takes the library (``torchrl.data`` or ``reap_replay``).


def normalized(x):
    """Tensors, TensorDicts and containers as plain comparable values."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), str(x.dtype), x.tolist())
    if is_tensor_collection(x):
        return ("td", tuple(x.batch_size), sorted((str(k), normalized(v)) for k, v in x.items(True, True)))
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [normalized(v) for v in x]
    if isinstance(x, dict):
        return sorted((str(k), normalized(v)) for k, v in x.items())
    return x


def outcome(fn, lib):
    """``("ok", value)`` or ``("raised", type name, first words of the message)``."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", normalized(fn(lib))
        except Exception as err:  # noqa: BLE001 - compared below
            return "raised", type(err).__name__, str(err)[:25]


def raised(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the outcome is the value compared
        return type(err).__name__, str(err)[:25]
    return "no error"


def raised_type(fn, *args):
    """The type of the error (reap's message names the class without ``<class ...>``)."""
    return raised(fn, *args)[0]


SAME = {}


def same(fn):
    SAME[fn.__name__] = fn
    return fn


@same
def keywords_at_their_defaults(L):
    rb = L.ReplayBuffer(storage=L.LazyTensorStorage(10, compilable=False), prefetch=0, batch_size=3,
                        writer=L.RoundRobinWriter(compilable=False), compilable=False, shared=False,
                        delayed_init=False, transport="auto", service_backend="direct")
    rb.extend(torch.arange(5))
    return len(rb), rb[:], rb.sample()


@same
def storage_set_and_get_with_ranges_and_lists(L):
    s = L.LazyTensorStorage(10)
    s.set(range(4), torch.arange(4) * 2)
    lists = L.ListStorage(10)
    lists.set(range(4), range(4))
    return len(s), s.get(range(4)), s[1:3], s.get([3, 0]), len(lists), lists.get([1, 2]), lists[3]


@same
def tensor_storage_over_given_tensors(L):
    s = L.TensorStorage(torch.randn(10, 11))
    s.set(range(10), torch.zeros(10, 11))
    return len(s), s.get(range(10)), raised(L.TensorStorage, None), raised(L.TensorStorage, torch.randn(3), 4)


@same
def in_place_writes(L):
    rb = L.ReplayBuffer(storage=L.LazyTensorStorage(102))
    rb.extend(TensorDict({"a": torch.arange(100), ("b", "c"): torch.arange(100)}, [100]))
    rb[3:4] = TensorDict({"a": torch.tensor([0]), ("b", "c"): torch.tensor([0])}, [1])
    zeros = torch.zeros(10, dtype=torch.long)
    rb[torch.arange(30, 40)] = TensorDict({"a": zeros, ("b", "c"): zeros}, [10])
    return len(rb), rb._writer._cursor, rb[0:5]["a"], rb[28:42]["b", "c"], rb["a"][:5], rb["b", "c"][:5]


@same
def in_place_writes_go_through_the_inverse_transforms(L):
    rb = L.ReplayBuffer(storage=L.LazyTensorStorage(102))
    rb.append_transform(lambda x: x + 1, invert=True)
    rb.append_transform(lambda x: x + 1)
    rb.extend(TensorDict({"a": torch.arange(10)}, [10]))
    rb[3:4] = TensorDict({"a": torch.tensor([0])}, [1])
    return rb[2:5]["a"], rb.storage[2:5]["a"]


@same
def inverted_transform_on_writes(L):
    rb = L.ReplayBuffer(storage=L.LazyMemmapStorage(10), batch_size=4)
    data = TensorDict({"a": torch.zeros(10)}, [10])

    def add_one(data):
        data += 1
        return data

    rb.append_transform(add_one, invert=True)
    rb.extend(data)
    return data["a"], rb[:]["a"]


@same
def pytrees_in_tensor_storages(L):
    data = {"a": torch.randint(100, (10, 11, 1)), "b": {"c": [torch.zeros(10, 11), (torch.ones(10, 11),)]},
            30: torch.zeros(10, 11)}
    s = L.TensorStorage(data)
    s.set(range(10), tree_map(torch.zeros_like, data))
    rb = L.ReplayBuffer(storage=L.LazyTensorStorage(3), batch_size=3)
    rb.extend({"a": torch.randint(100, (5, 1)), "b": {"c": [torch.zeros(5, 3), (torch.ones(5, 2),)]},
               30: torch.zeros(5, 2)})
    return s.get(range(3)), len(rb), rb._writer._cursor, rb.sample(), rb[2]


@same
def a_transform_on_a_pytree(L):
    rb = L.ReplayBuffer(storage=L.LazyMemmapStorage(100), transform=lambda x: tree_map(lambda y: y * 0, x))
    rb.add({"a": torch.randn(3), "b": {"c": (torch.zeros(2), [torch.ones(1)])}, 30: -torch.ones(())})
    return rb.sample(10)


@same
def lists_hold_one_item_per_element(L):
    rb = L.ReplayBuffer(storage=L.LazyTensorStorage(100))
    rb.extend([TensorDict({"a": torch.randn(2, 3)}, [2])])
    trees = L.ReplayBuffer(storage=L.LazyTensorStorage(100), sampler=L.SamplerWithoutReplacement())
    trees.extend([(torch.full((3, 4), i), {"a": torch.full((3, 4), i)}, [torch.full((3, 4), i)]) for i in range(10)])
    ragged = L.ReplayBuffer(storage=L.LazyTensorStorage(100))
    return len(rb), rb[:].shape, len(trees), trees.sample(10), raised(ragged.extend, [torch.zeros(2), torch.zeros(1)])


@same
def empty_and_batch_size_errors(L):
    rb = L.ReplayBuffer(storage=L.ListStorage(10), sampler=L.SamplerWithoutReplacement(drop_last=False))
    rb.extend(torch.zeros(10))
    first = rb.sample(3)
    errors = [raised(lambda: list(rb)), raised(rb.sample)]
    errors.append(raised(L.ReplayBuffer, storage=L.ListStorage(10), sampler=L.SamplerWithoutReplacement(drop_last=True)))
    errors.append(raised(L.ReplayBuffer, prefetch=2))
    rb.empty()
    errors.append(raised(rb.sample, 2))
    return first, errors


@same
def epochs_without_replacement(L):
    draws = []
    for size, samples, drop_last in [(10, 5, True), (10, 9, False), (15, 16, True), (15, 11, False)]:
        storage = L.ListStorage(size)
        storage.set(range(size), range(size))
        sampler = L.SamplerWithoutReplacement(drop_last=drop_last)
        draws.append(raised(sampler.sample, storage, samples) if samples > size else
                     [sampler.sample(storage, samples)[0] for _ in range(3)])
    rb = L.ReplayBuffer(storage=L.ListStorage(10), sampler=L.SamplerWithoutReplacement(drop_last=True), batch_size=3)
    rb.extend([torch.randint(100, (1,)) for _ in range(10)])
    return draws, [[b for b in rb] for _ in range(2)]


@same
def prefetched_epochs(L):
    out = []
    for drop_last in (False, True):
        rb = L.ReplayBuffer(storage=L.LazyTensorStorage(11), sampler=L.SamplerWithoutReplacement(drop_last=drop_last),
                            batch_size=2, prefetch=3)
        rb.extend(TensorDict({"a": torch.arange(11)}, batch_size=[11]))
        out.append([len(list(rb)) for _ in range(3)])
    return out


@same
def generator_state_in_state_dict_and_checkpoints(L, tmp_path):
    rb = L.ReplayBuffer(sampler=L.RandomSampler(), storage=L.LazyTensorStorage(100), generator=torch.Generator())
    rb.extend(torch.arange(100))
    state = rb.state_dict()
    rb.dumps(tmp_path)
    a = rb.sample(8)
    rb.load_state_dict(state)
    b = rb.sample(8)
    rb.loads(tmp_path)
    return a, b, rb.sample(8), state["_rng"] is not None


@same
def max_value_writer(L):
    rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(20), sampler=L.SamplerWithoutReplacement(),
                                  batch_size=10, writer=L.TensorDictMaxValueWriter(rank_key="key"))
    rb.extend(TensorDict({"key": torch.rand(20), "obs": torch.rand(20)}, [20]))
    for item in TensorDict({"key": torch.rand(20) + 1, "obs": torch.rand(20)}, [20]):
        rb.add(item)
    reduced = []
    for reduction in ("max", "min", "mean", "median", "sum"):
        one = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(1),
                                       writer=L.TensorDictMaxValueWriter(rank_key="key", reduction=reduction))
        one.extend(TensorDict({"key": torch.rand(4, 2, 3), "obs": torch.rand(4, 2, 3)}, [4]))
        reduced.append(one[:]["obs"])
    plain = L.ReplayBuffer(storage=L.LazyTensorStorage(3), writer=L.TensorDictMaxValueWriter())
    return rb[:]["key"].sort().values, reduced, raised_type(plain.add, torch.zeros(1)), \
        raised_type(plain.extend, torch.zeros(2, 1))


@same
def max_value_writer_over_a_list_storage(L):
    rb = L.TensorDictReplayBuffer(storage=L.ListStorage(3), writer=L.TensorDictMaxValueWriter(rank_key="r"))
    a = rb.extend(TensorDict({"r": torch.tensor([1.0, 5.0, 3.0])}, [3]))
    b = rb.extend(TensorDict({"r": torch.tensor([2.0, 0.0, 9.0])}, [3]))
    return a, b, rb.add(TensorDict({"r": torch.tensor(10.0)}, [])), rb.add(TensorDict({"r": torch.tensor(-1.0)}, [])), \
        rb[:]["r"].sort().values


@same
def cursors(L):
    out = []
    for size in (3, 5, 100):
        rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(size), batch_size=3)
        rb.extend(TensorDict({"a": torch.arange(5)}, [5]))
        writer, storage = L.RoundRobinWriter(), L.LazyMemmapStorage(size)
        writer.register_storage(storage)
        writer.extend(torch.arange(5))
        out.append((rb._writer._cursor, writer._cursor, len(storage), rb.write_count))
    return out


@same
def state_dict_into_another_storage_with_prefetch(L):
    out = []
    for a, b in ((L.LazyMemmapStorage, L.LazyTensorStorage), (L.LazyTensorStorage, L.LazyMemmapStorage)):
        rb = L.TensorDictReplayBuffer(prefetch=3, storage=a(100), batch_size=3)
        for _ in range(3):
            rb.extend(TensorDict({"obs": torch.ones(1, 4), "next": {"obs": torch.ones(1, 4)}}, batch_size=1))
        state = rb.state_dict()
        other = L.TensorDictReplayBuffer(prefetch=3, storage=b(100), batch_size=state["_batch_size"])
        other.load_state_dict(state)
        out.append(other.sample().exclude("index"))
    return out


@same
def sampler_state_without_replacement(L, tmp_path):
    rb = L.TensorDictReplayBuffer(storage=L.LazyMemmapStorage(100, scratch_dir=tmp_path / "a"),
                                  sampler=L.SamplerWithoutReplacement(drop_last=True), batch_size=8)
    rb.extend(TensorDict({"a": torch.arange(0, 27), ("b", "c"): torch.arange(1, 28)}, batch_size=[27]))
    for _ in rb:
        break
    rb.dumps(tmp_path / "dump")
    other = L.TensorDictReplayBuffer(storage=L.LazyMemmapStorage(100, scratch_dir=tmp_path / "b"),
                                     sampler=L.SamplerWithoutReplacement(drop_last=True), batch_size=8)
    other.loads(tmp_path / "dump")
    return [b["a"] for b in rb], [b["a"] for b in other]


@same
def slices_from_trajectory_ids_found_by_themselves(L):
    rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(20), sampler=L.SliceSampler(slice_len=3), batch_size=6)
    rb.extend(TensorDict({"obs": torch.arange(12), "episode": torch.arange(12) // 4}, [12]))
    return [rb.sample(return_info=True) for _ in range(3)]


@same
def slices_of_a_full_ring(L):
    rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(6), sampler=L.SliceSampler(slice_len=3), batch_size=3)
    rb.extend(TensorDict({"obs": torch.arange(9), "next": {"done": torch.zeros(9, 1, dtype=torch.bool)}}, [9]))
    return [rb.sample()["obs"] for _ in range(8)]


@same
def slices_shorter_than_asked(L):
    data = TensorDict({"traj": torch.tensor([1, 1] + [0] * 10), "x": torch.arange(12),
                       "is_init": torch.zeros(12, 1, dtype=torch.bool)}, [12])
    out = []
    for kwargs in ({"strict_length": False}, {"strict_length": True}, {"strict_length": False, "pad_output": True}):
        rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(12), batch_size=8,
                                      sampler=L.SliceSampler(num_slices=2, traj_key="traj", **kwargs))
        rb.extend(data)
        out.append([rb.sample() for _ in range(4)])
    return out


@same
def slices_spanning_trajectory_ends(L):
    data = TensorDict({"obs": torch.arange(1, 11).repeat(10), "eps": torch.arange(100) // 10 + 1}, [100])
    out = []
    for span in ((2, 2), (True, False), (False, 3)):
        rb = L.TensorDictReplayBuffer(sampler=L.SliceSampler(num_slices=10, traj_key="eps", span=span),
                                      batch_size=50, storage=L.LazyMemmapStorage(100))
        rb.extend(data)
        out.append([rb.sample() for _ in range(2)])
    return out


@same
def slices_with_end_keys(L):
    done = torch.zeros(20, 1, dtype=torch.bool).index_fill_(0, torch.tensor([4, 19]), True)
    truncated = torch.zeros(20, 1, dtype=torch.bool).index_fill_(0, torch.tensor([9]), True)
    data = TensorDict({"obs": torch.arange(20), "next": {"done": done, "truncated": truncated}}, [20])
    rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(20), batch_size=4, sampler=L.SliceSampler(
        slice_len=2, end_keys=[("next", "done"), ("next", "truncated")], truncated_key=None))
    rb.extend(data)
    return [rb.sample(return_info=True) for _ in range(3)]


@same
def slices_without_replacement(L):
    rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(100), batch_size=10,
                                  sampler=L.SliceSamplerWithoutReplacement(num_slices=2, traj_key="episode"))
    rb.extend(TensorDict({"obs": torch.arange(30), "episode": torch.arange(30) // 6}, [30]))
    return [[b["obs"] for b in rb] for _ in range(2)]


@same
def slice_sampler_errors(L):
    done = torch.zeros(100, 1, dtype=torch.bool)
    data = TensorDict({"episode": torch.arange(100) // 30, ("next", "done"): done}, [100])
    wrong = TensorDict({("next", "done"): done.unsqueeze(1).expand(100, 5, 1)}, [100])
    memmap, lists = L.LazyMemmapStorage(100), L.ListStorage(100)
    memmap.set(range(100), wrong)
    lists.set(range(100), data)
    return [raised(L.SliceSampler(num_slices=20).sample, memmap, 100),
            raised(L.SliceSampler(num_slices=20).sample, lists, 100),
            raised(L.SliceSampler, num_slices=2, slice_len=3),
            raised(L.SliceSampler, slice_len=2, strict_length=True, pad_output=True),
            raised(L.SliceSampler(slice_len=3, traj_key="episode").sample, memmap, 8)]


@same
def replacement_false_dispatches(L):
    return [type(L.RandomSampler(replacement=False, drop_last=True)).__name__,
            type(L.SliceSampler(replacement=False, num_slices=2)).__name__,
            type(L.SamplerWithoutReplacement(replacement=False)).__name__,
            raised(L.PrioritizedSampler, 10, 1.0, 1.0, replacement=False)]


@same
def plain_pickles_are_copies(L):
    out = []
    for storage in (L.ListStorage, L.LazyTensorStorage, L.LazyMemmapStorage):
        for sampler in (L.RandomSampler, L.SamplerWithoutReplacement):
            for writer in (L.RoundRobinWriter, L.TensorDictMaxValueWriter):
                rb = L.TensorDictReplayBuffer(storage=storage(5), sampler=sampler(), writer=writer(), batch_size=3)
                copy = pickle.loads(pickle.dumps(rb))
                out.append(rb.__dict__.keys() == copy.__dict__.keys() and all(
                    isinstance(rb.__dict__[k], type(copy.__dict__[k])) for k in rb.__dict__))
    return out


@same
def storage_iteration_and_membership(L):
    s = L.LazyTensorStorage(5)
    s.set(range(3), torch.arange(3))
    lists = L.ListStorage(5)
    lists.set(range(2), ["a", "b"])
    return list(s), 1 in s, 4 in s, -1 in s, list(lists), 2 in lists


@same
def component_checkpoints(L, tmp_path):
    out = []
    for storage in (L.LazyTensorStorage, L.LazyMemmapStorage):
        data = TensorDict({"a": torch.randint(10, (3,)), "b": {"c": torch.randint(10, (3,))}}, [3])
        s = storage(10)
        s.set(range(3), data)
        s.dumps(tmp_path / storage.__name__)
        s.dumps(tmp_path / storage.__name__)  # twice
        other = storage(10)
        other.set(range(3), data.clone().zero_())
        other.loads(tmp_path / storage.__name__)
        out.append(other[:])
    rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(5), sampler=L.SamplerWithoutReplacement(), batch_size=2)
    rb.extend(TensorDict({"a": torch.arange(5)}, [5]))
    rb.sample()
    rb.sampler.dumps(tmp_path / "sampler")
    sampler = L.SamplerWithoutReplacement()
    sampler.loads(tmp_path / "sampler")
    return out, sampler.sample(rb.storage, 3)[0], sampler.len_storage


@same
def stats_and_keys(L):
    rb = L.ReplayBuffer(storage=L.LazyTensorStorage(10))
    rb.extend(TensorDict({"a": torch.arange(5), "n": {"b": torch.arange(5)}}, [5]))
    stats = rb.stats()
    return stats, rb.write_count, rb.can_sample(3), rb["a"], rb["n", "b"], rb[("a",)], rb.dim_extend


@same
def tensordict_buffer_refuses_other_data(L):
    rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(4))
    return raised(rb.extend, torch.zeros(3)), raised(L.ReplayBuffer, transport="ray"), \
        raised(L.ReplayBuffer, service_backend="grpc"), raised(L.ReplayBuffer, transport_options={"a": 1})


@same
def remote_buffer_called_locally(L):
    rb = L.RemoteTensorDictReplayBuffer(storage=L.LazyTensorStorage(5), batch_size=2)
    rb.extend(TensorDict({"a": torch.arange(3)}, [3]))
    return len(rb), rb.sample().batch_size


@same
def two_dimensional_storages(L):
    rb = L.TensorDictReplayBuffer(storage=L.LazyTensorStorage(100, ndim=2), batch_size=4)
    index = rb.extend(TensorDict({"a": torch.arange(10).view(2, 5), "p": torch.ones(2, 5)}, [2, 5]))
    first = (index, len(rb), rb.storage.max_size, rb.storage.shape, rb._writer._cursor, rb.write_count,
             rb[:].exclude("index"))  # TorchRL's also has the "index" column reap does not store
    rb.extend(TensorDict({"a": torch.arange(10).view(2, 5) + 100, "p": torch.ones(2, 5)}, [2, 5]))
    odd = L.ReplayBuffer(storage=L.LazyMemmapStorage(7, ndim=2), batch_size=3)  # 3 rows of 3
    second = [odd.extend(torch.arange(6).view(3, 2)), odd.storage.max_size, len(odd), odd[:].clone()]
    second += [odd.extend(torch.arange(6).view(3, 2) + 10), len(odd), odd[:], odd._writer._cursor]
    return first, len(rb), rb[:]["a"], rb.sample(return_info=True), second, odd.sample(return_info=True)


@same
def two_dimensional_epochs(L):
    rb = L.ReplayBuffer(storage=L.LazyTensorStorage(12, ndim=2), sampler=L.SamplerWithoutReplacement(), batch_size=5)
    rb.extend(torch.arange(12).view(3, 4))
    return [b for b in rb], rb.sample(return_info=True)


@same
def two_dimensional_slices(L):
    traj = torch.stack([torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]), torch.arange(2).repeat_interleave(6)], 0)
    rb = L.TensorDictReplayBuffer(sampler=L.SliceSampler(traj_key="trajectory", num_slices=2), batch_size=6,
                                  storage=L.LazyTensorStorage(20, ndim=2))  # 10 rows: the steps wrap
    rb.extend(TensorDict({"trajectory": traj, "steps": torch.arange(12).expand(2, 12)}, [2, 12]))
    done = torch.zeros(3, 8, 1, dtype=torch.bool)
    done[0, 3], done[1, 5], done[2, 7] = True, True, True
    ends = L.TensorDictReplayBuffer(sampler=L.SliceSampler(slice_len=2), storage=L.LazyMemmapStorage(24, ndim=2),
                                    batch_size=4)
    ends.extend(TensorDict({"obs": torch.arange(24).view(3, 8), ("next", "done"): done}, [3, 8]))
    return [rb.sample() for _ in range(4)], [ends.sample() for _ in range(4)]


@same
def list_storage_write_wrapping_past_its_end(L):
    rb = L.ReplayBuffer(storage=L.ListStorage(3))
    rb.extend(torch.arange(5))
    big = L.ReplayBuffer(storage=L.ListStorage(100))
    big.extend(torch.arange(5))
    big.extend(torch.arange(202))
    return len(rb), list(rb.storage._storage), rb.writer._cursor, len(big), list(big.storage._storage), big.writer._cursor


@same
def tensor_storage_over_a_tensordict_without_entries(L):
    rb = L.ReplayBuffer(storage=L.TensorStorage(TensorDict(batch_size=[100])), batch_size=4)
    before = len(rb)
    rb.extend(TensorDict({"root": torch.arange(90)}, [90]))
    rb.extend(TensorDict({"root": torch.arange(20)}, [20]))
    return before, len(rb), rb[:]["root"], rb.writer._cursor


@same
def nested_tensorclass_in_tensor_storages(L):
    from tensordict import tensorclass

    @tensorclass
    class Inner:
        a: torch.Tensor

    @tensorclass
    class Outer:
        x: torch.Tensor
        next: Inner

    data = Outer(x=torch.arange(12.0).view(3, 4), batch_size=[3, 4],
                 next=Inner(a=-torch.arange(12.0).view(3, 4), batch_size=[3, 4]))
    out = []
    for make in (L.LazyTensorStorage, L.LazyMemmapStorage):
        storage = make(10)
        storage.set(list(range(3)), data)
        got = storage.get([1])
        out.append((type(got).__name__, type(got.next).__name__, got.shape, got.x, got.next.a))
    return out


@same
def pytree_in_a_two_dimensional_storage(L):
    rb = L.ReplayBuffer(storage=L.LazyTensorStorage(100, ndim=2), batch_size=4)
    rb.extend({"x": (torch.arange(24.0).view(4, 3, 2),), "y": [torch.arange(12.0).view(4, 3)]})
    return len(rb), rb.sample()["y"][0].shape, rb[:]


@same
def stored_items_keep_their_dim_names(L):
    td = TensorDict({"a": torch.arange(12.0).view(3, 4)}, [3, 4], names=[None, "time"])
    names = []
    for make in (L.LazyTensorStorage, L.LazyMemmapStorage):
        for ndim in (1, 2):
            rb = L.TensorDictReplayBuffer(storage=make(12, ndim=ndim), batch_size=2)
            rb.extend(td)
            names.append((rb.sample().names, rb[:].names, rb[0].names if ndim == 1 else None))
    return names


@same
def max_value_writer_refuses_two_dimensions(L):
    return raised(L.ReplayBuffer, storage=L.LazyTensorStorage(12, ndim=2), writer=L.TensorDictMaxValueWriter())


@pytest.mark.parametrize("name", sorted(SAME))
def test_same_as_torchrl(name, tmp_path):
    fn = SAME[name]
    if "tmp_path" in inspect.signature(fn).parameters:
        (tmp_path / "torchrl").mkdir()
        (tmp_path / "reap").mkdir()
        theirs = outcome(lambda lib: fn(lib, tmp_path / "torchrl"), torchrl_data)
        mine = outcome(lambda lib: fn(lib, tmp_path / "reap"), reap_replay)
    else:
        theirs, mine = outcome(fn, torchrl_data), outcome(fn, reap_replay)
    assert theirs[0] == "ok", theirs
    assert mine == theirs
