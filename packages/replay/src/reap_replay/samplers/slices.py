""":class:`SliceSampler`: contiguous slices of the stored trajectories."""

from __future__ import annotations

import torch

from reap_replay.samplers.base import _EMPTY, Sampler, _as_key, _index_device


class SliceSampler(Sampler):
    """Contiguous slices of the stored trajectories, for sequence models.

    A batch of ``batch_size`` items holds ``num_slices`` slices of ``slice_len`` steps (give one
    of the two; the other is ``batch_size`` divided by it). Trajectories are runs of equal
    ``traj_key`` values, or end where ``end_key`` is set (defaults to ``("next", "done")``); the
    newest write and the end of the storage also end a trajectory. A trajectory is drawn
    uniformly, then a start uniformly within it. The last step of each slice is marked in
    ``info[truncated_key]`` (and ``("next", "done")``). Given both keys, as in TorchRL,
    ``traj_key`` is used where the storage holds it and ``end_key`` where it does not.

    Keyword Args:
        num_slices (int, optional): slices per batch.
        slice_len (int, optional): steps per slice.
        end_key (NestedKey, optional): flag marking the last step of a trajectory.
        traj_key (NestedKey, optional): trajectory id per step.
        truncated_key (NestedKey): where slice ends are reported.
        strict_length (bool): skip trajectories shorter than ``slice_len`` (if ``False``, they
            give shorter slices and the batch has fewer than ``batch_size`` items).
        cache_values (bool): accepted for TorchRL compatibility.

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
        traj_key=None,
        truncated_key=("next", "truncated"),
        strict_length: bool = True,
        cache_values: bool = False,
        **unsupported,
    ):
        if unsupported:
            raise NotImplementedError(
                f"SliceSampler options not supported by reap-replay: {sorted(unsupported)}"
            )
        if (num_slices is None) == (slice_len is None):
            raise TypeError(
                "give exactly one of num_slices and slice_len, got "
                f"num_slices={num_slices} and slice_len={slice_len}"
            )
        for name, value in (("num_slices", num_slices), ("slice_len", slice_len)):
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")
        self.num_slices = num_slices
        self.slice_len = slice_len
        if end_key is None and traj_key is None:
            end_key = ("next", "done")
        self.traj_key = _as_key(traj_key)
        self.end_key = _as_key(end_key)
        self.truncated_key = _as_key(truncated_key)
        self.strict_length = bool(strict_length)

    def _shape(self, batch_size: int) -> tuple[int, int]:
        if self.slice_len is not None:
            if batch_size % self.slice_len:
                raise ValueError(
                    f"batch_size must be divisible by slice_len, got batch_size={batch_size} "
                    f"and slice_len={self.slice_len}"
                )
            return batch_size // self.slice_len, self.slice_len
        if batch_size % self.num_slices:
            raise ValueError(
                f"batch_size must be divisible by num_slices, got batch_size={batch_size} "
                f"and num_slices={self.num_slices}"
            )
        return self.num_slices, batch_size // self.num_slices

    def _leaf(self, storage, key):
        get = getattr(storage, "get_leaf", None)
        return get(key) if key is not None and get is not None and storage.initialized else None

    def _trajectories(self, storage):
        n = len(storage)
        traj = self._leaf(storage, self.traj_key)
        if traj is not None:
            traj = traj[:n].reshape(n, -1)[:, 0]
            end = torch.empty(n, dtype=torch.bool, device=traj.device)
            torch.ne(traj[1:], traj[:-1], out=end[:-1])
        else:
            done = self._leaf(storage, self.end_key)
            if done is None:
                keys = [f"{name}={key!r}" for name, key in (("traj_key", self.traj_key),
                                                            ("end_key", self.end_key)) if key is not None]
                raise KeyError(f"SliceSampler needs the entry of {' or '.join(keys)} in a TensorDict "
                               "storage; it is missing")
            end = done[:n].reshape(n, -1).any(1)
        end = end.cpu().clone()
        end[n - 1] = True
        last = storage._last_cursor
        if last is not None and 0 < last <= n:
            end[last - 1] = True
        stops = torch.nonzero(end).squeeze(1)
        starts = torch.cat([stops.new_zeros(1), stops[:-1] + 1])
        return starts, stops - starts + 1

    def sample(self, storage, batch_size: int):
        n = len(storage)
        if n == 0:
            raise RuntimeError(_EMPTY)
        num_slices, slice_len = self._shape(batch_size)
        starts, lengths = self._trajectories(storage)
        if self.strict_length:
            ok = lengths >= slice_len
            if not bool(ok.any()):
                raise RuntimeError(
                    f"no stored trajectory has slice_len={slice_len} steps (lengths range "
                    f"{int(lengths.min())}-{int(lengths.max())}); lower slice_len or pass "
                    "strict_length=False"
                )
            starts, lengths = starts[ok], lengths[ok]
        pick = torch.randint(starts.numel(), (num_slices,), generator=self._rng)
        start, length = starts[pick], lengths[pick]
        span = length.clamp_max(slice_len)
        offset = (torch.rand(num_slices, generator=self._rng) * (length - span + 1)).long()
        first = start + offset
        if bool((span == slice_len).all()):
            steps = torch.arange(slice_len)
            index = (first.unsqueeze(1) + steps).reshape(-1)
            last_step = (steps == slice_len - 1).repeat(num_slices)
        else:
            total = int(span.sum())
            slice_of = torch.repeat_interleave(torch.arange(num_slices), span)
            begin = torch.cumsum(span, 0) - span
            step = torch.arange(total) - begin[slice_of]
            index = first[slice_of] + step
            last_step = step == span[slice_of] - 1
        info = self._flags(storage, index, last_step)
        device = _index_device(storage)
        if device.type != "cpu":
            index = index.to(device)
        return index, info

    def _info_index(self, index):
        """TorchRL's layout: one index tensor per storage dimension, ``(index,)``; a
        ``TensorDictReplayBuffer`` stacks it into ``"index"`` of shape ``[batch, 1]``."""
        return (index,)

    def _flags(self, storage, index, last_step) -> dict:
        done_buf = storage.get_leaf(("next", "done"))
        tail = tuple(done_buf.shape[1:]) if done_buf is not None else (1,)
        truncated = last_step.view(-1, *([1] * len(tail))).expand(-1, *tail).clone()
        info = {self.truncated_key: truncated.to(_index_device(storage))}
        if done_buf is not None:
            info[("next", "done")] = done_buf.index_select(0, index.to(done_buf.device)) | info[
                self.truncated_key
            ].to(done_buf.device)
            term = storage.get_leaf(("next", "terminated"))
            info[("next", "terminated")] = (
                term.index_select(0, index.to(term.device))
                if term is not None
                else torch.zeros_like(info[("next", "done")])
            )
        return info

    def __repr__(self) -> str:
        return (
            f"SliceSampler(num_slices={self.num_slices}, slice_len={self.slice_len}, "
            f"traj_key={self.traj_key}, end_key={self.end_key}, strict_length={self.strict_length})"
        )
