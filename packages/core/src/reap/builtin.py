"""reap-core's own plugin: registers the in-process ``local`` backend like any other plugin."""

from reap.plugins import hookimpl
from reap.registry import CollectorBackend


def _local_factory(**kwargs):
    from reap.collectors.collector import Collector

    kwargs.pop("sync", None)
    return Collector(**kwargs)


@hookimpl
def reap_register_collector_backends(register):
    register(CollectorBackend("local", _local_factory, "single-process Collector (this process)"))
