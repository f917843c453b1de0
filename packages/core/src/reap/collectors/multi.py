"""``MultiCollector``: multi-process collection, resolved through the backend registry.

The classes live in the plugin that registers the ``"mp"`` backend (reap-collectors-mp);
without it, construction fails with an error naming the package to install.
"""

from __future__ import annotations

import abc

from reap.plugins import get_collector_backend


class MultiCollector(metaclass=abc.ABCMeta):  # noqa: B024 - a registry of virtual subclasses
    """``MultiCollector(create_env_fn=[...], policy, sync=True|False, ...)``.

    Builds the ``"mp"`` backend's ``MultiSyncCollector`` (``sync=True``, the default) or
    ``MultiAsyncCollector`` (``sync=False``) with the same arguments. As in TorchRL, those
    classes count as ``MultiCollector`` subclasses (``isinstance(c, MultiCollector)``): a
    backend declares its classes with ``MultiCollector.register(cls)``.
    """

    def __new__(cls, create_env_fn=None, policy=None, *, sync: bool = True, backend: str = "mp", **kwargs):
        if not isinstance(sync, bool):
            raise TypeError(f"MultiCollector: sync must be True or False, got {sync!r}")
        entry = get_collector_backend(backend)
        return entry.factory(create_env_fn=create_env_fn, policy=policy, sync=sync, **kwargs)
