""":class:`SliceSamplerWithoutReplacement`: slices of trajectories, each trajectory once per epoch."""

from __future__ import annotations

from reap_replay.samplers.slices import SliceSampler
from reap_replay.samplers.without_replacement import SamplerWithoutReplacement


class SliceSamplerWithoutReplacement(SliceSampler, SamplerWithoutReplacement):
    """Slices of the stored trajectories, no trajectory twice before every one was drawn.

    Each batch holds one slice (a random start) of each of ``num_slices`` trajectories drawn
    from a permutation of the stored trajectories; after the last batch of that permutation
    ``ran_out`` is ``True`` (this ends ``for batch in rb``), as :class:`SamplerWithoutReplacement`
    does with items. Trajectories are cached until the stored rows change, which starts a new
    epoch. With ``strict_length=True`` the trajectories too short for a slice are left out of
    the batch they were drawn for.

    Keyword Args:
        drop_last (bool): end the epoch before a batch of fewer trajectories.
        shuffle (bool): draw the trajectories in a random order (``False``: storage order).
        **kwargs: those of :class:`SliceSampler` (but ``cache_values``, ``span``, ``pad_output``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap_replay.storages import LazyTensorStorage
        >>> s = LazyTensorStorage(20)
        >>> s.set(slice(0, 12), TensorDict({"episode": torch.arange(12) // 4}, [12]))
        >>> sampler = SliceSamplerWithoutReplacement(slice_len=2, traj_key="episode")
        >>> epoch = [sampler.sample(s, 4)[0].view(-1, 2)[:, 0] // 4 for _ in range(2)]
        >>> sorted(torch.cat(epoch).tolist()), sampler.ran_out
        ([0, 1, 2], True)
    """

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        drop_last: bool = False,
        end_key=None,
        end_keys=None,
        traj_key=None,
        ends=None,
        trajectories=None,
        truncated_key=("next", "truncated"),
        init_key="is_init",
        strict_length: bool = True,
        shuffle: bool = True,
        compile: bool | dict = False,
        use_gpu=False,
    ):
        SliceSampler.__init__(
            self, num_slices=num_slices, slice_len=slice_len, end_key=end_key, end_keys=end_keys,
            traj_key=traj_key, ends=ends, trajectories=trajectories, cache_values=True,
            truncated_key=truncated_key, init_key=init_key, strict_length=strict_length,
            compile=compile, use_gpu=use_gpu,
        )
        SamplerWithoutReplacement.__init__(self, drop_last=drop_last, shuffle=shuffle)

    def can_sample(self, storage, batch_size: int) -> bool:
        return SliceSampler.can_sample(self, storage, batch_size)

    def sample(self, storage, batch_size: int):
        if len(storage) == 0:
            raise RuntimeError("Cannot sample from an empty storage.")
        starts, lengths = self._bounds(storage)
        num_slices, slice_len = self._shape(batch_size)
        traj_idx = self._draw(starts.shape[0], num_slices)
        return self._sample_slices(storage, starts, lengths, traj_idx.shape[0], slice_len, traj_idx)

    def _empty(self) -> None:
        SliceSampler._empty(self)
        SamplerWithoutReplacement._empty(self)

    def extend(self, index) -> None:
        SliceSampler.extend(self, index)

    def add(self, index) -> None:
        SliceSampler.add(self, index)

    def state_dict(self) -> dict:
        return SamplerWithoutReplacement.state_dict(self)

    def load_state_dict(self, state_dict: dict) -> None:
        SamplerWithoutReplacement.load_state_dict(self, state_dict)

    def _check_state(self, state_dict: dict, storage_len: int) -> None:
        SamplerWithoutReplacement._check_state(self, state_dict, storage_len)

    def __repr__(self) -> str:
        return (
            f"SliceSamplerWithoutReplacement(num_slices={self.num_slices}, "
            f"slice_len={self.slice_len}, end_key={self.end_key}, traj_key={self.traj_key}, "
            f"strict_length={self.strict_length}, drop_last={self.drop_last}, shuffle={self.shuffle})"
        )


SliceSampler._without_replacement = SliceSamplerWithoutReplacement
