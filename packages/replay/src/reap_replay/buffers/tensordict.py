""":class:`TensorDictReplayBuffer`: a replay buffer of TensorDicts whose samples carry their info."""

from __future__ import annotations

import math
import warnings

import torch
from tensordict import TensorDictBase

from reap_replay.buffers.base import ReplayBuffer
from reap_replay.samplers import PrioritizedSampler
from reap_replay.samplers.base import priority_of


class TensorDictReplayBuffer(ReplayBuffer):
    """A replay buffer of TensorDicts; samples carry ``"index"`` and the sampler's info.

    ``extend`` takes a TensorDict of batch dims ``[N]`` (N items) or ``[N, T, ...]`` (N items of
    shape ``[T, ...]``). With a prioritized sampler, ``priority_key`` entries of the data set the
    priorities on ``extend`` and :meth:`update_tensordict_priority`. Unlike TorchRL, ``extend``
    does not write an ``"index"`` entry into the caller's TensorDict (collectors reuse theirs).

    Keyword Args:
        priority_key (NestedKey): where priorities are read. Defaults to ``"td_error"``.
        **kwargs: as :class:`ReplayBuffer`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap_replay import LazyTensorStorage, TensorDictReplayBuffer
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=8)
        >>> _ = rb.extend(TensorDict({"obs": torch.randn(4, 10, 3)}, [4, 10]))  # [n_envs, T]
        >>> len(rb), rb.sample()["obs"].shape, rb.sample()["index"].shape
        (4, torch.Size([8, 10, 3]), torch.Size([8, 10]))
    """

    _is_tensordict = True

    def __init__(self, *, priority_key="td_error", **kwargs):
        super().__init__(**kwargs)
        self.priority_key = priority_key

    def sample(self, batch_size: int | None = None, return_info: bool = False,
               include_info: bool | None = None):
        """A batch with its info (``"index"``, the sampler's entries) set in it.

        ``include_info=False`` leaves the info out of the batch (TorchRL's former argument,
        which warns as TorchRL's does).
        """
        if include_info is not None:
            warnings.warn(
                "include_info is going to be deprecated soon. The default behavior has changed "
                "to `include_info=True` to avoid bugs linked to wrongly preassigned values in "
                "the output tensordict.",
                stacklevel=2,
            )
        data, info = self._draw(batch_size)
        if include_info is not False:
            data = self._output(data, info)
        return (data, info) if return_info else data

    def _output(self, data, info):
        if not isinstance(data, TensorDictBase):
            raise RuntimeError(
                f"Cannot include info in non-tensordict data: {type(self).__name__} sampled a "
                f"{type(data).__name__}; use ReplayBuffer for other data"
            )
        ndim = data.batch_dims
        for key, value in info.items():
            if isinstance(value, tuple) and value and all(isinstance(v, torch.Tensor) for v in value):
                value = torch.stack(value, -1)  # an index per storage dim (SliceSampler), as TorchRL
            if isinstance(value, torch.Tensor):
                if value.ndim < ndim:
                    value = value.reshape(*value.shape, *([1] * (ndim - value.ndim))).expand(
                        *value.shape, *data.batch_size[value.ndim :]
                    )
                if isinstance(key, str) and value.shape[:ndim] == data.batch_size:
                    data._set_str(key, value, validated=True, inplace=False)  # checked above
                else:
                    try:
                        data.set(key, value)
                    except RuntimeError as err:
                        raise RuntimeError(
                            "Failed to set the metadata (e.g., indices or weights) in the sampled "
                            f"tensordict: {key!r} has shape {list(value.shape)}, the batch "
                            f"{list(data.batch_size)} (did a transform change its shape?); "
                            "sample(return_info=True) of a ReplayBuffer gives them apart"
                        ) from err
        return data

    def _reduce_priority(self, data, n):
        reduction = getattr(self._sampler, "reduction", "max")
        return priority_of(data, self.priority_key, reduction, n)

    def add(self, data) -> int:
        if not isinstance(data, TensorDictBase):
            raise ValueError(
                f"{type(self).__name__}.add only accepts TensorDictBase subclasses, got "
                f"{type(data).__name__}: use a regular ReplayBuffer for other data"
            )
        if self._transform:
            data = self._transform.inv(data)
            if data is None:
                return torch.zeros((0, 1), dtype=torch.long)
        priority = None
        if isinstance(self._sampler, PrioritizedSampler):
            items = math.prod(data.shape[: self._storage.ndim - 1])  # in the row (1 with ndim 1)
            priority = self._reduce_priority(data.unsqueeze(0), items)
            if priority is not None:  # refused before the item is written
                self._sampler._check_priority(priority)
        with self._lock:
            index = self._writer.add(data)
            if index is not None:
                self._sampler_add(index)
        if index is not None and priority is not None:
            self.update_priority(self._storage._row_items(torch.tensor([index]))
                                 if self._storage.ndim > 1 else torch.tensor([index]), priority)
        return index

    def extend(self, tensordicts, *, update_priority: bool | None = None) -> torch.Tensor:
        """Writes the items of ``tensordicts`` (along its first dimension); with a prioritized
        sampler and ``update_priority`` not ``False``, their ``priority_key`` entries (if any)
        set their priorities."""
        if not isinstance(tensordicts, TensorDictBase):
            raise ValueError(
                f"{type(self).__name__} only accepts TensorDictBase subclasses. tensorclasses and "
                f"other types are not compatible with that class (got {type(tensordicts).__name__}). "
                "Please use a regular `ReplayBuffer` instead."
            )
        data = self._transform.inv(tensordicts) if self._transform else tensordicts
        if data is None:
            return torch.zeros((0, 1), dtype=torch.long)
        priority = None
        if update_priority is not False and isinstance(self._sampler, PrioritizedSampler):
            rows = self._transpose(data) if self._storage.ndim > 1 else data
            priority = self._reduce_priority(rows, math.prod(rows.shape[: self._storage.ndim]))
            if priority is not None:  # refused before any row is written
                self._sampler._check_priority(priority)
        index = self._write(data)
        if priority is not None:
            self.update_priority(index, priority)
        return index

    def update_priority(self, index, priority=None) -> None:
        """Sets priorities by index, or ``update_priority(td)`` reads ``td``'s index and priority."""
        if isinstance(index, TensorDictBase) and priority is None:
            self.update_tensordict_priority(index)
            return
        super().update_priority(index, priority)

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        """Reads ``data["index"]`` and ``data[priority_key]`` and updates the priorities."""
        if not isinstance(self._sampler, PrioritizedSampler):
            return
        if data.batch_dims == 0:
            data = data.unsqueeze(0)
        n = data.shape[0]
        priority = self._reduce_priority(data, n)
        if priority is None:
            raise KeyError(f"the TensorDict has no {self.priority_key!r} entry (priority_key)")
        index = data.get("index")
        if self._storage.ndim > 1:  # (row, column) of each item
            index = self._storage._ravel(index.reshape(n, -1, self._storage.ndim)[:, 0])
        else:
            index = index.reshape(n, -1)[:, 0]
        super().update_priority(index, priority)
