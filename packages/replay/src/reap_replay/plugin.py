"""Registers reap-replay with reap's plugin manager: ``from reap import ReplayBuffer`` works.

Examples:
    >>> names = {}
    >>> reap_register_exports(lambda name, target, modules: names.__setitem__(name, modules))
    >>> names["SliceSampler"]
    ('reap.data', 'reap.data.replay_buffers', 'reap.data.replay_buffers.samplers')
"""

import reap_replay
from reap.plugins import hookimpl

_BUFFERS = ("reap.data", "reap.data.replay_buffers")
_SUBMODULES = {
    "storages": ("LazyMemmapStorage", "LazyStackStorage", "LazyTensorStorage", "ListStorage", "Storage", "TensorStorage"),
    "samplers": ("PrioritizedSampler", "PrioritizedSliceSampler", "RandomSampler", "Sampler",
                 "SamplerWithoutReplacement", "SliceSampler", "SliceSamplerWithoutReplacement"),
    "writers": ("RoundRobinWriter", "TensorDictMaxValueWriter", "TensorDictRoundRobinWriter", "Writer"),
    "replay_buffers": ("PrioritizedReplayBuffer", "RemoteTensorDictReplayBuffer", "ReplayBuffer",
                       "TensorDictPrioritizedReplayBuffer", "TensorDictReplayBuffer"),
}
#: TorchRL's module paths of each name (reap's own extras, such as ``PriorityTree``, have none).
MODULES = {
    name: (*_BUFFERS, f"reap.data.replay_buffers.{sub}")
    for sub, names in _SUBMODULES.items() for name in names
}


@hookimpl
def reap_register_exports(register):
    """Registers every public class of reap_replay under its own name and TorchRL's paths."""
    for name in reap_replay.__all__:
        register(name, f"reap_replay:{name}", modules=MODULES.get(name, ()))
