"""Trajectory ids, ``split_trajectories`` and the ``"time"`` name of a batch's last dim.

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
import warnings

import torch
from tensordict import TensorDictBase, unravel_key


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
    if ("next", "truncated") in batch.keys(True):
        for key in ("truncated", "done"):
            batch.get(("next", key))[last] = True
        return batch
    # an env of nested done groups (the collectors' TensorDict path): each group's flags, as TorchRL
    nxt = batch.get("next")
    groups = [k[:-1] for k in nxt.keys(True, True) if isinstance(k, tuple) and k[-1] == "truncated"]
    if not groups:
        raise RuntimeError("set_truncated=True but the env has no 'truncated' flag; add one "
                           "(env.add_truncated_keys())")
    for group in groups:
        for key in ("truncated", "done"):
            flag = nxt.get((*group, key)).clone()
            flag[last] = True
            nxt.set_((*group, key), flag)  # in place: a worker's slot in shared memory is locked
    return batch


def extend_by_steps(replay_buffer, batch: TensorDictBase) -> None:
    """``extend_buffer=False`` (TorchRL's, deprecated there): the buffer gets ``batch`` one time
    step after another, each step an item of the env's batch shape (a storage with ``ndim > 1``
    lays the envs along its own dims, so it gets the rollout as it is).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap import LazyTensorStorage, ReplayBuffer
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10))
        >>> extend_by_steps(rb, TensorDict({"t": torch.tensor([[0, 1, 2], [0, 1, 2]])}, [2, 3]))
        >>> len(rb), rb[:]["t"].tolist()
        (3, [[0, 0], [1, 1], [2, 2]])
    """
    if getattr(getattr(replay_buffer, "storage", None), "ndim", 1) > 1 or batch.batch_dims < 2:
        replay_buffer.extend(batch)
    else:
        replay_buffer.extend(batch.movedim(-1, 0))


def tag_policy_version(batch: TensorDictBase, version) -> TensorDictBase:
    """``track_policy_version=True``: write the version of the weights that collected ``batch``
    as ``"policy_version"`` and ``("next", "policy_version")`` (int64, one per frame, no
    trailing dim: the observation TorchRL's ``PolicyVersion`` transform adds), in place.
    ``version`` is an int, or a tensor of the batch's shape (each frame's).

    Examples:
        >>> from tensordict import TensorDict
        >>> batch = tag_policy_version(TensorDict(batch_size=[3]), 2)
        >>> batch["next", "policy_version"].tolist(), batch["policy_version"].dtype
        ([2, 2, 2], torch.int64)
    """
    version = torch.as_tensor(version, dtype=torch.int64).expand(batch.batch_size)
    batch.set("policy_version", version.clone())
    batch.set(("next", "policy_version"), version.clone())
    return batch


def mark_time(batch: TensorDictBase) -> TensorDictBase:
    """Name ``batch``'s last dim ``"time"``, as TorchRL names its collectors' batches (its value
    estimators and ``RewardSum`` read it); other names are kept. Returns ``batch``.

    Examples:
        >>> from tensordict import TensorDict
        >>> mark_time(TensorDict(batch_size=[2, 8])).names
        [None, 'time']
    """
    if batch.batch_dims:
        names = list(batch.names)
        if "time" not in names:
            names[-1] = "time"
            batch.names = names
    return batch


def split_trajectories(
    rollout_tensordict: TensorDictBase,
    *,
    prefix=None,
    trajectory_key=None,
    done_key=None,
    as_nested: bool | torch.layout = False,
) -> TensorDictBase:
    """Regroup a batch by trajectory, TorchRL's ``split_trajectories``: ``[n_traj, max_len]``,
    zero-padded, trajectories in the order they appear (rows first), steps in time order.

    The trajectory ids are read at ``trajectory_key``, else at ``(prefix, "traj_ids")`` (prefix
    ``"collector"`` when the batch has a ``"collector"`` entry, none otherwise); if absent they
    are made from ``("next", done_key)`` (``"done"``: a trajectory ends where it is set, and at
    the end of each row) and written there. A ``"mask"`` entry beside the ids marks the valid
    steps. A batch whose rows are each one whole trajectory comes back as it is, with the mask.
    ``as_nested=True`` gives strided nested tensors of batch size ``[n_traj, -1]`` instead,
    without padding or mask.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> done = torch.tensor([False, True, False, False, True]).unsqueeze(-1)
        >>> batch = TensorDict({"x": torch.arange(5), ("next", "done"): done}, batch_size=[5])
        >>> out = split_trajectories(batch, done_key="done")
        >>> out["x"].tolist(), out["mask"].tolist()
        ([[0, 1, 0], [2, 3, 4]], [[True, True, False], [True, True, True]])
    """
    if not rollout_tensordict.batch_dims:
        raise ValueError("split_trajectories needs a batch with a time dimension (its last), got batch_size=[]")
    if trajectory_key is not None:
        ids_key = unravel_key(trajectory_key)
        mask_key = "mask" if isinstance(ids_key, str) else (*ids_key[:-1], "mask")
    else:
        if prefix is None and "collector" in rollout_tensordict.keys():
            prefix = "collector"
        ids_key, mask_key = ("traj_ids", "mask") if prefix is None else ((prefix, "traj_ids"), (prefix, "mask"))
    td = rollout_tensordict.copy()
    ids = td.get(ids_key, None)
    if ids is None:
        ids = _ids_from_done(td, unravel_key(("next", done_key or "done")))
        td.set(ids_key, ids)
    lengths = torch.unique_consecutive(ids.reshape(-1), return_counts=True)[1].tolist()
    flat = td.reshape(-1)
    if as_nested is not False:
        if as_nested not in (True, torch.strided):
            raise ValueError(
                f"split_trajectories: as_nested must be a bool or torch.strided, got {as_nested!r} (a "
                "TensorDict of batch size [n_traj, -1] holds strided nested tensors only)"
            )
        with warnings.catch_warnings():  # torch calls its nested tensors a prototype
            warnings.simplefilter("ignore", UserWarning)
            return flat.apply(lambda v: torch.nested.as_nested_tensor(list(v.split(lengths))),
                              batch_size=[len(lengths), -1])
    if set(lengths) == {td.shape[-1]}:
        td.set(mask_key, torch.ones(td.shape, dtype=torch.bool, device=ids.device))
        return td.unsqueeze(0) if td.batch_dims == 1 else td
    flat.set(mask_key, torch.ones(flat.shape, dtype=torch.bool, device=ids.device))
    width = max(lengths)
    return torch.stack([piece.pad([0, width - len(piece)]) for piece in flat.split(lengths)])


def _ids_from_done(td: TensorDictBase, done_key) -> torch.Tensor:
    """Trajectory ids from the done flags: a new id after each done step and at each row start."""
    done = td.get(done_key).reshape(*td.shape, -1).any(-1)
    rows = done.reshape(-1, done.shape[-1])
    starts = torch.nn.functional.pad(rows[:, :-1], [1, 0]).long().cumsum(-1)
    offsets = torch.cumsum(starts[:, -1] + 1, 0) - (starts[:, -1] + 1)
    return (starts + offsets.unsqueeze(-1)).reshape(td.shape)
