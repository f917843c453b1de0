"""Fault injection on checkpoints: every file a checkpoint has, corrupted every way we know.

Each fault must end in a :class:`CheckpointError` that says what is wrong, with the buffer being
loaded into left exactly as it was, no file descriptor or memory map of the checkpoint left
open, and nothing written into the checkpoint by the failed load. Two checkpoint kinds: a copy
(``LazyTensorStorage``: every row in ``data-*/`` files) and an in-place memory-mapped one
(``scratch_dir`` equal to the checkpoint directory: the rows stay in ``storage/``).
"""

import gc
import json
import os
import shutil
import zlib
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict

from reap_replay import (
    CheckpointError,
    LazyMemmapStorage,
    LazyTensorStorage,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)

CAPACITY = 32


@pytest.fixture(autouse=True, scope="module")
def _quick_gc():
    """gc.collect() (run to see whether a map is really gone) over only what this module makes:
    the heap of torch and pytest takes half a second a pass."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def data(n, start=0):
    ids = torch.arange(start, start + n, dtype=torch.float32)
    return TensorDict(
        {
            "obs": ids[:, None].expand(n, 3).clone(),
            "count": torch.arange(start, start + n),
            "next": {"reward": ids[:, None].clone(), "done": torch.zeros(n, 1, dtype=torch.bool)},
        },
        [n],
    )


def buffer(storage):
    return TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=storage, batch_size=8)


def written(path: Path, kind: str):
    """A checkpoint at ``path`` of 40 rows written into 32 (wrapped), with priorities set."""
    if kind == "copy":
        rb = buffer(LazyTensorStorage(CAPACITY))
    else:
        rb = buffer(LazyMemmapStorage(CAPACITY, scratch_dir=path))
    rb.extend(data(40))
    rb.update_priority(torch.arange(CAPACITY), torch.linspace(0.5, 3.0, CAPACITY))
    rb.dumps(path)
    return rb


def target(path: Path, kind: str):
    """The buffer a checkpoint is loaded into: holding other rows (copy), or fresh (in place)."""
    if kind == "copy":
        rb = buffer(LazyTensorStorage(CAPACITY))
        rb.extend(data(5, start=1000))
        rb.update_priority(torch.arange(5), torch.full((5,), 2.0))
        return rb
    return buffer(LazyMemmapStorage(CAPACITY, scratch_dir=path, existsok=True))


def state(rb) -> dict:
    """Everything a load could change, as plain values."""
    s = rb.storage
    out = {
        "len": len(rb),
        "initialized": s.initialized,
        "last_cursor": s._last_cursor,
        "writer": rb.writer.state_dict(),
        "leaves": rb.sampler._tree.leaves().tolist(),
        "max_priority": float(rb.sampler.default_priority),
        "batch_size": rb.batch_size,
    }
    if s.initialized and len(rb):
        out["rows"] = {k: v.tolist() for k, v in rb[: len(rb)].items(include_nested=True, leaves_only=True)}
    return out


def mapped(path: Path) -> list[str]:
    """Memory maps of files under ``path`` in this process."""
    gc.collect()
    with open("/proc/self/maps") as f:
        return sorted(line.split()[-1] for line in f if str(path) in line)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def listing(path: Path) -> dict:
    return {
        str(p.relative_to(path)): (p.is_symlink(), p.lstat().st_size if not p.is_dir() else 0)
        for p in sorted(path.rglob("*"))
    }


def assert_refused(rb, path, match):
    """loads(path) raises a CheckpointError matching ``match`` and changes nothing."""
    before, fds, maps, files = state(rb), open_fds(), mapped(path), listing(path)
    with pytest.raises(CheckpointError, match=match) as err:
        rb.loads(path)
    assert state(rb) == before, "a failed loads() changed the buffer"
    assert open_fds() == fds, "a failed loads() left a file open"
    assert mapped(path) == maps, "a failed loads() left a memory map of the checkpoint"
    assert listing(path) == files, "a failed loads() wrote into the checkpoint"
    return err.value


def checkpoint_files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())


def resolve(path: Path, role: str) -> Path:
    """The file playing ``role`` in the checkpoint at ``path``."""
    meta = json.loads((path / "meta.json").read_text())
    if role.startswith("rows"):  # a copied storage leaf: rows0 the float obs, rows1 the int64 count
        leaf = meta["storage"]["leaves"][int(role[-1])]
        return path / meta["data"] / meta["tensors"][leaf["tensor"]]["file"]
    if role == "priorities":
        return path / meta["data"] / meta["tensors"]["sampler/_leaves"]["file"]
    return path / role


FILES = {
    "copy": ["meta.json", "rows0", "rows1", "priorities"],
    "inplace": [
        "meta.json",
        "priorities",
        "storage/layout.json",
        "storage/leaf0000.memmap",
        "storage/leaf0001.memmap",
        "storage/progress.bin",
    ],
}


@pytest.mark.parametrize("kind", ["copy", "inplace"])
def test_the_faults_cover_every_kind_of_file_a_checkpoint_has(tmp_path, kind):
    """If a checkpoint grows a new kind of file, the faults below must learn about it."""
    path = tmp_path / "ckpt"
    written(path, kind)
    meta = json.loads((path / "meta.json").read_text())
    named = {meta["data"] + "/" + d["file"]: n.split("/")[0] for n, d in meta["tensors"].items()}
    kinds = set()
    for file in path.rglob("*"):
        if file.is_dir():
            continue
        name = str(file.relative_to(path))
        if name in named:
            kinds.add({"storage": "rows0", "sampler": "priorities"}.get(named[name], named[name]))
        elif name.startswith("storage/leaf") and name.endswith(".memmap"):
            kinds.add("storage/leaf0000.memmap")
        else:
            kinds.add(name)
    assert kinds <= set(FILES[kind]), f"files no fault covers: {kinds - set(FILES[kind])}"
    assert resolve(path, FILES[kind][1]).is_file()


FAULTS = ["truncate", "garbage", "delete", "symlink"]


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize(
    "kind, name", [(kind, name) for kind, names in FILES.items() for name in names]
)
def test_every_file_corrupted_every_way_is_refused(tmp_path, kind, name, fault):
    path = tmp_path / "ckpt"
    writer = written(path, kind)
    del writer
    gc.collect()
    rb = target(path, kind)
    file = resolve(path, name)
    body = file.read_bytes()
    if fault == "truncate":
        file.write_bytes(body[: len(body) // 2] if len(body) > 1 else b"")
    elif fault == "garbage":  # same size: only a checksum (or a parser) can tell
        noise = bytes((b + 1 + i) % 256 for i, b in enumerate(body))
        if name.endswith(".json"):
            noise = b"\x00" + noise[1:]
        file.write_bytes(noise)
    elif fault == "delete":
        file.unlink()
    else:  # the same bytes, but through a symlink to a file outside the checkpoint
        outside = tmp_path / "outside.bin"
        outside.write_bytes(body)
        file.unlink()
        file.symlink_to(outside)
    err = assert_refused(rb, path, match=".")
    assert str(path) in str(err) or path.name in str(err)
    if fault == "symlink":
        assert "symlink" in str(err) or "symbolic link" in str(err)
        assert (tmp_path / "outside.bin").read_bytes() == body  # never written through


@pytest.mark.parametrize("kind, which", [("copy", "data"), ("inplace", "data"), ("inplace", "storage")])
def test_a_symlinked_directory_is_refused(tmp_path, kind, which):
    path = tmp_path / "ckpt"
    written(path, kind)
    gc.collect()
    rb = target(path, kind)
    name = json.loads((path / "meta.json").read_text())["data"] if which == "data" else "storage"
    moved = tmp_path / "elsewhere"
    (path / name).rename(moved)
    (path / name).symlink_to(moved, target_is_directory=True)
    err = assert_refused(rb, path, match="symlink")
    assert name in str(err)


def test_a_hard_link_to_a_file_elsewhere_is_not_mapped(tmp_path):
    path = tmp_path / "ckpt"
    written(path, "inplace")
    gc.collect()
    leaf = path / "storage" / "leaf0000.memmap"
    os.link(leaf, tmp_path / "elsewhere.bin")
    assert_refused(target(path, "inplace"), path, match="hard link")


FOREIGN_JSON = ['{"format": "something-else"}', "[]", '"reap-replay-checkpoint"', "null", "{}", "1e999"]


@pytest.mark.parametrize("kind", ["copy", "inplace"])
@pytest.mark.parametrize("text", FOREIGN_JSON)
def test_foreign_json_is_refused(tmp_path, kind, text):
    path = tmp_path / "ckpt"
    written(path, kind)
    gc.collect()
    rb = target(path, kind)
    (path / "meta.json").write_text(text)
    assert_refused(rb, path, match="not a reap-replay checkpoint|not valid JSON|version")
    if kind == "inplace":
        shutil.rmtree(path)
        written(path, kind)
        gc.collect()
        (path / "storage" / "layout.json").write_text(text)
        assert_refused(rb, path, match="layout.json|memmap storage")


def edit(key_path, value):
    """A meta.json edit: ``value`` at ``key_path`` (a callable value: applied to the old one)."""

    def apply(meta):
        node = meta
        for k in key_path[:-1]:
            node = node[k]
        if value is DELETE:
            del node[key_path[-1]]
        else:
            node[key_path[-1]] = value(node[key_path[-1]]) if callable(value) else value

    return apply


DELETE = object()

WRONG_VALUES = {
    "writer cursor missing": edit(["writer", "state", "_cursor"], DELETE),
    "writer cursor a string": edit(["writer", "state", "_cursor"], "8"),
    "writer cursor past max_size": edit(["writer", "state", "_cursor"], CAPACITY),
    "write count negative": edit(["writer", "state", "_write_count"], -1),
    "storage len past max_size": edit(["storage", "len"], CAPACITY + 1),
    "storage len negative": edit(["storage", "len"], -3),
    "storage len a float": edit(["storage", "len"], 31.5),
    "storage len missing": edit(["storage", "len"], DELETE),
    "last cursor past max_size": edit(["storage", "last_cursor"], 10**6),
    "alpha negative": edit(["sampler", "state", "_alpha"], -0.7),
    "beta NaN": edit(["sampler", "state", "_beta"], float("nan")),
    "eps a list": edit(["sampler", "state", "_eps"], [1e-8]),
    "max priority infinite": edit(["sampler", "state", "_max_priority"], float("inf")),
    "sampler tensor missing": edit(["sampler", "state", "_leaves"], {"__tensor__": "nope"}),
    "batch size zero": edit(["batch_size"], 0),
    "batch size a string": edit(["batch_size"], "8"),
    "storage kind a number": edit(["storage", "kind"], 3),
    "max_size a string": edit(["storage", "max_size"], str(CAPACITY)),
    "tensors not a dict": edit(["tensors"], ["sampler/_leaves"]),
    "tensor shape negative": lambda m: m["tensors"]["sampler/_leaves"].update(shape=[-32]),
    "tensor shape wrong": lambda m: m["tensors"]["sampler/_leaves"].update(shape=[16]),
    "tensor dtype unknown": lambda m: m["tensors"]["sampler/_leaves"].update(dtype="float128"),
    "tensor dtype same size": lambda m: m["tensors"]["sampler/_leaves"].update(dtype="int32"),
    "tensor checksum wrong": lambda m: m["tensors"]["sampler/_leaves"].update(checksum="crc32:00000000"),
    "tensor checksum foreign": lambda m: m["tensors"]["sampler/_leaves"].update(checksum="md5:00"),
    "data dir leaves the checkpoint": edit(["data"], "../ckpt"),
    "data dir absolute": edit(["data"], "/tmp"),
    "data dir dot-dot": edit(["data"], ".."),
    "tensor file leaves the checkpoint": lambda m: m["tensors"]["sampler/_leaves"].update(file="../meta.json"),
    "tensor file absolute": lambda m: m["tensors"]["sampler/_leaves"].update(file="/etc/hostname"),
    "tensor file dot-dot": lambda m: m["tensors"]["sampler/_leaves"].update(file=".."),
    "tensor file empty": lambda m: m["tensors"]["sampler/_leaves"].update(file=""),
    "version 1": edit(["version"], 1),
}
COPY_ONLY = {
    "leaf key not a list": lambda m: m["storage"]["leaves"][0].update(key=5),
    "leaf tensor unknown": lambda m: m["storage"]["leaves"][0].update(tensor="storage/none"),
    "item dims wrong": edit(["storage", "item_dims"], [3]),
    "layout unknown": edit(["storage", "layout"], "sparse"),
}
INPLACE_ONLY = {
    "generation older": edit(["storage", "generation"], lambda g: g - 1),
    "generation a string": edit(["storage", "generation"], "0"),
    "layout id other": edit(["storage", "layout_id"], "0" * 32),
    "leaf checksum wrong": lambda m: m["storage"]["leaves"][0].update(checksum="crc32:00000000"),
    "leaf dtype other": lambda m: m["storage"]["leaves"][0].update(dtype="int32"),
    "inplace flag on a copy path": edit(["storage", "inplace"], "yes"),
}


@pytest.mark.parametrize(
    "kind, what",
    [("copy", w) for w in [*WRONG_VALUES, *COPY_ONLY]] + [("inplace", w) for w in [*WRONG_VALUES, *INPLACE_ONLY]],
)
def test_wrong_values_inside_valid_json_are_refused(tmp_path, kind, what):
    path = tmp_path / "ckpt"
    written(path, kind)
    gc.collect()
    rb = target(path, kind)
    meta = json.loads((path / "meta.json").read_text())
    {**WRONG_VALUES, **COPY_ONLY, **INPLACE_ONLY}[what](meta)
    (path / "meta.json").write_text(json.dumps(meta))
    assert_refused(rb, path, match=".")


@pytest.mark.parametrize("kind", ["copy", "inplace"])
def test_consistent_but_wrong_tensor_values_are_refused(tmp_path, kind):
    """A priority leaf that is NaN or negative, with a checksum that matches it."""
    path = tmp_path / "ckpt"
    written(path, kind)
    gc.collect()
    rb = target(path, kind)
    meta = json.loads((path / "meta.json").read_text())
    desc = meta["tensors"]["sampler/_leaves"]
    file = path / meta["data"] / desc["file"]
    leaves = torch.frombuffer(bytearray(file.read_bytes()), dtype=torch.float32)
    for bad in (float("nan"), -1.0):
        leaves[3] = bad
        file.write_bytes(leaves.numpy().tobytes())
        desc["checksum"] = f"crc32:{zlib.crc32(leaves.numpy().tobytes()):08x}"
        (path / "meta.json").write_text(json.dumps(meta))
        assert_refused(rb, path, match="leaf 3")
    # priorities on slots past the stored rows would let sample() return rows never written
    leaves[3] = 1.0
    leaves[CAPACITY - 1 :] = 0.0
    meta["storage"]["len"] = CAPACITY - 1
    if kind == "copy":
        for leaf in meta["storage"]["leaves"]:
            d = meta["tensors"][leaf["tensor"]]
            rows = path / meta["data"] / d["file"]
            body = rows.read_bytes()[: (len(rows.read_bytes()) // CAPACITY) * (CAPACITY - 1)]
            rows.write_bytes(body)
            d["shape"][0] = CAPACITY - 1
            d["checksum"] = f"crc32:{zlib.crc32(body):08x}"
    leaves[CAPACITY - 1] = 0.5
    file.write_bytes(leaves.numpy().tobytes())
    desc["checksum"] = f"crc32:{zlib.crc32(leaves.numpy().tobytes()):08x}"
    meta["writer"]["state"]["_cursor"] = CAPACITY - 1
    (path / "meta.json").write_text(json.dumps(meta))
    assert_refused(rb, path, match="31")


# ------------------------------------------------------------------ crashes between writes
@pytest.mark.parametrize("step", ["tensor", "data_renamed", "meta_written", "meta_replaced"])
def test_crash_inside_an_inplace_dumps(tmp_path, dumps_crashing_at, step):
    """In place, the rows written after the first dumps are already in the checkpoint's files:
    the old checkpoint is refused (its rows are gone), unless the new one was completed."""
    path = tmp_path / "ckpt"
    rb = written(path, "inplace")
    rb.extend(data(5, start=500))
    expected = state(rb)
    dumps_crashing_at(rb, path, step)
    del rb
    gc.collect()
    other = buffer(LazyMemmapStorage.open(path))
    if step == "meta_replaced":
        other.loads(path)
        assert state(other) == expected
    else:
        assert_refused(other, path, match="changed after the last completed dumps")
    other.dumps(path)  # a new dumps recovers, and leaves no temporary files behind
    assert not [p for p in path.rglob(".tmp*")]
    fresh = buffer(LazyMemmapStorage.open(path))
    fresh.loads(path)
    assert len(fresh) == CAPACITY


@pytest.fixture
def killed(killed_process):
    """Two in-place checkpoints of a process, then killed in the middle of a write to the second."""
    return killed_process


@pytest.mark.slow
@pytest.mark.parametrize("when", ["after_dumps", "mid_extend"])
def test_a_process_killed_after_dumps_or_mid_write(killed, when):
    path = killed[when]
    rb = buffer(LazyMemmapStorage.open(path))
    if when == "after_dumps":
        rb.loads(path)  # exactly the dumped state
        assert len(rb) == CAPACITY and rb.writer._cursor == 8 and rb.writer._write_count == 40
        assert rb[:]["count"].tolist() == list(range(32, 40)) + list(range(8, 32))
        assert torch.equal(rb[:]["obs"][:, 0], rb[:]["count"].float())
    else:
        assert rb.storage._storage["obs"][8, 0] == 900  # the torn write did land
        err = assert_refused(rb, path, match="changed after the last completed dumps")
        assert "dumps()" in str(err)


# ------------------------------------------------------------------ item 8: all or nothing
def test_a_load_that_fails_part_way_leaves_the_buffer_as_it_was(tmp_path):
    """The repro of issue 11: the writer's state lacks ``_cursor``; the rows came first."""
    path = tmp_path / "ckpt"
    written(path, "copy")
    rb = target(path, "copy")
    meta = json.loads((path / "meta.json").read_text())
    del meta["writer"]["state"]["_cursor"]
    (path / "meta.json").write_text(json.dumps(meta))
    err = assert_refused(rb, path, match="_cursor")
    assert not isinstance(err, KeyError)
    rb.extend(data(2, start=2000))  # still a working buffer
    assert rb[5:7]["count"].tolist() == [2000, 2001]


