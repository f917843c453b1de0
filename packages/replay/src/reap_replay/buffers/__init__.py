"""Replay buffers: a storage, a sampler and a writer behind TorchRL's interface.

* :class:`ReplayBuffer`: any data; ``extend``, ``add``, ``sample``, indexing, iteration,
  transforms, checkpoints.
* :class:`TensorDictReplayBuffer`: TensorDicts; samples carry ``"index"`` (and the sampler's
  info, e.g. ``"priority_weight"``).
* :class:`PrioritizedReplayBuffer` / :class:`TensorDictPrioritizedReplayBuffer`: the same with a
  :class:`~reap_replay.samplers.PrioritizedSampler` built from ``alpha``, ``beta``, ``eps``.
* :class:`RemoteTensorDictReplayBuffer`: a TensorDict buffer callable through an ``RRef``.

A TensorDict batch with batch dims ``[n_envs, T]`` is stored, as TorchRL does with its default
``ndim=1`` storages, as ``n_envs`` items of ``T`` steps each; samples are then ``[B, T]``.

Examples:
    >>> import torch
    >>> from reap_replay import LazyTensorStorage, ReplayBuffer
    >>> rb = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
    >>> rb.extend(torch.arange(10)).shape
    torch.Size([10])
    >>> len(rb), rb.sample().shape
    (10, torch.Size([4]))
"""

from reap_replay.buffers.base import ReplayBuffer
from reap_replay.buffers.prioritized import (
    PrioritizedReplayBuffer,
    TensorDictPrioritizedReplayBuffer,
)
from reap_replay.buffers.remote import RemoteTensorDictReplayBuffer
from reap_replay.buffers.tensordict import TensorDictReplayBuffer

__all__ = [
    "PrioritizedReplayBuffer",
    "RemoteTensorDictReplayBuffer",
    "ReplayBuffer",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
]
