"""Reading a TorchRL replay-buffer checkpoint (the directory TorchRL's ``rb.dumps(path)`` writes).

``rb.loads(path)`` of a reap buffer recognises such a directory and loads its data, sampler and
writer state, all or nothing, through the same checks as a reap checkpoint. Nothing is
unpickled: TorchRL writes the rows as raw memory-mapped files described by JSON
(``storage/meta.json``), the samplers' and writer's state as JSON and raw files, and these are
all that is read. What TorchRL pickled, or what reap has no place for, is skipped with a
warning naming it:

* ``prefetch.pkl`` (the prefetch queue, a pickle) and ``transform.t`` (the transforms' state, a
  ``torch.save`` pickle);
* ``rng_state`` (the buffer's generator: reap's samplers keep their own).

TorchRL layout read here (TorchRL 0.14)::

    buffer_metadata.json             {"batch_size": ..., ...}
    storage/storage_metadata.json    {"len": n, ...}
    storage/meta.json, <key>.memmap  a TensorDict memmap: leaves' dtype and shape in JSON,
                                     nested TensorDicts in sub-directories
    sampler/                         PrioritizedSampler: sumtree.memmap + sampler_metadata.json;
                                     SamplerWithoutReplacement: a TensorDict memmap of its state;
                                     RandomSampler, SliceSampler: nothing
    writer/metadata.json             {"cursor": ..., "write_count": ...} (RoundRobinWriter)

Examples:
    >>> import tempfile
    >>> is_torchrl_checkpoint(tempfile.mkdtemp())
    False
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import torch

from reap_replay import checkpoint as ckpt

BUFFER_META = "buffer_metadata.json"
#: Files of TorchRL's checkpoint that are not read, and why.
SKIPPED = {
    "prefetch.pkl": "TorchRL's pickled prefetch queue (reap never unpickles a checkpoint)",
    "transform.t": "the transforms' state, a torch.save pickle (reap never unpickles a checkpoint)",
    "rng_state": "the buffer's random generator state (reap's samplers keep their own)",
}
_STATELESS_SAMPLERS = ("RandomSampler", "SliceSampler")
_ROUND_ROBIN = ("RoundRobinWriter", "TensorDictRoundRobinWriter")


def is_torchrl_checkpoint(path) -> bool:
    """Whether ``path`` is a directory written by TorchRL's ``ReplayBuffer.dumps``."""
    path = Path(path)
    return (path / BUFFER_META).is_file() and (path / "storage").is_dir() and not (path / ckpt.META).exists()


def read_torchrl_checkpoint(path, buffer, *, drop_index: bool = False) -> tuple[dict, dict[str, torch.Tensor]]:
    """TorchRL's checkpoint at ``path`` as reap's checkpoint ``(meta, tensors)`` for ``buffer``.

    The kinds are TorchRL's as far as its files tell them; ``buffer.loads`` then checks the
    rest exactly as for a reap checkpoint. ``drop_index``: leave out the ``"index"`` column
    TorchRL's ``TensorDictReplayBuffer`` stores with every row (each row's own position, which
    reap's adds when sampling instead). Raises :class:`~reap_replay.checkpoint.CheckpointError`.
    """
    path = ckpt.checked_dir(Path(path))
    for name in sorted(p.name for p in path.iterdir()):
        if name in SKIPPED:
            warnings.warn(f"{path}: {name} is skipped: {SKIPPED[name]}", UserWarning, stacklevel=3)
        elif name not in (BUFFER_META, "storage", "sampler", "writer"):
            warnings.warn(f"{path}: {name} is not part of a TorchRL checkpoint reap reads; skipped",
                          UserWarning, stacklevel=3)
    buffer_meta = _object(path / BUFFER_META)
    tensors: dict[str, torch.Tensor] = {}
    storage = _storage(path / "storage", buffer, tensors, drop_index)
    writer = _writer(path / "writer", buffer, storage["len"])
    storage["last_cursor"] = writer.pop("last_cursor")
    meta = {
        "buffer": type(buffer).__name__,
        "batch_size": buffer_meta.get("batch_size"),
        "storage": storage,
        "sampler": _sampler(path / "sampler", buffer, tensors),
        "writer": writer,
    }
    return meta, tensors


def _object(file: Path) -> dict:
    value = ckpt.read_json(file, file.name)
    if not isinstance(value, dict):
        raise ckpt.CheckpointError(f"{file} holds {type(value).__name__}, not a JSON object")
    return value


