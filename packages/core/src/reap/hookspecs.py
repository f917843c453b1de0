"""Hook specifications: the whole extension surface of reap.

A plugin is a module listed under the ``reap`` entry-point group that implements some of these
functions, decorated with :data:`reap.hookimpl`. Registration hooks receive a ``register``
callable; lifecycle hooks are called by every collector, in every worker.

Examples:
    >>> from reap import hookimpl
    >>> class Counter:
    ...     batches = 0
    ...     @hookimpl
    ...     def reap_batch_ready(self, collector, batch):
    ...         Counter.batches += 1
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("reap")


@hookspec
def reap_register_collector_backends(register):
    """Register collector backends: call ``register(CollectorBackend(...))`` once per backend."""


@hookspec
def reap_register_weight_sync_schemes(register):
    """Register weight-sync schemes: call ``register(WeightSyncSchemeEntry(...))``."""


@hookspec
def reap_register_recurrent_backends(register):
    """Register recurrent kernels: call ``register(RecurrentBackend(...))``."""


@hookspec
def reap_register_exports(register):
    """Make public names importable: call ``register(name, "module:attribute", modules=(...))``.

    The name is importable from ``reap`` and from each of ``modules``: TorchRL's module paths
    with ``torchrl`` replaced by ``reap`` (``"reap.data.replay_buffers"``), see ``reap.mirror``.
    After changing what a package registers, regenerate the install-hint table with
    ``uv run python tools/update_export_hints.py``.
    """


@hookspec
def reap_collector_start(collector, worker_idx):
    """A collector (or one of its workers, ``worker_idx`` >= 0) is about to collect its first batch."""


@hookspec
def reap_rollout_start(collector, worker_idx):
    """A rollout of one batch starts in ``collector`` (worker ``worker_idx``, or -1 in-process)."""


@hookspec
def reap_rollout_end(collector, worker_idx, frames):
    """A rollout of ``frames`` frames has ended, before the batch is post-processed."""


@hookspec
def reap_batch_ready(collector, batch):
    """``batch`` is about to be yielded to (or written into the replay buffer of) the trainer."""


@hookspec
def reap_collector_shutdown(collector, worker_idx):
    """``collector`` (or its worker ``worker_idx``) shuts down; release what the plugin holds."""


@hookspec
def reap_plugin_options(collector, name, options):
    """Plugin ``name``'s ``options`` were set on ``collector`` (``None``: removed).

    Called by ``BaseCollector.set_plugin_options`` in the process that set them, then again in
    every worker process, Ray actor or rank the collector forwards them to, on the collector
    that worker runs (see ``reap.collectors.base.options_for_worker``).
    """


@hookspec(firstresult=True)
def reap_plugin_report(collector, name):
    """Return what plugin ``name`` gathered in ``collector``, picklable, or None if not yours.

    Remote collectors ask each worker for it (``BaseCollector.worker_plugin_reports``), so a
    plugin's per-worker results come back to the driver whatever the backend.
    """


@hookspec
def reap_worker_phase(collector, worker_idx, phase):
    """Worker ``worker_idx`` of a remote collector enters ``phase`` between two rollouts.

    ``phase`` is ``"wait"`` (idle until asked for its next batch or sent weights) or
    ``"weight_sync"`` (loading new weights into ``collector``, the collector it runs). Called at
    most a few times per rollout, never per step.
    """
