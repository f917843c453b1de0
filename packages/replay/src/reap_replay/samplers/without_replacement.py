""":class:`SamplerWithoutReplacement`: epochs over a permutation of the stored items."""

from __future__ import annotations

import torch

from reap_replay.samplers.base import _EMPTY, Sampler, _index_device, _is_count


class SamplerWithoutReplacement(Sampler):
    """Epochs over a permutation of the stored items: no item twice before all were seen.

    After the last batch of an epoch ``ran_out`` is ``True`` (this ends ``for batch in rb``)
    and the next call starts a new epoch. A change in the storage's length starts a new epoch.

    Args:
        drop_last (bool): drop the last batch of an epoch if it is incomplete.
        shuffle (bool): permute the items (``False``: storage order).

    Examples:
        >>> from reap_replay.storages import LazyTensorStorage
        >>> s = LazyTensorStorage(8)
        >>> s.set(slice(0, 5), torch.arange(5))
        >>> sampler = SamplerWithoutReplacement(shuffle=False)
        >>> [sampler.sample(s, 2)[0].tolist() for _ in range(3)], sampler.ran_out
        ([[0, 1], [2, 3], [4]], True)
    """

    def __init__(self, drop_last: bool = False, shuffle: bool = True):
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self._sample_list: torch.Tensor | None = None  # the epoch's indices not drawn yet (TorchRL's)
        self.len_storage = 0
        self._ran_out = False

    @property
    def ran_out(self) -> bool:
        return self._ran_out

    @ran_out.setter
    def ran_out(self, value: bool) -> None:
        self._ran_out = bool(value)

    def _new_epoch(self) -> None:
        self._sample_list = None

    def _permutation(self, n: int) -> torch.Tensor:
        if self.shuffle:
            return torch.randperm(n, generator=self._rng)
        return torch.arange(n)

    def can_sample(self, storage, batch_size: int) -> bool:
        return len(storage) >= batch_size if self.drop_last else len(storage) > 0

    def sample(self, storage, batch_size: int):
        index = self._draw(len(storage), batch_size)
        device = _index_device(storage)
        if device.type != "cpu":
            index = index.to(device)
        return index, {}

    def _draw(self, n: int, batch_size: int) -> torch.Tensor:
        """The next ``batch_size`` of the epoch's permutation of ``range(n)``."""
        if n == 0:
            raise RuntimeError(_EMPTY)
        remaining = 0 if self._sample_list is None else self._sample_list.numel()
        if (
            self._sample_list is None
            or n != self.len_storage
            or remaining == 0
            or (self.drop_last and remaining < batch_size)
        ):
            self._sample_list = self._permutation(n)
            self.len_storage = n
            self._ran_out = False
        if self.drop_last and batch_size > n:
            raise ValueError(
                f"The batch size ({batch_size}) is greater than the storage capacity ({n}). "
                "This makes it impossible to return a sample without repeating indices. Consider "
                "changing the sampler class or turn the 'drop_last' argument to False."
            )
        index, self._sample_list = self._sample_list[:batch_size], self._sample_list[batch_size:]
        remaining = self._sample_list.numel()
        if remaining == 0 or (self.drop_last and remaining < batch_size):
            self._ran_out = True
            self._sample_list = self._permutation(n)  # the next epoch's order, drawn now as TorchRL does
        return index

    def _empty(self) -> None:
        self._new_epoch()
        self.len_storage = 0
        self._ran_out = False

    def state_dict(self) -> dict:
        return {
            "_sample_list": self._sample_list,
            "_pos": 0,  # (checkpoints before 2026-11-28 kept the whole order and a position in it)
            "len_storage": self.len_storage,
            "_ran_out": self._ran_out,
            "drop_last": self.drop_last,
            "shuffle": self.shuffle,
        }

    def _check_state(self, state_dict: dict, storage_len: int) -> None:
        sl, pos, n = state_dict.get("_sample_list"), state_dict["_pos"], state_dict["len_storage"]
        if not _is_count(n) or not _is_count(pos) or not isinstance(state_dict["_ran_out"], bool):
            raise ValueError(f"_pos={pos!r}, len_storage={n!r} or _ran_out is not valid")
        if sl is not None:
            if not isinstance(sl, torch.Tensor) or sl.ndim != 1 or sl.dtype != torch.int64:
                raise ValueError("_sample_list is not a 1-D int64 tensor")
            if pos > sl.numel() or n > storage_len or (sl.numel() and not 0 <= int(sl.min()) <= int(sl.max()) < n):
                raise ValueError(
                    f"_sample_list (of {sl.numel()} indices), _pos={pos} and len_storage={n} do "
                    f"not fit the {storage_len} stored rows"
                )

    def load_state_dict(self, state_dict: dict) -> None:
        sl = state_dict.get("_sample_list")
        self._sample_list = None if sl is None else sl[int(state_dict["_pos"]):].clone()
        self.len_storage = int(state_dict["len_storage"])
        self._ran_out = bool(state_dict["_ran_out"])

    def __repr__(self) -> str:
        return f"SamplerWithoutReplacement(drop_last={self.drop_last}, shuffle={self.shuffle})"


SamplerWithoutReplacement._without_replacement = SamplerWithoutReplacement