def test_a_storage_with_other_entries_is_refused_not_overwritten(tmp_path):
    path = tmp_path / "ckpt"
    written(path, "copy")
    rb = buffer(LazyTensorStorage(CAPACITY))
    rb.extend(TensorDict({"other": torch.ones(3)}, [3]))
    assert_refused(rb, path, match="'other'")


# ------------------------------------------------------------------ item 9: in place = snapshot
def test_inplace_checkpoint_is_the_last_dumps_or_refused(tmp_path):
    path = tmp_path / "ckpt"
    rb = written(path, "inplace")
    dumped = state(rb)
    rb.extend(data(3, start=700))  # overwrites rows 8..10 of the checkpoint's files
    rb.update_priority(torch.tensor([8]), torch.tensor([9.0]))
    err = assert_refused(target(path, "inplace"), path, match="changed after the last completed dumps")
    assert "dumps()" in str(err)
    rb.dumps(path)
    again = buffer(LazyMemmapStorage.open(path))
    again.loads(path)
    assert state(again) == state(rb) != dumped
    # without writes in between, every reload gives the dumped state, however often
    for _ in range(2):
        other = buffer(LazyMemmapStorage.open(path))
        other.loads(path)
        assert state(other) == state(rb)


def test_readme_loader_and_reap_collect_flow(tmp_path):
    """``reap collect --out DIR``: a buffer over DIR, extends, one dumps(DIR); then README's
    ``load_run``: ``LazyMemmapStorage.open(DIR)`` and ``loads(DIR)``, sampling, extending."""
    path = tmp_path / "run"
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(100, scratch_dir=path, auto_cleanup=False))
    for i in range(5):
        rb.extend(data(20, start=20 * i))
    rb.dumps(path)
    del rb
    gc.collect()
    loaded = TensorDictReplayBuffer(storage=LazyMemmapStorage.open(path), batch_size=16)
    loaded.loads(path)
    assert len(loaded) == 100 and loaded[:]["count"].tolist() == list(range(100))
    assert loaded.sample().batch_size == (16,)
    loaded.loads(path)  # loading twice is fine: nothing was written in between
    loaded.extend(data(1, start=5000))
    with pytest.raises(CheckpointError, match="changed after the last completed dumps"):
        TensorDictReplayBuffer(storage=LazyMemmapStorage.open(path)).loads(path)


