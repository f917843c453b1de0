""":class:`SliceSampler`: contiguous slices of the stored trajectories, as TorchRL's.

Trajectories are recovered from the storage each time (or once, with ``cache_values=True``,
until the rows change): a run of equal ``traj_key`` values, or steps up to an ``end_key`` flag.
In a full storage a trajectory may run on past the last row into the first (the storage is a
ring) and the newest row ends one (what followed it was overwritten); in a storage not yet full
the last row ends one. The draws are TorchRL's: for the same storage and seed, the same slices.
"""

from __future__ import annotations

import torch

from reap_replay.samplers.base import _EMPTY, Sampler, _as_key, _index_device, _on_device

_NO_TENSORDICT = (
    "Could not get a tensordict out of the storage, which is required for SliceSampler to "
    "compute the trajectories (use a LazyTensorStorage or LazyMemmapStorage of TensorDicts)."
)


def _replace_last(key, name: str):
    return name if isinstance(key, str) else (*key[:-1], name)


def _check_span(span):
    """``span`` as ``(left, right)``, each ``False``, ``True`` or a number of steps."""
    if isinstance(span, (bool, int)):
        span = (span, span)
    if len(span) != 2 or not all(isinstance(s, (bool, int)) and s >= 0 for s in span):
        raise ValueError(f"span must be a bool, an int >= 0 or a pair of them, got span={span!r}")
    return tuple(span)


def trajectory_bounds(end: torch.Tensor, at_capacity: bool, cursor: int | None = None):
    """``(starts, lengths)`` of the trajectories that ``end`` (one flag per row, ``True`` at a
    trajectory's last step) delimits.

    ``at_capacity``: the rows are a full ring, so a trajectory with no end before the last row
    goes on at row 0, and ``cursor`` (the newest row) ends one. Otherwise the last row ends one.

    Examples:
        >>> end = torch.zeros(10, dtype=torch.bool)
        >>> end[2] = end[7] = True
        >>> starts, lengths = trajectory_bounds(end, at_capacity=True, cursor=4)
        >>> starts.tolist(), lengths.tolist()
        ([8, 3, 5], [5, 2, 3])
    """
    n = end.shape[0]
    end = end.clone()
    if not at_capacity:
        end[n - 1] = True
    elif cursor is not None:
        end[cursor] = True
    if not bool(end.any()):
        end[n - 1] = True
    stops = torch.nonzero(end).squeeze(1)
    starts = torch.roll(stops + 1, 1) % n
    return starts, (stops - starts) % n + 1


