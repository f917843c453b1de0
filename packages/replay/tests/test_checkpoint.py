"""Checkpoints: round trips, no copy in place, crash safety, clear errors, reopen after a crash."""

import json
import os

import pytest
import torch
from tensordict import TensorDict

from reap_replay import (
    CheckpointError,
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictMaxValueWriter,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)


def data(n, start=0):
    ids = torch.arange(start, start + n, dtype=torch.float32)
    return TensorDict(
        {
            "obs": ids[:, None].expand(n, 3).clone(),
            "next": {"reward": ids[:, None].clone(), "done": torch.zeros(n, 1, dtype=torch.bool)},
        },
        [n],
    )


def prioritized(storage):
    return TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=storage, batch_size=8)


@pytest.mark.parametrize("kind", ["tensor", "memmap"])
def test_round_trip_prioritized(tmp_path, kind):
    def storage():
        if kind == "tensor":
            return LazyTensorStorage(32)
        return LazyMemmapStorage(32, scratch_dir=tmp_path / f"scratch{os.urandom(4).hex()}")

    rb = prioritized(storage())
    rb.extend(data(40))  # wraps around
    rb.update_priority(torch.arange(32), torch.rand(32))
    rb.dumps(tmp_path / "ckpt")
    other = prioritized(storage())
    other.loads(tmp_path / "ckpt")
    assert len(other) == 32 and other.writer._cursor == 8 and other.writer._write_count == 40
    assert torch.equal(other[:]["obs"], rb[:]["obs"])
    assert torch.equal(other.sampler._tree.leaves(), rb.sampler._tree.leaves())
    assert float(other.sampler.default_priority) == float(rb.sampler.default_priority)
    meta = json.loads((tmp_path / "ckpt" / "meta.json").read_text())
    assert meta["format"] == "reap-replay-checkpoint" and meta["version"] == 2
    assert meta["storage"]["kind"] == type(rb.storage).__name__


def test_round_trip_other_components(tmp_path):
    rb = ReplayBuffer(storage=ListStorage(10), sampler=SamplerWithoutReplacement(), batch_size=2)
    rb.extend([torch.tensor(i) for i in range(5)])
    rb.sample()
    rb.dumps(tmp_path / "a")
    other = ReplayBuffer(storage=ListStorage(10), sampler=SamplerWithoutReplacement(), batch_size=2)
    other.loads(tmp_path / "a")
    assert [int(x) for x in other.storage._storage] == list(range(5))
    assert other.sampler._sample_list.numel() == 3  # the indices not drawn yet, as TorchRL's
    mv = TensorDictReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictMaxValueWriter(rank_key="obs"))
    mv.extend(TensorDict({"obs": torch.tensor([1.0, 5.0, 3.0])}, [3]))
    mv.dumps(tmp_path / "b")
    mv2 = TensorDictReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictMaxValueWriter(rank_key="obs"))
    mv2.loads(tmp_path / "b")
    assert mv2.extend(TensorDict({"obs": torch.tensor([2.0])}, [1])).tolist() == [0]
    objects = ReplayBuffer(storage=ListStorage(4))
    objects.extend(["not a tensor"])
    with pytest.raises(TypeError, match="nothing is pickled"):
        objects.dumps(tmp_path / "c")


