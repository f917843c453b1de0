"""Registers reap-collectors-mp with reap's plugin manager.

Examples:
    >>> from reap.plugins import collector_backends, get_registries
    >>> collector_backends()["mp"].summary
    'worker processes writing batches into shared memory (sync or async)'
    >>> {"pipe", "shared_mem"} <= set(get_registries().weight_sync_schemes)
    True
    >>> from reap import MultiSyncCollector, ParallelEnv
    >>> MultiSyncCollector.__module__
    'reap_mp.collectors'
"""

from reap.plugins import hookimpl
from reap.registry import CollectorBackend, WeightSyncSchemeEntry

EXPORTS = {
    "MultiSyncCollector": "reap_mp.collectors:MultiSyncCollector",
    "MultiAsyncCollector": "reap_mp.collectors:MultiAsyncCollector",
    "MultiSyncDataCollector": "reap_mp.collectors:MultiSyncDataCollector",
    "MultiaSyncDataCollector": "reap_mp.collectors:MultiaSyncDataCollector",
    "AsyncCollector": "reap_mp.collectors:AsyncCollector",
    "aSyncDataCollector": "reap_mp.collectors:aSyncDataCollector",
    "ParallelEnv": "reap_mp.parallel_env:ParallelEnv",
    "MultiProcessedWeightUpdater": "reap_mp.weight_sync:MultiProcessedWeightUpdater",
    "SharedMemWeightSyncScheme": "reap_mp.weight_sync:SharedMemWeightSyncScheme",
    "PipeWeightSyncScheme": "reap_mp.weight_sync:PipeWeightSyncScheme",
    "MultiProcessWeightSyncScheme": "reap_mp.weight_sync:MultiProcessWeightSyncScheme",
    "worker_seed": "reap_mp.collectors:worker_seed",
}
#: TorchRL's module paths of each name (``worker_seed`` is reap's own).
MODULES = {
    "MultiSyncCollector": ("reap.collectors",),
    "MultiAsyncCollector": ("reap.collectors",),
    "MultiSyncDataCollector": ("reap.collectors",),
    "MultiaSyncDataCollector": ("reap.collectors",),
    "AsyncCollector": ("reap.collectors",),
    "aSyncDataCollector": ("reap.collectors",),
    "MultiProcessedWeightUpdater": ("reap.collectors",),
    "ParallelEnv": ("reap.envs", "reap.envs.batched_envs"),
    "SharedMemWeightSyncScheme": ("reap.weight_update",),
    "PipeWeightSyncScheme": ("reap.weight_update",),
    "MultiProcessWeightSyncScheme": ("reap.weight_update",),
}


def mp_factory(*, sync=None, **kwargs):
    """``sync`` None/True: a ``MultiSyncCollector``; False: a ``MultiAsyncCollector``."""
    from reap_mp.collectors import MultiAsyncCollector, MultiSyncCollector

    cls = MultiAsyncCollector if sync is False else MultiSyncCollector
    return cls(**kwargs)


@hookimpl
def reap_register_collector_backends(register):
    register(CollectorBackend(
        "mp", mp_factory, "worker processes writing batches into shared memory (sync or async)"))


@hookimpl
def reap_register_weight_sync_schemes(register):
    from reap_mp.weight_sync import PipeWeightSyncScheme, SharedMemWeightSyncScheme

    register(WeightSyncSchemeEntry(
        "shared_mem", SharedMemWeightSyncScheme,
        "per-worker shared-memory weights, loaded between rollouts under a version counter"))
    register(WeightSyncSchemeEntry(
        "pipe", PipeWeightSyncScheme, "weights as arrays over each worker's pipe (any device)"))


@hookimpl
def reap_register_exports(register):
    for name, target in EXPORTS.items():
        register(name, target, modules=MODULES.get(name, ()))
