"""Trajectory ids and ``split_trajectories``.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.collectors.trajectories import split_trajectories
    >>> batch = TensorDict({("collector", "traj_ids"): torch.tensor([0, 0, 1, 1, 1]),
    ...                     "x": torch.arange(5)}, batch_size=[5])
    >>> split_trajectories(batch)["x"].tolist()
    [[0, 1, 0], [2, 3, 4]]
"""

from __future__ import annotations

import multiprocessing
import threading

import torch
from tensordict import TensorDict, TensorDictBase


class TrajIdCounter:
    """Hands out fresh trajectory ids; one counter serves every worker of a collector.

    ``take(n)`` returns the first of ``n`` consecutive new ids. With ``shared=True`` the value
    lives in a ``multiprocessing.Value`` (pass the counter to workers when starting them) so ids
    never collide across processes.
    """

    def __init__(self, start: int = 0, *, shared: bool = False, context=None):
        self._shared = (context or multiprocessing.get_context("spawn")).Value("q", start) if shared else None
        self._next = start
        self._lock = threading.Lock()

    def take(self, n: int) -> int:
        if self._shared is not None:
            with self._shared.get_lock():
                first = self._shared.value
                self._shared.value = first + n
            return first
        with self._lock:
            first = self._next
            self._next = first + n
        return first

    def __getstate__(self):
        return {"_shared": self._shared, "_next": self._next}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()


def mark_truncated(batch: TensorDictBase) -> TensorDictBase:
    """``set_truncated=True``: the batch's last step (last dim) is truncated, and so done, in
    ``"next"`` (``"terminated"`` is left as it is), in place, as TorchRL's collectors mark it.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({"next": {"done": torch.zeros(3, 1, dtype=torch.bool),
        ...                              "truncated": torch.zeros(3, 1, dtype=torch.bool)}}, batch_size=[3])
        >>> mark_truncated(batch)["next", "done"].flatten().tolist()
        [False, False, True]
    """
    last = (slice(None),) * (batch.batch_dims - 1) + (-1,)
    for key in ("truncated", "done"):
        batch.get(("next", key))[last] = True
    return batch


def split_trajectories(batch: TensorDictBase, *, traj_key=("collector", "traj_ids")) -> TensorDict:
    """Regroup a batch by trajectory: ``[n_traj, max_len]``, zero-padded.

    ``("collector", "mask")`` marks the valid steps. Works on ``[T]`` and ``[B, T]`` batches;
    steps keep their time order.
    """
    flat = batch.reshape(-1)
    ids = flat.get(traj_key)
    unique, inverse, counts = torch.unique(ids, return_inverse=True, return_counts=True)
    n_traj, max_len = len(unique), int(counts.max())
    order = torch.argsort(inverse, stable=True)
    position = torch.arange(len(ids)) - torch.repeat_interleave(
        torch.cumsum(counts, 0) - counts, counts
    )
    out = TensorDict(
        {k: torch.zeros((n_traj, max_len, *v.shape[1:]), dtype=v.dtype)
         for k, v in flat.items(include_nested=True, leaves_only=True)},
        batch_size=[n_traj, max_len],
    )
    rows = inverse[order]
    for key, value in flat.items(include_nested=True, leaves_only=True):
        out.get(key)[rows, position] = value[order]
    mask = torch.zeros(n_traj, max_len, dtype=torch.bool)
    mask[rows, position] = True
    out.set(("collector", "mask"), mask)
    return out
