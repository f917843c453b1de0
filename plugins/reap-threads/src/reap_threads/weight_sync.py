"""The ``"threads"`` weight-sync scheme: weights copied into each worker thread's policy copy.

The driver's :meth:`ThreadWeightSyncScheme.push` keeps one detached copy of the weights with
their version for the chosen workers; each worker's :class:`ThreadWeightReceiver` copies them
into its own policy when its next rollout starts (``poll()``, called by
:class:`reap.collectors.worker.CollectorWorker`), never during a rollout.

Examples:
    >>> import torch
    >>> scheme = ThreadWeightSyncScheme()
    >>> policy = torch.nn.Linear(2, 1)
    >>> _ = torch.nn.init.zeros_(policy.weight)
    >>> receiver = scheme.receiver(0, policy)
    >>> scheme.push({"weight": torch.ones(1, 2), "bias": torch.zeros(1)}, [0], version=1)
    >>> policy.weight.tolist()      # nothing changes until the worker's next rollout
    [[0.0, 0.0]]
    >>> receiver.poll(), policy.weight.tolist()
    (1, [[1.0, 1.0]])
"""

from __future__ import annotations

import threading

import torch

from reap.weight_update import as_weights, copy_weights


class ThreadWeightReceiver:
    """One worker's side: ``poll()`` loads weights pushed since the last rollout, returns the version.

    ``local`` is the worker policy's weights (a TensorDict viewing its parameters), or None for
    a policy without parameters.
    """

    def __init__(self, scheme: ThreadWeightSyncScheme, worker_idx: int, policy):
        self._scheme = scheme
        self.worker_idx = worker_idx
        self.local = as_weights(policy) if isinstance(policy, torch.nn.Module) else None
        self.version = 0

    def poll(self) -> int:
        pending = self._scheme._take(self.worker_idx)
        if pending is not None:
            weights, version = pending
            if self.local is None:
                raise ValueError(f"worker {self.worker_idx}: weights were pushed but its policy has no parameters")
            copy_weights(self.local, weights)
            self.version = version
        return self.version


class ThreadWeightSyncScheme:
    """Weights for worker threads, applied at rollout boundaries under a version number.

    ``push(weights, worker_ids, version)`` is cheap for the driver: one detached copy of the
    weights is shared by the workers it goes to (each copies it into its own policy when its
    next rollout starts); a newer push replaces one a worker has not loaded yet.

    Examples:
        >>> from reap.plugins import get_weight_sync_scheme
        >>> get_weight_sync_scheme("threads").cls is ThreadWeightSyncScheme
        True
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._pending: dict[int, tuple] = {}
        self.receivers: dict[int, ThreadWeightReceiver] = {}

    def receiver(self, worker_idx: int, policy) -> ThreadWeightReceiver:
        """The receiver of worker ``worker_idx``, whose policy copy is ``policy``."""
        receiver = self.receivers[worker_idx] = ThreadWeightReceiver(self, worker_idx, policy)
        return receiver

    def push(self, weights, worker_ids, version: int) -> None:
        """Hand ``weights`` (any form ``update_policy_weights_`` takes) to ``worker_ids`` as ``version``."""
        snapshot = as_weights(weights).detach().clone()
        with self._lock:
            for idx in worker_ids:
                self._pending[idx] = (snapshot, int(version))

    def _take(self, worker_idx: int):
        with self._lock:
            return self._pending.pop(worker_idx, None)

    def close(self) -> None:
        with self._lock:
            self._pending.clear()
        self.receivers.clear()


__all__ = ["ThreadWeightReceiver", "ThreadWeightSyncScheme"]
