"""Same names, keyword arguments, shapes and info keys as TorchRL (skipped without TorchRL)."""

import inspect
import logging
import warnings

import pytest
import torch
from tensordict import TensorDict

import reap_replay

torchrl_data = pytest.importorskip("torchrl.data")
logging.getLogger("torchrl").setLevel(logging.WARNING)

CLASSES = [
    "ReplayBuffer",
    "TensorDictReplayBuffer",
    "PrioritizedReplayBuffer",
    "TensorDictPrioritizedReplayBuffer",
    "ListStorage",
    "LazyTensorStorage",
    "LazyMemmapStorage",
    "SamplerWithoutReplacement",
    "PrioritizedSampler",
    "SliceSampler",
    "RoundRobinWriter",
    "TensorDictMaxValueWriter",
]

# TorchRL options reap-replay does not offer (each raises a clear NotImplementedError or is
# accepted and ignored), and options reap adds.
NOT_OFFERED = {
    "sample_unit", "checkpointer", "consume_after_n_samples", "shared", "compilable",
    "delayed_init", "service_backend", "service_backend_options", "transport",
    "transport_options", "sync", "end_keys", "step_key", "fragmented", "ends", "trajectories",
    "init_key", "pad_output", "compile", "span", "use_gpu", "kwargs", "storage",
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
        if arg in NOT_OFFERED and arg not in mine:
            continue
        assert arg in mine, f"{name} lacks {arg}"
        if p.default is not inspect.Parameter.empty and arg not in ("dtype", "device"):
            assert mine[arg].default == p.default, f"{name}.{arg} default"
        if p.kind == p.KEYWORD_ONLY:
            assert mine[arg].kind == p.KEYWORD_ONLY, f"{name}.{arg} must be keyword-only"


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
