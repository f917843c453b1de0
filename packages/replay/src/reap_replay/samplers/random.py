""":class:`RandomSampler`: uniform sampling with replacement."""

from __future__ import annotations

import torch

from reap_replay.samplers.base import _EMPTY, Sampler, _index_device, _on_device
from reap_replay.samplers.without_replacement import SamplerWithoutReplacement


class RandomSampler(Sampler):
    """Uniform sampling with replacement (``replacement=False``: a
    :class:`~reap_replay.samplers.SamplerWithoutReplacement`, taking its keyword arguments).

    Examples:
        >>> from reap_replay.storages import LazyTensorStorage
        >>> s = LazyTensorStorage(4)
        >>> s.set(slice(0, 2), torch.zeros(2))
        >>> index, _ = RandomSampler().sample(s, 5)
        >>> index.shape, bool((index < 2).all())
        (torch.Size([5]), True)
    """

    def sample(self, storage, batch_size: int):
        n = len(storage)
        if n == 0:
            raise RuntimeError(_EMPTY)
        if storage.ndim == 1:
            index = torch.randint(n, (batch_size,), generator=self._rng)
        else:  # a row and a column (...) each, drawn in turn as TorchRL does
            index = storage._ravel(tuple(torch.randint(d, (batch_size,), generator=self._rng)
                                         for d in storage.shape))
        return _on_device(index, _index_device(storage)), {}


RandomSampler._without_replacement = SamplerWithoutReplacement
