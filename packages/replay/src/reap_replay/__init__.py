"""Replay buffers: storages, samplers, writers, prioritized trees, memory-mapped checkpoints.

TorchRL's replay-buffer names, keyword arguments and shapes, with faster storage reads and
writes, vectorised torch sum/min trees, and checkpoints that cannot be torn.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap_replay import LazyTensorStorage, TensorDictPrioritizedReplayBuffer
    >>> rb = TensorDictPrioritizedReplayBuffer(
    ...     alpha=0.6, beta=0.4, storage=LazyTensorStorage(1000), batch_size=32
    ... )
    >>> _ = rb.extend(TensorDict({"observation": torch.randn(100, 17)}, [100]))
    >>> batch = rb.sample()
    >>> rb.update_priority(batch["index"], torch.rand(32))
    >>> batch["priority_weight"].shape
    torch.Size([32])
"""

from reap_replay.buffers import (
    PrioritizedReplayBuffer,
    RemoteTensorDictReplayBuffer,
    ReplayBuffer,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)
from reap_replay.checkpoint import CheckpointError
from reap_replay.samplers import (
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)
from reap_replay.storages import (
    LazyMemmapStorage,
    LazyStackStorage,
    LazyTensorStorage,
    ListStorage,
    Storage,
    TensorStorage,
)
from reap_replay.trees import PriorityTree
from reap_replay.writers import (
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
    Writer,
)

__version__ = "0.1.0"

__all__ = [
    "CheckpointError",
    "LazyMemmapStorage",
    "LazyStackStorage",
    "LazyTensorStorage",
    "ListStorage",
    "PrioritizedReplayBuffer",
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "PriorityTree",
    "RandomSampler",
    "RemoteTensorDictReplayBuffer",
    "ReplayBuffer",
    "RoundRobinWriter",
    "Sampler",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "Storage",
    "TensorDictMaxValueWriter",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
    "TensorDictRoundRobinWriter",
    "TensorStorage",
    "Writer",
]