class SliceSampler(Sampler):
    """Contiguous slices of the stored trajectories, for sequence models.

    A batch of ``batch_size`` items holds ``num_slices`` slices of ``slice_len`` steps (give one
    of the two; the other is ``batch_size`` divided by it). A trajectory is drawn uniformly,
    then a start uniformly within it. The last step of each slice is marked in
    ``info[truncated_key]``, and OR-ed into the stored ``done`` next to it; with an ``init_key``
    entry stored, the first step of each slice is marked there too.

    Keyword Args:
        num_slices (int, optional): slices per batch.
        slice_len (int, optional): steps per slice.
        end_key (NestedKey, optional): flag marking the last step of a trajectory. Defaults to
            ``("next", "done")``.
        end_keys (list of NestedKey, optional): flags OR-ed together (those stored) instead.
        traj_key (NestedKey, optional): trajectory id per step. Without ``traj_key`` and
            ``end_key``, ``("collector", "traj_ids")`` or ``"episode"`` is used if stored,
            else ``end_key``. A key that is not stored falls back to the other kind.
        ends, trajectories (Tensor, optional): the end flags or trajectory ids of a static
            storage (full), given instead of keys; need ``cache_values=True``.
        cache_values (bool): keep the trajectories found until the stored rows change.
        truncated_key (NestedKey, optional): where slice ends are reported (``None``: no flags).
        init_key (NestedKey, optional): where slice starts are marked, if it is stored.
        strict_length (bool): skip trajectories shorter than ``slice_len`` (if ``False``, they
            give shorter slices and the batch has fewer than ``batch_size`` items).
        pad_output (bool): with ``strict_length=False``, repeat the last step of a short slice
            up to ``slice_len``; ``info[("collector", "mask")]`` marks the real steps.
        span (bool, int or pair of them): let slices run past the start (left) or the end
            (right) of a trajectory, truncated there: ``True`` by up to all but one step, an int
            by at most that many steps.
        compile, use_gpu: TorchRL's speed options; reap's sampler is vectorised already and
            runs where the storage is, so they change nothing.
        step_key, fragmented: only ``fragmented=False`` (TorchRL's interleaved trajectories
            are not supported).
        replacement (bool): ``False`` makes a :class:`SliceSamplerWithoutReplacement`.

    Examples:
        >>> from tensordict import TensorDict
        >>> from reap_replay.storages import LazyTensorStorage
        >>> s = LazyTensorStorage(10)
        >>> s.set(slice(0, 6), TensorDict({"traj": torch.tensor([0, 0, 0, 1, 1, 1])}, [6]))
        >>> index, info = SliceSampler(slice_len=3, traj_key="traj").sample(s, 6)
        >>> sorted(index.view(2, 3)[:, 0].tolist()) in ([0, 0], [0, 3], [3, 3])
        True
    """

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key=None,
        end_keys=None,
        traj_key=None,
        step_key="step_count",
        fragmented: bool = False,
        ends: torch.Tensor | None = None,
        trajectories: torch.Tensor | None = None,
        cache_values: bool = False,
        truncated_key=("next", "truncated"),
        init_key="is_init",
        strict_length: bool = True,
        pad_output: bool = False,
        compile: bool | dict = False,
        span=False,
        use_gpu=False,
    ):
        if (num_slices is None) == (slice_len is None):
            raise TypeError(
                "Either num_slices or slice_len must be not None, and not both. "
                f"Got num_slices={num_slices} and slice_len={slice_len}."
            )
        for name, value in (("num_slices", num_slices), ("slice_len", slice_len)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")
        if fragmented:
            raise NotImplementedError(
                "SliceSampler(fragmented=True) is not supported by reap-replay: store each "
                "trajectory's steps contiguously (a collector's batches split by trajectory)"
            )
        if end_key is not None and end_keys is not None:
            raise RuntimeError(
                "`end_key` and `end_keys` are exclusive arguments: pass the single boundary key "
                "through `end_key`, or the sequence of keys to be OR-ed together through `end_keys`."
            )
        if pad_output and strict_length:
            raise ValueError(
                "pad_output=True is incompatible with strict_length=True: padding only happens "
                "when short trajectories are kept, which requires strict_length=False."
            )
        self.num_slices = num_slices
        self.slice_len = slice_len
        self.step_key = step_key
        self.fragmented = False
        self.traj_key = _as_key(traj_key)
        self.end_keys = None if end_keys is None else tuple(_as_key(k) for k in end_keys)
        self._auto_key = traj_key is None and end_key is None and end_keys is None
        self.end_key = _as_key(end_key) if end_key is not None or end_keys is not None else ("next", "done")
        self.truncated_key = _as_key(truncated_key)
        self.init_key = _as_key(init_key)
        self.strict_length = bool(strict_length)
        self.pad_output = bool(pad_output)
        self.span = _check_span(span)
        self.cache_values = bool(cache_values)
        self.compile = bool(compile)
        self.use_gpu = bool(use_gpu)
        self._cache: dict = {}
        if ends is not None or trajectories is not None:
            if ends is not None and trajectories is not None:
                raise RuntimeError("trajectories and ends are exclusive arguments.")
            if traj_key is not None or end_key is not None or end_keys is not None:
                raise RuntimeError(
                    "`trajectories` or `ends` and `end_key`, `end_keys` or `traj_key` are "
                    "exclusive arguments."
                )
            if not cache_values:
                raise RuntimeError(
                    "To be used, trajectories or ends requires `cache_values` to be set to `True`."
                )
            end = ends if ends is not None else _changes(trajectories, at_capacity=True)
            self._cache["static"] = trajectory_bounds(end.bool().cpu(), at_capacity=True)

    # ------------------------------------------------------------ trajectories
    def _shape(self, batch_size: int) -> tuple[int, int]:
        """``(num_slices, slice_len)`` of a batch of ``batch_size`` items."""
        per = self.slice_len if self.slice_len is not None else self.num_slices
        if batch_size % per:
            what = "slice length" if self.slice_len is not None else "number of slices"
            raise RuntimeError(
                f"The batch-size must be divisible by the {what}, got batch_size={batch_size} "
                f"and {'slice_len' if self.slice_len is not None else 'num_slices'}={per}."
            )
        if self.slice_len is not None:
            return batch_size // self.slice_len, self.slice_len
        return self.num_slices, batch_size // self.num_slices

    def _bounds(self, storage):
        """``(starts, lengths)`` of the stored trajectories (cached with ``cache_values``)."""
        if "static" in self._cache:
            return self._cache["static"]
        if self.cache_values:
            key = (id(storage), storage._revision, len(storage))
            if self._cache.get("key") == key:
                return self._cache["bounds"]
        rows = storage._len
        at_capacity = storage.max_size is not None and rows >= storage._max_rows
        last = storage._last_cursor
        cursor = None if last is None else (last - 1) % rows
        end = self._end_flags(storage, rows, at_capacity)
        if end.ndim == 1:
            bounds = trajectory_bounds(end, at_capacity, cursor)
        else:  # ndim > 1: trajectories run down each column; positions are column * rows + row
            columns = [trajectory_bounds(column, at_capacity, cursor) for column in end.unbind(1)]
            bounds = (torch.cat([starts + j * rows for j, (starts, _) in enumerate(columns)]),
                      torch.cat([lengths for _, lengths in columns]))
        if self.cache_values:
            self._cache.update(key=(id(storage), storage._revision, len(storage)), bounds=bounds)
        return bounds

    def _end_flags(self, storage, n: int, at_capacity: bool) -> torch.Tensor:
        if getattr(storage, "_leaves", None) is None:
            raise RuntimeError(_NO_TENSORDICT)
        traj_key = self.traj_key
        if self._auto_key:
            traj_key = next((k for k in (("collector", "traj_ids"), "episode")
                             if storage.get_leaf(k) is not None), None)
        cells = storage._cells
        if traj_key is not None and storage.get_leaf(traj_key) is not None:
            return _changes(_one_per_item(storage.get_leaf(traj_key)[:n], cells), at_capacity)
        keys = self.end_keys if self.end_keys is not None else (self.end_key,)
        flags = [storage.get_leaf(k) for k in keys if storage.get_leaf(k) is not None]
        if not flags:
            names = [f"traj_key={traj_key!r}"] if traj_key is not None else []
            names.append(f"end_keys={list(keys)!r}" if self.end_keys is not None else f"end_key={keys[0]!r}")
            raise RuntimeError(
                f"SliceSampler needs the entry of {' or '.join(names)} in the storage to find the "
                "trajectories; none is stored"
            )
        end = _one_per_item(flags[0][:n], cells).bool()
        for flag in flags[1:]:
            end = end | _one_per_item(flag[:n], cells).bool()
        return end.cpu()

    # ---------------------------------------------------------------- samples
    def can_sample(self, storage, batch_size: int) -> bool:
        if len(storage) == 0:
            return False
        _, slice_len = self._shape(batch_size)
        try:
            _, lengths = self._bounds(storage)
        except (KeyError, RuntimeError):
            return False
        return bool((lengths >= slice_len).any()) or not self.strict_length

    def sample(self, storage, batch_size: int):
        if len(storage) == 0:
            raise RuntimeError(_EMPTY)
        starts, lengths = self._bounds(storage)
        num_slices, slice_len = self._shape(batch_size)
        return self._sample_slices(storage, starts, lengths, num_slices, slice_len)

    def _sample_slices(self, storage, starts, lengths, num_slices, slice_len, traj_idx=None):
        """Slices of the trajectories ``traj_idx`` (drawn uniformly when ``None``)."""
        seq = slice_len
        pad_to = None
        if bool((lengths < slice_len).any()):
            if self.strict_length:
                ok = lengths >= slice_len
                if not bool(ok.any()):
                    raise RuntimeError(
                        "Did not find a single trajectory with sufficient length (length range: "
                        f"{int(lengths.min())} - {int(lengths.max())} / required={slice_len})); "
                        "lower slice_len or pass strict_length=False."
                    )
                if traj_idx is not None:  # keep the drawn trajectories that are long enough
                    mask = torch.zeros_like(ok)
                    mask[traj_idx] = True
                    traj_idx = torch.nonzero(mask[ok]).squeeze(1)
                    if not traj_idx.numel():
                        raise RuntimeError(
                            "None of the provided indices pointed to a trajectory of sufficient "
                            "length. Consider using strict_length=False for the sampler instead."
                        )
                starts, lengths = starts[ok], lengths[ok]
            else:
                if traj_idx is None:
                    traj_idx = self._draw_trajectories(lengths.shape[0], num_slices)
                pad_to = slice_len if self.pad_output else None
                seq = lengths[traj_idx].clamp_max(slice_len)
        if traj_idx is None:
            traj_idx = self._draw_trajectories(lengths.shape[0], num_slices)
        return self._index(storage, starts[traj_idx], lengths[traj_idx], seq, pad_to)

    def _draw_trajectories(self, n: int, num_slices: int) -> torch.Tensor:
        return torch.randint(n, (num_slices,), generator=self._rng)

    def _index(self, storage, start, length, seq, pad_to):
        """The rows of slices of ``seq`` steps (an int or one per slice) starting in the
        trajectories at ``start`` of ``length`` steps; each start drawn as TorchRL's."""
        num_slices = start.shape[0]
        left, right = self.span
        for side in (left, right):
            if side is not True and side and side >= slice_max(seq):
                raise ValueError("The right and left span must be strictly lower than the sequence length")
        if not right:
            end_point = length - seq + 1
        elif right is True:
            end_point = length + 1
        else:
            end_point = length - right
        start_point = 0 if not left else (-slice_max(seq) + 1 if left is True else -left)
        offset = (torch.rand(num_slices, generator=self._rng) * (end_point - start_point)).floor().long()
        offset = offset + start_point
        if left and bool((offset < 0).any()):
            seq = torch.where(offset < 0, torch.as_tensor(seq) + offset, torch.as_tensor(seq))
            offset = offset.clamp_min(0)
        if right and bool((offset + seq > length).any()):
            seq = torch.minimum(torch.as_tensor(seq), length - offset)
        rows = storage._len
        base = start - start % rows  # the column's first position (0 with ndim 1)
        first = start % rows + offset
        if isinstance(seq, int):
            steps = torch.arange(seq)
            index = (base.unsqueeze(1) + (first.unsqueeze(1) + steps) % rows).reshape(-1)
            last_step = (steps == seq - 1).repeat(num_slices)
            first_step = (steps == 0).repeat(num_slices)
            mask = None
        elif pad_to is not None:
            steps = torch.arange(pad_to)
            real = steps < seq.unsqueeze(1)
            offsets = torch.minimum(steps, (seq - 1).unsqueeze(1))
            index = (base.unsqueeze(1) + (first.unsqueeze(1) + offsets) % rows).reshape(-1)
            last_step = (steps == (seq - 1).unsqueeze(1)).reshape(-1)
            first_step = (steps == 0).repeat(num_slices)
            mask = real.reshape(-1)
        else:
            total = int(seq.sum())
            slice_of = torch.repeat_interleave(torch.arange(num_slices), seq)
            begin = torch.cumsum(seq, 0) - seq
            step = torch.arange(total) - begin[slice_of]
            index = base[slice_of] + (first[slice_of] + step) % rows
            last_step = step == seq[slice_of] - 1
            first_step = step == 0
            mask = None
        if storage.ndim > 1:  # column-major positions to item numbers (row * items per row + column)
            index = index % rows * storage._cells + index // rows
        info = self._flags(storage, index, last_step, first_step)
        if mask is not None:
            info[("collector", "mask")] = mask
        return _on_device(index, _index_device(storage)), info

    def _info_index(self, index):
        """TorchRL's layout: one index tensor per storage dimension, ``(index,)``; a
        ``TensorDictReplayBuffer`` stacks it into ``"index"`` of shape ``[batch, ndim]``."""
        return index if isinstance(index, tuple) else (index,)

    def _flags(self, storage, index, last_step, first_step) -> dict:
        info = {}
        device = _index_device(storage)
        if self.truncated_key is not None:
            done_key = _replace_last(self.truncated_key, "done")
            terminated_key = _replace_last(self.truncated_key, "terminated")
            truncated = _on_device(last_step.unsqueeze(1), device)
            info[self.truncated_key] = truncated
            done = storage.get_item_leaf(done_key)
            if done is None:
                info[done_key] = truncated.clone()
            else:
                done = _rows(done, index)
                info[done_key] = done | truncated.view(-1, *([1] * (done.ndim - 1)))
            terminated = storage.get_item_leaf(terminated_key)
            info[terminated_key] = torch.zeros_like(truncated) if terminated is None else _rows(terminated, index)
        stored = None if self.init_key is None else storage.get_item_leaf(self.init_key)
        if stored is not None:
            init = _rows(stored, index)
            info[self.init_key] = init | first_step.to(init.device).view(-1, *([1] * (init.ndim - 1)))
        return info

    def extend(self, index) -> None:
        self._cache.pop("key", None)

    def add(self, index) -> None:
        self._cache.pop("key", None)

    def _empty(self) -> None:
        self._cache.pop("key", None)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_cache"] = {k: v for k, v in self._cache.items() if k == "static"}
        return state

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_slices={self.num_slices}, slice_len={self.slice_len}, "
            f"end_key={self.end_key}, end_keys={self.end_keys}, traj_key={self.traj_key}, "
            f"truncated_key={self.truncated_key}, strict_length={self.strict_length}, "
            f"pad_output={self.pad_output})"
        )


def slice_max(seq) -> int:
    return seq if isinstance(seq, int) else int(seq.max())


def _rows(buf: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return buf.index_select(0, index.to(buf.device))


def _one_per_item(value: torch.Tensor, cells: int) -> torch.Tensor:
    """A trajectory id or end flag per item: ``[rows]`` (or ``[rows, items per row]``), else
    TorchRL's error."""
    flat = value.reshape(value.shape[0], cells, -1)
    if flat.shape[2] != 1:
        raise RuntimeError(
            "Expected the end-of-trajectory signal to be 1-dimensional (one value per stored item), got a tensor "
            f"of shape {list(value.shape)}; store the items one step each"
        )
    return flat[:, 0, 0] if cells == 1 else flat[..., 0]


def _changes(traj: torch.Tensor, at_capacity: bool) -> torch.Tensor:
    """End flags where the trajectory id changes down the rows (at the last row: whether it
    wraps to the first)."""
    traj = traj.cpu()
    end = torch.empty(traj.shape, dtype=torch.bool)
    torch.ne(traj[1:], traj[:-1], out=end[:-1])
    end[-1] = traj[-1] != traj[0] if at_capacity else True
    return end


SliceSampler._without_replacement = None  # set by slice_without_replacement
