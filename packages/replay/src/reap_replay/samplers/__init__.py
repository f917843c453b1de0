"""Samplers: which stored items a batch holds.

* :class:`RandomSampler`: uniform, with replacement.
* :class:`SamplerWithoutReplacement`: epochs over a permutation (``for batch in rb``).
* :class:`PrioritizedSampler`: proportional to ``(|priority| + eps) ** alpha``, with importance
  weights, over a :class:`~reap_replay.trees.PriorityTree` on the storage's device.
* :class:`SliceSampler`: contiguous slices of stored trajectories;
  :class:`SliceSamplerWithoutReplacement` draws each trajectory once per epoch,
  :class:`PrioritizedSliceSampler` draws the slices' first steps by priority.

Every sampler returns ``(index, info)``; the replay buffer adds ``info["index"]``.

Examples:
    >>> import torch
    >>> from reap_replay.storages import LazyTensorStorage
    >>> storage = LazyTensorStorage(8)
    >>> storage.set(slice(0, 4), torch.arange(4))
    >>> index, info = SamplerWithoutReplacement(shuffle=False).sample(storage, 3)
    >>> index.tolist(), info
    ([0, 1, 2], {})
"""

from reap_replay.samplers.base import Sampler
from reap_replay.samplers.prioritized import PrioritizedSampler
from reap_replay.samplers.prioritized_slice import PrioritizedSliceSampler
from reap_replay.samplers.random import RandomSampler
from reap_replay.samplers.slice_without_replacement import SliceSamplerWithoutReplacement
from reap_replay.samplers.slices import SliceSampler
from reap_replay.samplers.without_replacement import SamplerWithoutReplacement

__all__ = [
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "RandomSampler",
    "Sampler",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
]
