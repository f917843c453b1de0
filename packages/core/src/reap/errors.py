"""``WorkerError``: what every multi-worker collector raises when one of its workers fails.

A worker (a process of ``MultiSyncCollector``, a thread of reap-threads, a Ray actor, a
torch.distributed rank) that raises, dies or stops delivering is reported with its index and,
when it raised, its own traceback. Each backend raises a subclass of its own name
(``RayCollectorError``, ``RemoteCollectorError``, ``ThreadWorkerError``), so one ``except
WorkerError`` catches them all.

Examples:
    >>> from reap.errors import WorkerError
    >>> err = WorkerError("collector worker 1 raised ValueError: boom", worker_idx=1,
    ...                   remote_traceback="Traceback ...\\nValueError: boom")
    >>> err.worker_idx, err.exitcode
    (1, None)
    >>> import pickle
    >>> pickle.loads(pickle.dumps(err)).remote_traceback.splitlines()[-1]
    'ValueError: boom'
"""

from __future__ import annotations


class WorkerError(RuntimeError):
    """A collector's worker raised, died or stopped answering.

    Attributes:
        worker_idx: the worker's 0-based index in its collector.
        remote_traceback: the worker's formatted traceback when it raised, else None.
        exitcode: its process's exit code when it died (negative: killed by that signal).
    """

    def __init__(self, message: str, *, worker_idx: int, remote_traceback: str | None = None,
                 exitcode: int | None = None):
        super().__init__(message)
        self.worker_idx = worker_idx
        self.remote_traceback = remote_traceback
        self.exitcode = exitcode

    def __reduce__(self):
        return _rebuild, (type(self), str(self), self.worker_idx, self.remote_traceback, self.exitcode)


def _rebuild(cls, message, worker_idx, remote_traceback, exitcode):
    err = cls.__new__(cls)
    WorkerError.__init__(err, message, worker_idx=worker_idx, remote_traceback=remote_traceback,
                         exitcode=exitcode)
    return err


__all__ = ["WorkerError"]
