""":class:`PrioritizedSliceSampler`: slices whose first step is drawn by priority."""

from __future__ import annotations

import warnings

import torch

from reap_replay.samplers.base import _EMPTY
from reap_replay.samplers.prioritized import PrioritizedSampler
from reap_replay.samplers.slices import SliceSampler


class PrioritizedSliceSampler(SliceSampler, PrioritizedSampler):
    """Slices of the stored trajectories whose first step is drawn in proportion to its
    priority (prioritized experience replay over slice starts), as TorchRL's.

    Each stored step has a priority (set with ``update_priority``, new steps get the largest so
    far). A step can start a slice if the slice fits in its trajectory (``strict_length``), or
    the trajectory is shorter than a slice and the step is its first (``strict_length=False``,
    the slice is then the whole trajectory); ``span=(False, True)`` or ``(False, k)`` lets a
    slice run past the trajectory's end (truncated), all but one step or ``k`` steps. Each step
    of a slice carries its start's importance weight in ``info["priority_weight"]``, relative
    to the smallest priority stored, as TorchRL's.

    Args:
        max_capacity, alpha, beta, eps, dtype, reduction: those of :class:`PrioritizedSampler`.

    Keyword Args:
        max_priority_within_buffer (bool): as :class:`PrioritizedSampler`'s.
        **kwargs: those of :class:`SliceSampler` (a left ``span`` is turned off with a warning,
            as TorchRL does).

    Examples:
        >>> from tensordict import TensorDict
        >>> from reap_replay.storages import LazyTensorStorage
        >>> s = LazyTensorStorage(9)
        >>> s.set(slice(0, 9), TensorDict({"episode": torch.arange(9) // 3}, [9]))
        >>> sampler = PrioritizedSliceSampler(9, 1.0, 1.0, eps=0.0, slice_len=3, traj_key="episode")
        >>> sampler.extend(torch.arange(9))
        >>> sampler.update_priority(torch.arange(9), torch.tensor([0., 0, 0, 5, 0, 0, 0, 0, 0]))
        >>> index, info = sampler.sample(s, 6)
        >>> index.tolist(), info["priority_weight"].tolist()
        ([3, 4, 5, 3, 4, 5], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    """

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        reduction: str = "max",
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key=None,
        end_keys=None,
        traj_key=None,
        ends=None,
        trajectories=None,
        cache_values: bool = False,
        truncated_key=("next", "truncated"),
        init_key="is_init",
        strict_length: bool = True,
        compile: bool | dict = False,
        span=False,
        max_priority_within_buffer: bool = False,
    ):
        SliceSampler.__init__(
            self, num_slices=num_slices, slice_len=slice_len, end_key=end_key, end_keys=end_keys,
            traj_key=traj_key, ends=ends, trajectories=trajectories, cache_values=cache_values,
            truncated_key=truncated_key, init_key=init_key, strict_length=strict_length,
            compile=compile, span=span,
        )
        PrioritizedSampler.__init__(
            self, max_capacity, alpha, beta, eps, dtype, reduction=reduction,
            max_priority_within_buffer=max_priority_within_buffer,
        )
        if self.span[0]:
            warnings.warn(
                "Left spanning is disabled for PrioritizedSliceSampler and will be automatically "
                "turned off.",
                stacklevel=2,
            )
            self.span = (0, self.span[1])

    def _excluded(self, starts, lengths, seq: int, n: int) -> torch.Tensor:
        """The rows that cannot start a slice of ``seq`` steps."""
        right = self.span[1]
        tail = 1 if right is True else seq - 1 - (right or 0)  # steps at a trajectory's end
        first_ok = lengths - tail
        if not self.strict_length:
            first_ok = first_ok.clamp_min(1)  # a trajectory's first step can always start one
        step = torch.arange(int(lengths.max()))
        rows = starts.unsqueeze(1) + step
        bad = (step < lengths.unsqueeze(1)) & (step >= first_ok.clamp_min(0).unsqueeze(1))
        return rows[bad] % n

    def sample(self, storage, batch_size: int):
        n = len(storage)
        if n == 0:
            raise RuntimeError(_EMPTY)
        if storage.ndim > 1:
            raise NotImplementedError(
                "PrioritizedSliceSampler over a storage with ndim > 1 is not supported by "
                "reap-replay: store the steps along one dimension (ndim=1, batch.reshape(-1))"
            )
        self._follow_storage(storage)
        num_slices, seq = self._shape(batch_size)
        starts, lengths = self._bounds(storage)
        excluded = self._excluded(starts, lengths, seq, n)
        kept = self._tree[excluded]
        self._tree.update(excluded, 0.0)
        try:
            first, _ = PrioritizedSampler.sample(self, storage, num_slices)
        finally:
            self._tree.update(excluded, kept)
        first = first.cpu()
        # which trajectory each start is in: the first whose end is at or after it
        offset = (first.unsqueeze(1) - starts) % n
        inside = offset < lengths
        traj = torch.where(inside, offset, n).argmin(1)
        length = (lengths[traj] - offset[torch.arange(num_slices), traj]).clamp_max(seq)
        weight = (self._tree[first].double() / self._tree.min()).pow(-self._beta).to(self.dtype)
        if self.span[1] or not self.strict_length:
            seq = length
        index, info = self._slices(storage, first, seq)
        info["priority_weight"] = weight.repeat_interleave(seq)
        return index, info

    def _slices(self, storage, first, seq):
        """The rows of the slices starting at ``first``, of ``seq`` steps, and their flags."""
        n = len(storage)
        num_slices = first.shape[0]
        if isinstance(seq, int):
            steps = torch.arange(seq)
            index = ((first.unsqueeze(1) + steps) % n).reshape(-1)
            last_step = (steps == seq - 1).repeat(num_slices)
        else:
            slice_of = torch.repeat_interleave(torch.arange(num_slices), seq)
            step = torch.arange(int(seq.sum())) - (torch.cumsum(seq, 0) - seq)[slice_of]
            index = (first[slice_of] + step) % n
            last_step = step == seq[slice_of] - 1
        init_key, self.init_key = self.init_key, None  # TorchRL marks no slice starts here
        try:
            info = self._flags(storage, index, last_step, last_step)
        finally:
            self.init_key = init_key
        return index, info

    def mark_update(self, index, *, storage=None) -> None:
        PrioritizedSampler.mark_update(self, index, storage=storage)

    def add(self, index) -> None:
        PrioritizedSampler.add(self, index)
        SliceSampler.add(self, index)

    def extend(self, index) -> None:
        PrioritizedSampler.extend(self, index)
        SliceSampler.extend(self, index)

    def _empty(self) -> None:
        PrioritizedSampler._empty(self)
        SliceSampler._empty(self)

    def can_sample(self, storage, batch_size: int) -> bool:
        return SliceSampler.can_sample(self, storage, batch_size)

    def state_dict(self) -> dict:
        return PrioritizedSampler.state_dict(self)

    def load_state_dict(self, state_dict: dict) -> None:
        PrioritizedSampler.load_state_dict(self, state_dict)

    def _check_state(self, state_dict: dict, storage_len: int) -> None:
        PrioritizedSampler._check_state(self, state_dict, storage_len)

    def __getstate__(self) -> dict:
        PrioritizedSampler.__getstate__(self)  # raises on the way to another process
        return SliceSampler.__getstate__(self)

    def __repr__(self) -> str:
        return (
            f"PrioritizedSliceSampler(num_slices={self.num_slices}, slice_len={self.slice_len}, "
            f"end_key={self.end_key}, traj_key={self.traj_key}, strict_length={self.strict_length}, "
            f"alpha={self._alpha}, beta={self._beta}, eps={self._eps})"
        )