def _raw(directory: Path, name: str, dtype, shape) -> torch.Tensor:
    """The raw file ``name`` (TorchRL's MemoryMappedTensor bytes) as a tensor, copied."""
    if not isinstance(dtype, str) or not dtype.startswith("torch."):
        raise ckpt.CheckpointError(f"{directory}: {name} has dtype {dtype!r}, not a torch dtype")
    desc = {"file": name, "dtype": dtype.removeprefix("torch."), "shape": shape}
    return ckpt.load_raw(directory, desc, verify=False)


def _tensordict_leaves(directory: Path, prefix: tuple, leaves: dict, tds: list, *, rows: bool = True) -> list[int]:
    """Reads the TensorDict memmap in ``directory`` (JSON + raw files); returns its shape."""
    meta = _object(directory / "meta.json")
    kind = meta.get("_type")
    if kind != "<class 'tensordict._td.TensorDict'>":
        raise ckpt.CheckpointError(
            f"{directory}: holds a {kind!r}; reap reads TorchRL storages of TensorDicts only"
        )
    shape = meta.get("shape")
    if not isinstance(shape, list) or (rows and not shape):
        raise ckpt.CheckpointError(f"{directory}: shape {shape!r} has no leading storage dimension")
    for key, entry in meta.items():
        if key in ("shape", "device", "_type", "names"):
            continue
        ckpt.plain_name(directory, key, "entry")
        if not isinstance(entry, dict):
            raise ckpt.CheckpointError(f"{directory}: entry {key!r} is {entry!r}")
        if entry.get("type") == "TensorDict":
            sub = ckpt.checked_dir(directory / key)
            sub_shape = _tensordict_leaves(sub, (*prefix, key), leaves, tds)
            tds.append({"key": [*prefix, key], "item_dims": sub_shape[1:]})
            continue
        if "dtype" not in entry or entry.get("is_nested"):
            raise ckpt.CheckpointError(
                f"{directory}: entry {key!r} ({entry.get('type', 'nested tensor')}) is not a plain "
                "tensor; reap reads tensors and TensorDicts only (non-tensor data is pickled by TorchRL)"
            )
        leaves[(*prefix, key)] = _raw(directory, f"{key}.memmap", entry["dtype"], entry.get("shape"))
    return shape


def _storage(directory: Path, buffer, tensors: dict, drop_index: bool) -> dict:
    from reap_replay.storages import TensorStorage

    directory = ckpt.checked_dir(directory)
    info = _object(directory / "storage_metadata.json")
    if info.get("is_pytree"):
        raise ckpt.CheckpointError(f"{directory}: a storage of pytrees; reap reads TensorDict storages only")
    if not isinstance(buffer._storage, TensorStorage):
        raise ckpt.CheckpointError(
            f"{directory}: TorchRL's tensor storage loads into a LazyTensorStorage or "
            f"LazyMemmapStorage, not a {type(buffer._storage).__name__}"
        )
    n = info.get("len")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ckpt.CheckpointError(f"{directory}: len={n!r} is not a row count")
    meta = {"kind": type(buffer._storage).__name__, "len": n}
    if not (directory / "meta.json").exists():  # never written to
        meta.update(max_size=buffer._storage.max_size, initialized=False)
        if n:
            raise ckpt.CheckpointError(f"{directory}: len={n} but no data (meta.json is missing)")
        return meta
    leaves: dict = {}
    tds: list = []
    shape = _tensordict_leaves(directory, (), leaves, tds)
    if drop_index:
        leaves.pop(("index",), None)
    meta.update(max_size=shape[0], initialized=True, layout="tensordict", item_dims=shape[1:], tds=tds,
                leaves=[])
    for i, (key, value) in enumerate(leaves.items()):
        if list(value.shape[: len(shape)]) != shape:
            raise ckpt.CheckpointError(f"{directory}: leaf {'.'.join(key)} has shape {list(value.shape)}, "
                                       f"not the storage's {shape}")
        name = f"storage/leaf{i}"
        tensors[name] = value[:n]
        meta["leaves"].append({"key": list(key), "tensor": name})
    return meta


