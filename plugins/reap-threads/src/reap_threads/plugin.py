"""Registers reap-threads with reap's plugin manager (the ``threads`` entry point in the group ``reap``).

Examples:
    >>> from reap.plugins import collector_backends, get_registries
    >>> collector_backends()["threads"].summary
    'worker threads running reap collectors, for envs that release the GIL (sync or async)'
    >>> get_registries().weight_sync_schemes["threads"].cls.__name__
    'ThreadWeightSyncScheme'
    >>> from reap import ThreadSyncCollector
    >>> ThreadSyncCollector.__module__
    'reap_threads.collectors'
"""

from reap.plugins import hookimpl
from reap.registry import CollectorBackend, WeightSyncSchemeEntry

EXPORTS = {
    "ThreadSyncCollector": "reap_threads.collectors:ThreadSyncCollector",
    "ThreadAsyncCollector": "reap_threads.collectors:ThreadAsyncCollector",
    "ThreadWorkerError": "reap_threads.collectors:ThreadWorkerError",
    "ThreadWeightSyncScheme": "reap_threads.weight_sync:ThreadWeightSyncScheme",
}


def threads_factory(*, sync=None, **kwargs):
    """``Collector(..., backend="threads")`` / ``MultiCollector(..., backend="threads")``.

    ``sync`` True (or None: ``MultiCollector`` without it): a ``ThreadSyncCollector``; False
    (``Collector``'s default, as TorchRL's): a ``ThreadAsyncCollector``.
    """
    from reap_threads.collectors import ThreadAsyncCollector, ThreadSyncCollector

    cls = ThreadAsyncCollector if sync is False else ThreadSyncCollector
    return cls(**kwargs)


@hookimpl
def reap_register_collector_backends(register):
    register(CollectorBackend(
        "threads", threads_factory,
        "worker threads running reap collectors, for envs that release the GIL (sync or async)"))


@hookimpl
def reap_register_weight_sync_schemes(register):
    from reap_threads.weight_sync import ThreadWeightSyncScheme

    register(WeightSyncSchemeEntry(
        "threads", ThreadWeightSyncScheme,
        "weights copied into each worker thread's policy copy at rollout boundaries, under a version"))


@hookimpl
def reap_register_exports(register):
    for name, target in EXPORTS.items():
        register(name, target)
