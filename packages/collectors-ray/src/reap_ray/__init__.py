"""reap-collectors-ray: reap collectors as Ray actors, a replay buffer in a Ray actor, Ray weight sync.

Examples:
    >>> from reap_ray import RayCollector, RayReplayBuffer, RayWeightSyncScheme, RayWeightUpdater
    >>> RayWeightSyncScheme().name
    'ray'
"""

from reap_ray._ray import RayStartError
from reap_ray.collector import RayCollector, RayCollectorError
from reap_ray.replay_buffer import RayReplayBuffer
from reap_ray.weight_sync import RayWeightSyncScheme, RayWeightUpdater

__version__ = "0.1.0"

__all__ = [
    "RayCollector",
    "RayCollectorError",
    "RayReplayBuffer",
    "RayStartError",
    "RayWeightSyncScheme",
    "RayWeightUpdater",
]