def _sampler(directory: Path, buffer, tensors: dict) -> dict:
    mine = type(buffer._sampler).__name__
    files = {p.name for p in directory.iterdir()} if directory.is_dir() else set()
    if "sampler_metadata.json" in files:
        return {"kind": "PrioritizedSampler", "state": _prioritized(directory, buffer, tensors)}
    if "_sample_list.memmap" in files:
        return {"kind": "SamplerWithoutReplacement", "state": _without_replacement(directory, buffer, tensors)}
    if files:
        raise ckpt.CheckpointError(f"{directory}: sampler files {sorted(files)} are of no sampler reap reads")
    if mine not in _STATELESS_SAMPLERS:
        raise ckpt.CheckpointError(
            f"{directory.parent} holds no sampler state (TorchRL's RandomSampler or SliceSampler "
            f"wrote it), but this buffer uses {mine}"
        )
    return {"kind": mine, "state": {}}


def _prioritized(directory: Path, buffer, tensors: dict) -> dict:
    meta = _object(directory / "sampler_metadata.json")
    capacity = meta.get("_max_capacity")
    if not isinstance(capacity, (int, float)) or capacity != int(capacity) or capacity < 0:
        raise ckpt.CheckpointError(f"{directory}: _max_capacity={capacity!r} is not a size")
    capacity = int(capacity)
    mine = getattr(buffer._sampler, "_max_capacity", None)
    if mine is not None and mine != capacity:
        raise ckpt.CheckpointError(
            f"{directory}: TorchRL's PrioritizedSampler has max_capacity={capacity}, this buffer's "
            f"has {mine}"
        )
    leaves = _raw(directory, "sumtree.memmap", "torch.float64", [capacity])  # (p + eps) ** alpha
    tree = getattr(buffer._sampler, "_tree", None)
    if tree is not None and tree.leaves().numel() > capacity:  # reap's tree rounds its width up
        leaves = torch.cat([leaves, leaves.new_zeros(tree.leaves().numel() - capacity)])
    alpha, eps = meta.get("_alpha"), meta.get("_eps")
    max_priority = meta.get("_max_priority")
    raw_max = max_priority[0] if isinstance(max_priority, list) and max_priority else None
    if raw_max is not None and meta.get("_schema_version", 0) < 1 and isinstance(alpha, (int, float)) and alpha:
        # before schema 1, TorchRL could store the tree's value, (p + eps) ** alpha
        raw_max = max(float(leaves.max()) ** (1.0 / alpha) - float(eps or 0.0), 0.0)
    if raw_max is not None and not math.isfinite(raw_max):
        raise ckpt.CheckpointError(f"{directory}: _max_priority={max_priority!r} is not finite")
    tensors["sampler/_leaves"] = leaves
    return {"_alpha": alpha, "_beta": meta.get("_beta"), "_eps": eps, "_max_priority": raw_max,
            "_leaves": {"__tensor__": "sampler/_leaves"}}


def _without_replacement(directory: Path, buffer, tensors: dict) -> dict:
    leaves: dict = {}
    _tensordict_leaves(directory, (), leaves, [], rows=False)
    try:
        sample_list = leaves[("_sample_list",)]
        state = {
            "_pos": 0,  # TorchRL's _sample_list is the indices not drawn yet, as reap's
            "len_storage": int(leaves[("len_storage",)]),
            "_ran_out": bool(leaves[("_ran_out",)]),
            "drop_last": bool(leaves[("drop_last",)]),
            "shuffle": getattr(buffer._sampler, "shuffle", True),
        }
    except (KeyError, RuntimeError, ValueError) as err:
        raise ckpt.CheckpointError(f"{directory}: SamplerWithoutReplacement state lacks {err}") from None
    tensors["sampler/_sample_list"] = sample_list.to(torch.int64)
    state["_sample_list"] = {"__tensor__": "sampler/_sample_list"}
    return state


def _writer(directory: Path, buffer, n: int) -> dict:
    mine = type(buffer._writer).__name__
    if mine not in _ROUND_ROBIN:
        raise ckpt.CheckpointError(f"{directory.parent}: reap reads TorchRL's RoundRobinWriter state, "
                                   f"this buffer uses {mine}")
    meta = _object(ckpt.checked_dir(directory) / "metadata.json")
    unknown = set(meta) - {"cursor", "write_count"}
    if unknown:
        raise ckpt.CheckpointError(
            f"{directory}: writer state {sorted(unknown)} is not a RoundRobinWriter's (generation "
            "tracking and other writers are not read)"
        )
    cursor, count = meta.get("cursor"), meta.get("write_count")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (cursor, count)):
        raise ckpt.CheckpointError(f"{directory}: cursor={cursor!r}, write_count={count!r} are not integers")
    return {"kind": mine, "state": {"_cursor": cursor, "_write_count": count},
            "last_cursor": cursor if count else None}
