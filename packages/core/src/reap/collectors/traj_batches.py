"""``trajs_per_batch``: batches of whole trajectories, regrouped from a collector's batches.

TorchRL's collectors take ``trajs_per_batch=N`` to yield batches of ``N`` complete
trajectories instead of ``frames_per_batch`` frames, and reap's take it too. The collector
still steps its envs ``frames_per_batch`` frames at a time (the per-step path does not change);
:class:`TrajectoryBatches` takes each of those batches whole, cuts it by ``("collector",
"traj_ids")`` (so batched envs and the workers' stacked batches split too), keeps the steps of
trajectories still running until their episode ends in a later batch, and queues each one that
is complete (its last step ``("next", "done")``, or ``"terminated"``/``"truncated"``, set). A
trajectory is never yielded or written in part.

What the collector yields then:

* ``traj_format="padded"`` (TorchRL's default for now): ``[N, max_len]`` batches, each row one
  trajectory from its first step, zero-padded after its last, with a boolean ``("collector",
  "mask")`` that marks the valid steps.
* ``traj_format="cat"``: the ``N`` trajectories one after the other, a flat ``[sum of their
  lengths]`` batch with no padding and no mask (each ends where ``("next", "done")`` is set).
* with a ``replay_buffer``: nothing (``None`` once per collected batch); each complete
  trajectory is written flat, as in ``"cat"``, as soon as it is complete, ``trajs_per_write`` of
  them per ``extend()`` (default: all that are ready), whatever ``traj_format`` says. A
  ``SliceSampler(end_key=("next", "done"))`` then never samples across two episodes.

Leaving ``traj_format`` unset yields ``"padded"`` batches with a ``FutureWarning``, as TorchRL
0.14 does: its default becomes ``"cat"`` in torchrl v0.16. ``reset()`` drops what is assembled
(a partial reset: the steps of the envs it resets), and so do ``set_seed()`` and, after each
batch, ``reset_at_each_iter=True`` (the episodes it cuts never end; ``set_truncated=True``
ends them instead, and they are yielded).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> def steps(ids, done):  # a collector batch, as a single env yields it
    ...     return TensorDict({"x": torch.arange(len(ids)),
    ...                        ("collector", "traj_ids"): torch.tensor(ids),
    ...                        ("next", "done"): torch.tensor(done).unsqueeze(-1)}, batch_size=[len(ids)])
    >>> trajs = TrajectoryBatches(2, "padded")
    >>> list(trajs.regroup(steps([0, 0, 1], [False, True, False])))  # trajectory 1 goes on
    []
    >>> batch, = trajs.regroup(steps([1, 2, 2], [True, False, False]))
    >>> batch.batch_size, batch["collector", "traj_ids"].tolist()
    (torch.Size([2, 2]), [[0, 0], [1, 1]])
    >>> batch["collector", "mask"].tolist()  # trajectory 1: a step of each batch
    [[True, True], [True, True]]
    >>> [len(chunks) for chunks in trajs.partial.values()]  # trajectory 2: still running
    [1]
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import torch
from tensordict import TensorDictBase, is_non_tensor
from tensordict.base import _is_leaf_nontensor

from reap.collectors.arguments import check_int
from reap.collectors.trajectories import mark_time

#: The layouts of ``traj_format``.
TRAJ_FORMATS = ("padded", "cat")
TRAJ_IDS = ("collector", "traj_ids")
MASK = ("collector", "mask")
#: A trajectory is complete when its last step has one of these (under ``"next"``) set.
END_KEYS = ("done", "terminated", "truncated")


def checked_traj_options(trajs_per_batch, trajs_per_write, traj_format, owner: str, *, replay_buffer=None,
                         split_trajs=False, track_traj_ids: bool = True,
                         reset_at_each_iter: bool = False) -> TrajectoryBatches | None:
    """The :class:`TrajectoryBatches` a collector built with these arguments regroups its batches
    with (None without ``trajs_per_batch``); every mistake is a ``ValueError`` that names the
    argument and the fix. ``traj_format=None`` with batches to yield (no ``replay_buffer``)
    means ``"padded"``, with a ``FutureWarning``.

    Examples:
        >>> checked_traj_options(4, None, "cat", "C")
        TrajectoryBatches(trajs_per_batch=4, traj_format='cat', trajs_per_write=None)
        >>> checked_traj_options(None, None, None, "C") is None
        True
        >>> checked_traj_options(4, None, "flat", "C")
        Traceback (most recent call last):
        ...
        ValueError: C: traj_format must be 'padded' or 'cat', got 'flat'
        >>> checked_traj_options(None, None, "cat", "C")
        Traceback (most recent call last):
        ...
        ValueError: C: traj_format='cat' has no effect without trajs_per_batch; pass trajs_per_batch=N (the complete trajectories in each batch), or leave traj_format unset
    """
    if traj_format is not None and traj_format not in TRAJ_FORMATS:
        raise ValueError(f"{owner}: traj_format must be 'padded' or 'cat', got {traj_format!r}")
    if trajs_per_batch is None:
        if traj_format not in (None, "padded"):  # "padded" is the layout's default: accepted, as TorchRL does
            raise ValueError(f"{owner}: traj_format={traj_format!r} has no effect without trajs_per_batch; pass "
                             "trajs_per_batch=N (the complete trajectories in each batch), or leave traj_format unset")
        if trajs_per_write is not None:
            raise ValueError(f"{owner}: trajs_per_write={trajs_per_write!r} has no effect without trajs_per_batch; "
                             "pass trajs_per_batch=N (and a replay_buffer) to write whole trajectories, or leave "
                             "trajs_per_write unset")
        return None
    check_int(trajs_per_batch, "trajs_per_batch", owner)
    check_int(trajs_per_write, "trajs_per_write", owner)
    if trajs_per_write is not None and replay_buffer is None:
        raise ValueError(f"{owner}: trajs_per_write={trajs_per_write!r} sets how many trajectories each "
                         "replay_buffer.extend() gets, and there is no replay_buffer; pass one, or leave "
                         "trajs_per_write unset (batches of trajs_per_batch trajectories are yielded)")
    if split_trajs:
        raise ValueError(f"{owner}: split_trajs=True and trajs_per_batch={trajs_per_batch} both regroup batches by "
                         "trajectory; pass one of them (trajs_per_batch yields whole trajectories only)")
    if not track_traj_ids:
        raise ValueError(f"{owner}: trajs_per_batch cuts batches by ('collector', 'traj_ids'), which "
                         "track_traj_ids=False turns off; leave track_traj_ids=True")
    if traj_format is None:
        if replay_buffer is None:
            warnings.warn(
                f"{owner}: trajs_per_batch={trajs_per_batch} without traj_format yields 'padded' batches, TorchRL's "
                "current default, which will change to 'cat' in torchrl v0.16 (and in reap with it); pass "
                "traj_format='padded' to keep this layout, or traj_format='cat' for flat, unpadded batches",
                FutureWarning, stacklevel=3)
        traj_format = "padded"
    return TrajectoryBatches(trajs_per_batch, traj_format, trajs_per_write, discard_in_flight=reset_at_each_iter)


class TrajectoryBatches:
    """The trajectories of a ``trajs_per_batch`` collector: ``partial`` (trajectory id -> the
    chunks of its steps so far) and ``complete`` (whole trajectories, 1-D, in the order they
    ended), and what :meth:`regroup` makes of them. ``discard_in_flight`` drops the partial ones
    after each batch (``reset_at_each_iter``: their episodes never go on).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({("collector", "traj_ids"): torch.tensor([[0, 0, 0], [1, 1, 2]]),
        ...                     ("next", "done"): torch.tensor([[0, 0, 1], [0, 1, 0]]).bool()},
        ...                    batch_size=[2, 3])  # two envs, three steps
        >>> trajs = TrajectoryBatches(2, "cat")
        >>> trajs.ingest(batch)
        >>> [len(t) for t in trajs.complete], sorted(trajs.partial)
        ([3, 2], [2])
        >>> trajs.next_batch()["collector", "traj_ids"].tolist()
        [0, 0, 0, 1, 1]
    """

    def __init__(self, trajs_per_batch: int, traj_format: str = "padded", trajs_per_write: int | None = None, *,
                 discard_in_flight: bool = False):
        self.trajs_per_batch = trajs_per_batch
        self.traj_format = traj_format
        self.trajs_per_write = trajs_per_write
        self.discard_in_flight = discard_in_flight
        self.partial: dict[int, list[TensorDictBase]] = {}
        self.complete: list[TensorDictBase] = []

    def __repr__(self) -> str:
        return (f"TrajectoryBatches(trajs_per_batch={self.trajs_per_batch}, traj_format={self.traj_format!r}, "
                f"trajs_per_write={self.trajs_per_write})")

    # ---- taking batches in ------------------------------------------------------------------------
    def ingest(self, batch: TensorDictBase) -> None:
        """Cut ``batch`` (any batch shape) by trajectory id and add its steps: to the running
        trajectories, and those that end in it to ``complete``. Steps are copied (the batch may
        be a buffer the collector reuses)."""
        flat = batch.reshape(-1)
        ids = flat.get(TRAJ_IDS, None)
        if ids is None:
            raise KeyError("trajs_per_batch: the collector's batch has no ('collector', 'traj_ids'), which it cuts "
                           "trajectories by; leave track_traj_ids=True and split_trajs=False, and keep that entry "
                           "in what postproc returns")
        ids = ids.reshape(-1)
        order = torch.argsort(ids, stable=True)  # each trajectory's steps together, in time order
        traj_ids, counts = torch.unique_consecutive(ids[order], return_counts=True)
        ends = (counts.cumsum(0) - 1).to(order.device)
        finished = _ends_episode(flat)[order[ends]].tolist()
        chunks = flat[order].split(counts.tolist(), 0)
        partial, complete = self.partial, self.complete
        for traj_id, chunk, done in zip(traj_ids.tolist(), chunks, finished):
            before = partial.pop(traj_id, None) if done else partial.setdefault(traj_id, [])
            if not done:
                before.append(chunk)
            elif before:
                complete.append(torch.cat([*before, chunk], 0))
            else:
                complete.append(chunk)
        if self.discard_in_flight:
            partial.clear()

    # ---- handing trajectories out -----------------------------------------------------------------
    def next_batch(self) -> TensorDictBase:
        """The first ``trajs_per_batch`` complete trajectories (there must be that many), laid
        out as ``traj_format`` says, and out of the queue."""
        n = self.trajs_per_batch
        trajs = self.complete[:n]
        del self.complete[:n]
        return mark_time(pad_trajectories(trajs) if self.traj_format == "padded" else cat_trajectories(trajs))

    def write(self, replay_buffer) -> int:
        """Write the complete trajectories to ``replay_buffer``, flat, ``trajs_per_write`` per
        ``extend()`` (all at once by default); returns the number of writes."""
        writes = 0
        per_write = self.trajs_per_write or len(self.complete)
        while self.complete:
            trajs = self.complete[:per_write]
            del self.complete[:per_write]
            replay_buffer.extend(_on_storage_device(cat_trajectories(trajs), replay_buffer))
            writes += 1
        return writes

    def regroup(self, batch: TensorDictBase | None, replay_buffer=None) -> Iterator:
        """What a collector yields for one batch it collected: each batch of ``trajs_per_batch``
        trajectories now complete; or, with a ``replay_buffer``, ``None`` once, after writing the
        complete trajectories to it (``extend_buffer`` does not matter here, as in TorchRL)."""
        if batch is not None:
            self.ingest(batch)
        if replay_buffer is not None:
            self.write(replay_buffer)
            yield None
            return
        while len(self.complete) >= self.trajs_per_batch:  # reset() may empty the queue meanwhile
            yield self.next_batch()

    # ---- resets -------------------------------------------------------------------------------------
    def flush(self) -> None:
        """Drop the running trajectories and the complete ones not yet handed out (a reset:
        what follows must not mix with what came before)."""
        self.partial.clear()
        self.complete.clear()

    def drop(self, traj_ids) -> None:
        """Drop the running trajectories ``traj_ids`` (a partial reset ended them)."""
        for traj_id in torch.as_tensor(traj_ids).reshape(-1).tolist():
            self.partial.pop(traj_id, None)


def cat_trajectories(trajs: list[TensorDictBase]) -> TensorDictBase:
    """Trajectories one after the other: a flat batch, no padding (``traj_format="cat"``)."""
    return torch.cat(trajs, 0) if len(trajs) > 1 else trajs[0]


def pad_trajectories(trajs: list[TensorDictBase]) -> TensorDictBase:
    """Trajectories as the rows of a ``[len(trajs), longest]`` batch, zero-padded after their
    last step, with ``("collector", "mask")`` marking the valid steps (``traj_format="padded"``).
    Non-tensor entries (e.g. text) repeat their last step in the padding.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> trajs = [TensorDict({"x": torch.arange(1, n + 1)}, batch_size=[n]) for n in (3, 1)]
        >>> padded = pad_trajectories(trajs)
        >>> padded["x"].tolist(), padded["collector", "mask"].tolist()
        ([[1, 2, 3], [1, 0, 0]], [[True, True, True], [True, False, False]])
    """
    lengths = [t.shape[0] for t in trajs]
    n, longest = len(trajs), max(lengths)
    flat = cat_trajectories(trajs)
    device = flat.device or next(iter(flat.values(True, True)), torch.empty(0)).device
    valid = torch.arange(longest, device=device) < torch.tensor(lengths, device=device).unsqueeze(-1)

    def padded(value: torch.Tensor) -> torch.Tensor:
        out = value.new_zeros((n, longest, *value.shape[1:]))
        out[valid] = value  # row-major: the trajectories' steps in the order they were concatenated
        return out

    out = flat.apply(padded, batch_size=[n, longest])  # drops non-tensor entries: put back below
    non_tensor = [k for k in flat.keys(True, True, is_leaf=_is_leaf_nontensor) if is_non_tensor(flat.get(k))]
    if non_tensor:
        starts = torch.tensor([0, *lengths[:-1]]).cumsum(0)
        steps = torch.arange(longest).clamp(max=torch.tensor(lengths).unsqueeze(-1) - 1)  # the last one repeated
        rows = (starts.unsqueeze(-1) + steps).tolist()
        for key in non_tensor:
            value = flat.get(key)
            out.set(key, torch.stack([value[row] for row in rows], 0))
    out.set(MASK, valid)
    return out


def _ends_episode(flat: TensorDictBase) -> torch.Tensor:
    """Per step of a flat batch: whether an episode ends there (``"next"``'s done flags)."""
    ends = None
    for key in END_KEYS:
        flag = flat.get(("next", key), None)
        if flag is not None:
            flag = flag.reshape(flat.shape[0], -1).any(-1)
            ends = flag if ends is None else ends | flag
    if ends is None:
        raise KeyError("trajs_per_batch: the collector's batch has no ('next', 'done') (nor terminated/truncated) "
                       "to tell where a trajectory ends")
    return ends


def _on_storage_device(data: TensorDictBase, replay_buffer) -> TensorDictBase:
    """``data`` with the device of ``replay_buffer``'s storage when it has none and every
    tensor is already there (no copy): what TorchRL's collectors hand a buffer."""
    storage = getattr(replay_buffer, "storage", None)
    device = getattr(storage, "device", None)
    if data.device is not None or device is None or device == "auto":
        return data
    device = torch.device(device)
    if all(v.device == device for v in data.values(True, True)):
        return data.to(device)
    return data


__all__ = ["TRAJ_FORMATS", "TrajectoryBatches", "cat_trajectories", "checked_traj_options", "pad_trajectories"]
