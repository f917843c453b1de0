"""Batches from the actors to the driver as NumPy arrays, not pickled tensors.

Ray pickles a ``torch.Tensor`` through torch's own reducer (a byte copy of its storage per
tensor, on both sides); NumPy arrays it moves as out-of-band buffers, one memory copy into the
reply (or the object store) and none to read them. An actor therefore returns
:func:`pack_batch`'s ``PackedBatch`` (the batch size and a dict of arrays), and the driver
rebuilds the TensorDict with :func:`unpack_batch`, or :func:`stack_batches` for a sync batch
(one copy per key straight into the stacked result). The driver copies once because Ray's
arrays are read-only views of its buffers: a batch the trainer may write into (and keep) must
own its memory. The ``("collector", ...)`` columns that hold one value throughout (the policy
version, the worker id) travel as that value (:class:`Filled`): a quarter less to move for a
small batch, which then fits in Ray's reply instead of its object store. Batches that are not
plain CPU tensors (non-tensor data, another device) travel as they are.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> batch = TensorDict({"obs": torch.ones(2, 3), ("next", "reward"): torch.zeros(2, 1)}, batch_size=[2])
    >>> packed = pack_batch(batch)
    >>> type(packed).__name__, sorted(packed.arrays, key=str)
    ('PackedBatch', [('next', 'reward'), 'obs'])
    >>> torch.equal(unpack_batch(packed)["obs"], batch["obs"])
    True
    >>> stack_batches([packed, packed]).batch_size
    torch.Size([2, 2])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase


class PackedBatch(NamedTuple):
    batch_size: tuple
    arrays: dict  # key (str or tuple) -> np.ndarray or Filled


class Filled(NamedTuple):
    """An array of ``shape`` holding ``value`` everywhere."""

    value: int
    shape: tuple
    dtype: np.dtype

    def array(self) -> np.ndarray:
        return np.full(self.shape, self.value, self.dtype)


def _filled(array: np.ndarray):
    """``array`` as :class:`Filled` if it is an integer array holding one value, else ``array``."""
    if array.dtype.kind not in "iu" or array.size == 0:
        return array
    flat = array.reshape(-1)
    first = flat[0]
    if (flat == first).all():
        return Filled(first.item(), array.shape, array.dtype)
    return array


def pack_batch(batch):
    """``batch`` as a :class:`PackedBatch` of NumPy arrays sharing its memory, or ``batch``
    itself when a leaf is not a CPU tensor NumPy can hold."""
    if type(batch) is not TensorDict:
        return batch
    arrays = {}
    for key, value in batch.items(include_nested=True, leaves_only=True):
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.dtype == torch.bfloat16 \
                or value.requires_grad:
            return batch
        arrays[key] = value.numpy()
        if type(key) is tuple and key[0] == "collector":
            arrays[key] = _filled(arrays[key])
    return PackedBatch(tuple(batch.batch_size), arrays)


def _tensor(array) -> torch.Tensor:
    if type(array) is Filled:
        return torch.from_numpy(array.array())
    return torch.from_numpy(np.array(array))  # one copy: writable memory the batch owns


def unpack_batch(packed) -> TensorDictBase:
    """The TensorDict of a :class:`PackedBatch` (anything else is returned as it is)."""
    if type(packed) is not PackedBatch:
        return packed
    out = TensorDict(batch_size=packed.batch_size)
    for key, array in packed.arrays.items():
        out.set(key, _tensor(array))
    return out


def stack_batches(parts: list) -> TensorDictBase:
    """``torch.stack(parts, 0)`` of packed (or unpacked) batches, copying each array once."""
    if not all(type(p) is PackedBatch for p in parts) or len({p.batch_size for p in parts}) > 1 \
            or len({tuple(p.arrays) for p in parts}) > 1:
        return torch.stack([unpack_batch(p) for p in parts], 0)
    out = TensorDict(batch_size=(len(parts), *parts[0].batch_size))
    for key in parts[0].arrays:
        arrays = [p.arrays[key] for p in parts]
        if all(type(a) is Filled for a in arrays):
            stacked = np.empty((len(arrays), *arrays[0].shape), np.result_type(*(a.dtype for a in arrays)))
            for row, a in zip(stacked, arrays):
                row.fill(a.value)
        else:
            stacked = np.stack([a.array() if type(a) is Filled else a for a in arrays])
        out.set(key, torch.from_numpy(stacked))
    return out


__all__ = ["Filled", "PackedBatch", "pack_batch", "stack_batches", "unpack_batch"]
