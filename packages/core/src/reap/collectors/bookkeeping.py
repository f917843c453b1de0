"""What a driver keeps per remote worker, whatever carries the messages (processes, Ray actors,
torch.distributed ranks): every multi-worker backend uses these, adding only its transport.

* :class:`WorkerDeadlines`: how much work each worker owes and when it must next deliver.
  A worker that owes a batch must deliver one within ``timeout`` seconds of its last batch
  (or of the request that gave an idle worker work), however busy the other workers are.
* :class:`LatestWeights`: a copy of the weights pushed last and their version, laid out as
  the policy's own (same keys, shapes and dtypes), for workers that restart.
* :class:`WorkerWeights`: for backends that send weights with each request, which weights
  each worker should run, which it was last sent, and how many batches it collected since
  (``max_weight_update_interval``).

The worker's side is :class:`reap.collectors.worker.CollectorWorker`.

Examples:
    >>> deadlines = WorkerDeadlines(2, timeout=5.0, clock=lambda: 100.0)
    >>> deadlines.asked(0)
    >>> deadlines.owed(0), deadlines.next_deadline()
    (1, 105.0)
    >>> deadlines.overdue(now=106.0)
    [0]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from tensordict import TensorDictBase

from reap.weight_update import copy_weights, match_weights


class WorkerDeadlines:
    """Per-worker progress deadlines.

    Args:
        num_workers: how many workers there are.
        timeout: seconds a worker that owes work may go without delivering a batch.
        clock: the time source (``time.monotonic``).

    Examples:
        >>> now = [0.0]
        >>> deadlines = WorkerDeadlines(2, timeout=5.0, clock=lambda: now[0])
        >>> deadlines.asked(0, 2); deadlines.asked(1)
        >>> now[0] = 4.0; deadlines.delivered(1)   # worker 1 is done, worker 0 still owes 2
        >>> now[0] = 6.0; deadlines.overdue(), round(deadlines.waited(0), 1)
        ([0], 6.0)
        >>> deadlines.delivered(0); deadlines.overdue()  # a batch moves its deadline on
        []
    """

    def __init__(self, num_workers: int, timeout: float, *, clock: Callable[[], float] = time.monotonic):
        self.timeout = float(timeout)
        self._clock = clock
        self._owed = [0] * num_workers
        self._since: list[float | None] = [None] * num_workers

    def add_worker(self) -> None:
        """One more worker, owing nothing."""
        self._owed.append(0)
        self._since.append(None)

    def asked(self, idx: int, count: int = 1) -> None:
        """Worker ``idx`` was asked for ``count`` more batches."""
        if self._owed[idx] == 0:
            self._since[idx] = self._clock()
        self._owed[idx] += count

    def delivered(self, idx: int) -> None:
        """Worker ``idx`` delivered one batch: its clock restarts if it still owes more."""
        if self._owed[idx] <= 0:
            raise RuntimeError(f"internal error: worker {idx} delivered a batch nobody asked for")
        self._owed[idx] -= 1
        self._since[idx] = self._clock() if self._owed[idx] else None

    def forget(self, idx: int) -> None:
        """Worker ``idx`` was replaced: it owes nothing (its work is asked again)."""
        self._owed[idx] = 0
        self._since[idx] = None

    def owed(self, idx: int) -> int:
        return self._owed[idx]

    def waited(self, idx: int, now: float | None = None) -> float:
        """Seconds since worker ``idx`` last made progress (0 if it owes nothing)."""
        since = self._since[idx]
        return 0.0 if since is None else (self._clock() if now is None else now) - since

    def next_deadline(self, among: Iterable[int] | None = None) -> float | None:
        """The earliest deadline of the workers ``among`` (all) that owe work; None if none do."""
        ids = range(len(self._owed)) if among is None else among
        times = [self._since[i] for i in ids if self._since[i] is not None]
        return min(times) + self.timeout if times else None

    def overdue(self, among: Iterable[int] | None = None, now: float | None = None) -> list[int]:
        """Workers (``among`` all) past their deadline, in index order."""
        now = self._clock() if now is None else now
        ids = range(len(self._owed)) if among is None else among
        return sorted(i for i in ids if self._since[i] is not None and now - self._since[i] >= self.timeout)


class LatestWeights:
    """The weights pushed last, checked against the policy and kept in its dtypes and shapes.

    ``remember`` copies in place after the first push (no allocation per push). A worker that
    restarts receives ``weights`` under ``version``, so its batches never claim a version whose
    weights it does not run.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> latest = LatestWeights()
        >>> policy = TensorDict({"weight": torch.zeros(2)})
        >>> latest.remember(policy, TensorDict({"weight": torch.tensor([1, 2])}), version=1)
        >>> latest.weights["weight"], latest.version
        (tensor([1., 2.]), 1)
    """

    def __init__(self):
        self.weights: TensorDictBase | None = None
        self.version = 0

    def remember(self, template: TensorDictBase, weights: TensorDictBase, version: int) -> None:
        """Keep ``weights`` (checked against ``template``, the policy's layout) as ``version``."""
        weights = match_weights(template, weights)
        if self.weights is None:
            self.weights = weights.detach().to("cpu").clone()
        else:
            copy_weights(self.weights, weights)
        self.version = version

    def clear(self) -> None:
        self.weights = None
        self.version = 0


class WorkerWeights:
    """Per worker: the weights it should run, the version its last request carried, and the
    batches it delivered since its weights last changed.

    For backends whose requests carry the weights (Ray: an object ref; RPC: a payload):
    :meth:`push` records new weights for some workers under a new version, and
    :meth:`next_request` says what a worker's next request must carry, sending each version to
    each worker once. ``max_interval=k`` (``max_weight_update_interval``; -1: never forced)
    makes :meth:`due` list the workers that delivered more than ``k`` batches since their last
    update: send them fresh weights before their next request, and no worker collects with
    weights more than ``k`` batches old.

    Args:
        num_workers: workers at the start (:meth:`add_worker` adds more).
        max_interval: ``k`` above, or -1.

    Examples:
        >>> weights = WorkerWeights(2, max_interval=1)
        >>> weights.next_request(0)   # nothing pushed yet: no payload, version 0
        (None, 0)
        >>> weights.push("w1", [0, 1])
        1
        >>> weights.next_request(0), weights.next_request(0)  # carried once
        (('w1', 1), (None, 1))
        >>> weights.delivered(0); weights.due()
        []
        >>> weights.delivered(0); weights.due()   # 2 batches on version 1 > max_interval
        [0]
    """

    def __init__(self, num_workers: int = 0, *, max_interval: int = -1):
        self.max_interval = max_interval
        #: the version of the last :meth:`push` (0: the weights the workers started with)
        self.version = 0
        self._target: list[tuple | None] = []  # (version, payload) each worker should run
        self._sent: list[int] = []  # the version each worker's last request carried (-1: none yet)
        self._since: list[int] = []  # batches each worker delivered since its weights changed
        for _ in range(num_workers):
            self.add_worker()

    @property
    def num_workers(self) -> int:
        return len(self._target)

    def add_worker(self) -> int:
        """A new worker (running the weights it was built with); returns its index."""
        self._target.append(None)
        self._sent.append(-1)
        self._since.append(0)
        return len(self._target) - 1

    def push(self, payload, worker_ids: Iterable[int]) -> int:
        """``payload`` (the weights, as the transport carries them) is what ``worker_ids`` should
        run from their next request on; returns its version (one more than the last push)."""
        self.version += 1
        for i in worker_ids:
            self._target[i] = (self.version, payload)
        return self.version

    def next_request(self, idx: int) -> tuple:
        """What worker ``idx``'s next request carries: ``(payload, version)`` when it must load
        new weights before its next rollout (each version is sent once), else ``(None, the
        version it runs)``."""
        target = self._target[idx]
        if target is not None and target[0] != self._sent[idx]:
            version, payload = target
            self._sent[idx] = version
            self._since[idx] = 0
            return payload, version
        return None, max(self._sent[idx], 0)

    def delivered(self, idx: int) -> None:
        """Worker ``idx`` delivered a batch."""
        self._since[idx] += 1

    def batches_since_update(self, idx: int) -> int:
        return self._since[idx]

    def due(self, among: Iterable[int] | None = None) -> list[int]:
        """Workers (``among`` all) past ``max_interval`` batches on their weights, in order."""
        k = self.max_interval
        if k < 0:
            return []
        ids = range(self.num_workers) if among is None else among
        return [i for i in ids if self._since[i] > k]

    def replaced(self, idx: int) -> None:
        """Worker ``idx`` was replaced by a new one: its next request carries the weights it
        should run (the latest pushed to it), and its count restarts."""
        self._sent[idx] = -1
        self._since[idx] = 0


__all__ = ["LatestWeights", "WorkerDeadlines", "WorkerWeights"]