def test_memmap_scratch_dir_checkpoint_does_not_copy(tmp_path):
    rb = prioritized(LazyMemmapStorage(64, scratch_dir=tmp_path))
    rb.extend(data(10))
    leaf_files = sorted((tmp_path / "storage").glob("*.memmap"))
    inodes = {f.name: f.stat().st_ino for f in leaf_files}
    rb.dumps(tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["storage"]["inplace"] is True
    data_dir = tmp_path / meta["data"]
    names = set(meta["tensors"])
    assert not any(n.startswith("storage/") for n in names)  # only sampler/writer tensors
    assert sum(f.stat().st_size for f in data_dir.iterdir()) < 64 * 4 * 3  # no rows copied
    assert {f.name: f.stat().st_ino for f in leaf_files} == inodes
    # a new buffer over the same scratch dir loads it
    other = prioritized(LazyMemmapStorage(64, scratch_dir=tmp_path, existsok=True))
    other.loads(tmp_path)
    assert len(other) == 10 and torch.equal(other[:10]["obs"], rb[:10]["obs"])
    other.extend(data(2, start=100))
    assert other.writer._cursor == 12


@pytest.mark.parametrize("step", ["tensor", "data_renamed", "meta_written"])
def test_crash_during_dumps_keeps_the_old_checkpoint(tmp_path, dumps_crashing_at, step):
    path = tmp_path / "ckpt"
    rb = prioritized(LazyTensorStorage(32))
    rb.extend(data(5))
    rb.dumps(path)
    rb.extend(data(7, start=5))
    dumps_crashing_at(rb, path, step)
    other = prioritized(LazyTensorStorage(32))
    other.loads(path)
    assert len(other) == 5  # the old checkpoint, whole
    assert torch.equal(other[:5]["obs"], rb[:5]["obs"])
    rb.dumps(path)  # the next dump succeeds and clears the leftovers
    other.loads(path)
    assert len(other) == 12
    assert len([p for p in path.iterdir() if p.name != "meta.json"]) == 1


def test_crash_after_meta_replaced_gives_the_new_checkpoint(tmp_path, dumps_crashing_at):
    path = tmp_path / "ckpt"
    rb = prioritized(LazyTensorStorage(32))
    rb.extend(data(5))
    rb.dumps(path)
    rb.extend(data(3, start=5))
    dumps_crashing_at(rb, path, "meta_replaced")
    other = prioritized(LazyTensorStorage(32))
    other.loads(path)
    assert len(other) == 8


def test_missing_torn_and_foreign_directories(tmp_path):
    rb = prioritized(LazyTensorStorage(32))
    with pytest.raises(CheckpointError, match="does not exist"):
        rb.loads(tmp_path / "nope")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "weights.pt").write_bytes(b"\x80\x04junk")
    with pytest.raises(CheckpointError, match="meta.json is missing"):
        rb.loads(foreign)
    (foreign / "meta.json").write_text('{"format": "something-else"}')
    with pytest.raises(CheckpointError, match="not a reap-replay checkpoint"):
        rb.loads(foreign)
    (foreign / "meta.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        rb.loads(foreign)
    good = tmp_path / "good"
    rb.extend(data(6))
    rb.dumps(good)
    meta = json.loads((good / "meta.json").read_text())
    leaf = good / meta["data"] / meta["tensors"]["storage/leaf0"]["file"]
    leaf.write_bytes(leaf.read_bytes()[:-3])  # torn file
    with pytest.raises(CheckpointError, match=r"torn checkpoint\?"):
        rb.loads(good)
    leaf.unlink()
    with pytest.raises(CheckpointError, match="is missing"):
        rb.loads(good)
    rb.dumps(good)
    with pytest.raises(CheckpointError, match="this buffer uses RandomSampler"):
        TensorDictReplayBuffer(storage=LazyTensorStorage(32)).loads(good)
    with pytest.raises(CheckpointError, match="max_size=32"):
        prioritized(LazyTensorStorage(16)).loads(good)


def test_nothing_is_unpickled(tmp_path, monkeypatch):
    import pickle

    rb = prioritized(LazyTensorStorage(32))
    rb.extend(data(6))
    rb.dumps(tmp_path)

    def forbidden(*args, **kwargs):
        raise AssertionError("a checkpoint load must not unpickle")

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    other = prioritized(LazyTensorStorage(32))
    other.loads(tmp_path)
    assert len(other) == 6



@pytest.fixture
def crashed(killed_process):
    """A memmap buffer left by a process that died without flush or cleanup, and a checkpoint
    whose second ``dumps`` that process was killed in the middle of."""
    return killed_process["scratch"], killed_process["ckpt_dir"]


def test_killed_process_mid_dump_leaves_a_loadable_checkpoint(crashed):
    _, ckpt_dir = crashed
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(16))
    rb.loads(ckpt_dir)
    assert rb[: len(rb)]["x"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_memmap_reopened_by_a_new_process_after_a_crash(crashed):
    """The writer process died without flush or cleanup; this process sees every write."""
    scratch, _ = crashed
    storage = LazyMemmapStorage.open(scratch)
    rb = TensorDictReplayBuffer(storage=storage, batch_size=4)
    assert len(rb) == 50
    expected = torch.cat([torch.arange(50, 70), torch.arange(20, 50)]).float()
    assert torch.equal(rb[:]["next", "r"], expected)
    assert torch.equal(rb[:]["obs"][:, 2], expected)
    assert rb.writer._cursor == 20 and rb.writer._write_count == 70
    assert rb.sample()["obs"].shape == (4, 3)


def test_memmap_scratch_dir_guard_and_open_errors(tmp_path):
    storage = LazyMemmapStorage(10, scratch_dir=tmp_path)
    storage.set(slice(0, 2), torch.zeros(2))
    with pytest.raises(FileExistsError, match="existsok=True"):
        LazyMemmapStorage(10, scratch_dir=tmp_path)
    with pytest.raises(CheckpointError, match="no memmap storage"):
        LazyMemmapStorage.open(tmp_path / "empty")


def test_memmap_auto_cleanup(tmp_path):
    import gc

    storage = LazyMemmapStorage(10)
    storage.set(slice(0, 2), torch.zeros(2))
    where = storage.scratch_dir
    assert where.exists()
    del storage
    gc.collect()
    assert not where.exists()
    kept = LazyMemmapStorage(10, scratch_dir=tmp_path / "kept")
    kept.set(slice(0, 2), torch.zeros(2))
    del kept
    gc.collect()
    assert (tmp_path / "kept" / "storage").exists()
