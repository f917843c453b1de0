"""The ``"threads"`` weight-sync scheme: one detached copy of the weights per update, carried by
each worker thread's next collect command and copied into its own policy before that rollout.

Examples:
    >>> import torch
    >>> scheme = ThreadWeightSyncScheme()
    >>> trained = torch.nn.Linear(4, 2)
    >>> payload = scheme.pack(trained)      # the driver, once per update: a snapshot
    >>> _ = torch.nn.init.zeros_(trained.weight)
    >>> payload["weight"].abs().sum() > 0   # later edits of the trainer's module do not leak
    tensor(True)
"""

from __future__ import annotations

from reap.weight_update import WeightSyncScheme


class ThreadWeightSyncScheme(WeightSyncScheme):
    """Weights for worker threads: reap-core's carried scheme (``pack`` takes a detached copy,
    shared by the workers it goes to; each loads it into its own policy copy when its next
    rollout starts, under the version it came with).

    Examples:
        >>> from reap.plugins import get_weight_sync_scheme
        >>> get_weight_sync_scheme("threads").cls is ThreadWeightSyncScheme
        True
    """

    name = "threads"


__all__ = ["ThreadWeightSyncScheme"]