# ------------------------------------------------------------------ item 10: checksums
@pytest.mark.parametrize("kind", ["copy", "inplace"])
def test_same_size_garbage_in_rows_is_caught_by_the_checksum_unless_skipped(tmp_path, kind):
    path = tmp_path / "ckpt"
    written(path, kind)
    gc.collect()
    meta = json.loads((path / "meta.json").read_text())
    if kind == "copy":
        leaf = meta["storage"]["leaves"][0]
        file = path / meta["data"] / meta["tensors"][leaf["tensor"]]["file"]
    else:
        file = path / "storage" / meta["storage"]["leaves"][0]["file"]
    body = bytearray(file.read_bytes())
    body[5] ^= 0xFF  # one flipped byte inside the stored rows
    file.write_bytes(bytes(body))
    err = assert_refused(target(path, kind), path, match="checksum")
    assert file.name in str(err)
    rb = target(path, kind)
    rb.loads(path, verify_checksum=False)  # the option for huge buffers: trusts the bytes
    assert len(rb) == CAPACITY


def test_dumps_without_checksums(tmp_path):
    path = tmp_path / "ckpt"
    rb = buffer(LazyTensorStorage(CAPACITY))
    rb.extend(data(10))
    rb.dumps(path, checksum=False)
    meta = json.loads((path / "meta.json").read_text())
    assert all(d["checksum"] is None for d in meta["tensors"].values())
    other = buffer(LazyTensorStorage(CAPACITY))
    other.loads(path)
    assert state(other) == state(rb)
    rb.dumps(path)
    meta = json.loads((path / "meta.json").read_text())
    assert all(d["checksum"].startswith("crc32:") for d in meta["tensors"].values())
    with pytest.raises(TypeError, match="checksum"):
        rb.dumps(path, checksum="yes")
