"""Registers reap-collectors-rpc with reap's plugin manager.

Examples:
    >>> from reap.plugins import collector_backends, get_registries
    >>> collector_backends()["rpc"].summary
    'worker processes driven through torch.distributed.rpc (sync or async)'
    >>> get_registries().weight_sync_schemes["distributed"].cls.__name__
    'DistributedWeightSyncScheme'
    >>> from reap import DistributedCollector
    >>> DistributedCollector.__module__
    'reap_rpc.distributed'
"""

from reap.plugins import hookimpl
from reap.registry import CollectorBackend, WeightSyncSchemeEntry

EXPORTS = {
    "RPCCollector": "reap_rpc.rpc_collector:RPCCollector",
    "DistributedCollector": "reap_rpc.distributed:DistributedCollector",
    "DistributedSyncCollector": "reap_rpc.distributed:DistributedSyncCollector",
    "RemoteCollectorError": "reap_rpc._driver:RemoteCollectorError",
    "RPCWeightSyncScheme": "reap_rpc.weight_sync:RPCWeightSyncScheme",
    "DistributedWeightSyncScheme": "reap_rpc.weight_sync:DistributedWeightSyncScheme",
    "RPCWeightUpdater": "reap_rpc.weight_sync:RPCWeightUpdater",
    "DistributedWeightUpdater": "reap_rpc.weight_sync:DistributedWeightUpdater",
    "PortInUseError": "reap_rpc._rendezvous:PortInUseError",
    "serve": "reap_rpc.torchrun:serve",
}
#: TorchRL's module paths of each name (the error class is reap's own).
MODULES = {
    "RPCCollector": ("reap.collectors.distributed",),
    "DistributedCollector": ("reap.collectors.distributed",),
    "DistributedSyncCollector": ("reap.collectors.distributed",),
    "RPCWeightUpdater": ("reap.collectors.distributed",),
    "DistributedWeightUpdater": ("reap.collectors.distributed",),
    "RPCWeightSyncScheme": ("reap.weight_update",),
    "DistributedWeightSyncScheme": ("reap.weight_update",),
}

_UNSUPPORTED = ("create_env_kwargs", "num_sub_threads")


def _factory(cls_path: str, backend: str):
    def factory(*, sync=None, **kwargs):
        import importlib

        module, _, name = cls_path.partition(":")
        cls = getattr(importlib.import_module(module), name)
        for option in _UNSUPPORTED:
            if kwargs.get(option) is not None:
                raise TypeError(f"backend={backend!r}: {option} is not supported by {name}")
            kwargs.pop(option, None)
        return cls(sync=sync is not False, **kwargs)

    factory.__doc__ = (f"``Collector(..., backend={backend!r})``: sync (True, or None from ``MultiCollector``: "
                       "batches of every worker together) or async (False, ``Collector``'s default).")
    return factory


rpc_factory = _factory(EXPORTS["RPCCollector"], "rpc")
distributed_factory = _factory(EXPORTS["DistributedCollector"], "distributed")


@hookimpl
def reap_register_collector_backends(register):
    register(CollectorBackend("rpc", rpc_factory, "worker processes driven through torch.distributed.rpc (sync or async)"))
    register(CollectorBackend("distributed", distributed_factory,
                              "worker ranks sending batches over a private gloo group (sync or async)"))


@hookimpl
def reap_register_weight_sync_schemes(register):
    from reap_rpc.weight_sync import DistributedWeightSyncScheme, RPCWeightSyncScheme

    register(WeightSyncSchemeEntry("rpc", RPCWeightSyncScheme,
                                   "weights as an argument of each worker's next collect RPC"))
    register(WeightSyncSchemeEntry("distributed", DistributedWeightSyncScheme,
                                   "weights as one gloo message before each worker's next collect"))


@hookimpl
def reap_register_exports(register):
    for name, target in EXPORTS.items():
        register(name, target, modules=MODULES.get(name, ()))
