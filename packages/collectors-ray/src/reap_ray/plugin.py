"""Registers reap-collectors-ray with reap's plugin manager.

Examples:
    >>> from reap.plugins import collector_backends, get_registries
    >>> collector_backends()["ray"].summary
    'Ray actors running reap collectors, on one machine or a cluster (sync or async)'
    >>> get_registries().weight_sync_schemes["ray"].cls.__name__
    'RayWeightSyncScheme'
    >>> from reap import RayCollector
    >>> RayCollector.__module__
    'reap_ray.collector'
"""

from reap.plugins import hookimpl
from reap.registry import CollectorBackend, WeightSyncSchemeEntry

EXPORTS = {
    "RayCollector": "reap_ray.collector:RayCollector",
    "DEFAULT_RAY_INIT_CONFIG": "reap_ray._ray:DEFAULT_RAY_INIT_CONFIG",
    "RayCollectorError": "reap_ray.collector:RayCollectorError",
    "RayEvalWorker": "reap_ray.eval_worker:RayEvalWorker",
    "RayStartError": "reap_ray._ray:RayStartError",
    "RayReplayBuffer": "reap_ray.replay_buffer:RayReplayBuffer",
    "RayWeightUpdater": "reap_ray.weight_sync:RayWeightUpdater",
    "RayWeightSyncScheme": "reap_ray.weight_sync:RayWeightSyncScheme",
}
#: TorchRL's module paths of each name (the error classes are reap's own).
MODULES = {
    "RayCollector": ("reap.collectors.distributed", "reap.collectors.distributed.ray"),
    "DEFAULT_RAY_INIT_CONFIG": ("reap.collectors.distributed.ray",),
    "RayEvalWorker": ("reap.collectors.distributed",),
    "RayReplayBuffer": ("reap.data", "reap.data.replay_buffers"),
    "RayWeightUpdater": ("reap.collectors",),
    "RayWeightSyncScheme": ("reap.weight_update",),
}


def ray_factory(*, sync=None, **kwargs):
    """``Collector(..., backend="ray")`` / ``MultiCollector(..., backend="ray")``: a ``RayCollector``.

    ``sync`` True gives stacked batches; False (``Collector``'s default, as TorchRL's) yields
    each actor's batch as it arrives; None (``MultiCollector`` without it) is True.
    """
    from reap_ray.collector import RayCollector

    for name in ("create_env_kwargs", "num_sub_threads"):
        if kwargs.get(name) is not None:
            raise TypeError(f"backend='ray': {name} is not supported by RayCollector")
        kwargs.pop(name, None)
    return RayCollector(sync=sync is not False, **kwargs)


@hookimpl
def reap_register_collector_backends(register):
    register(CollectorBackend(
        "ray", ray_factory, "Ray actors running reap collectors, on one machine or a cluster (sync or async)"))


@hookimpl
def reap_register_weight_sync_schemes(register):
    from reap_ray.weight_sync import RayWeightSyncScheme

    register(WeightSyncSchemeEntry(
        "ray", RayWeightSyncScheme, "one ray.put per update, carried with each actor's next collect request"))


@hookimpl
def reap_register_exports(register):
    for name, target in EXPORTS.items():
        register(name, target, modules=MODULES.get(name, ()))
