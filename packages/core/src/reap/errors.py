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

#: Built-in exceptions a worker's error is also an instance of, when the worker raised one of them:
#: ``except ValueError`` catches a worker whose env constructor refused an argument, as it catches
#: the same error where TorchRL raises it in the trainer's process.
ALSO_RAISED_AS = {cls.__name__: cls for cls in (
    TypeError, ValueError, KeyError, IndexError, AttributeError, NotImplementedError, ImportError,
    ModuleNotFoundError, AssertionError, ZeroDivisionError)}
_ALSO: dict = {}


def _raised_name(remote_traceback: str | None) -> str | None:
    """The class name of the exception a formatted traceback ends with ("ValueError: ...")."""
    if not remote_traceback:
        return None
    last = remote_traceback.rstrip().splitlines()[-1] if remote_traceback.strip() else ""
    name = last.split(":", 1)[0].strip().rsplit(".", 1)[-1]
    return name if name in ALSO_RAISED_AS else None


class WorkerError(RuntimeError):
    """A collector's worker raised, died or stopped answering.

    When the worker raised a built-in error (``ALSO_RAISED_AS``: ``ValueError``, ``TypeError``,
    ``KeyError``...), the ``WorkerError`` is an instance of that class too.

    Attributes:
        worker_idx: the worker's 0-based index in its collector.
        remote_traceback: the worker's formatted traceback when it raised, else None.
        exitcode: its process's exit code when it died (negative: killed by that signal).

    Examples:
        >>> err = WorkerError("collector worker 0 raised ValueError: no such env", worker_idx=0,
        ...                   remote_traceback="Traceback ...\\nValueError: no such env")
        >>> isinstance(err, ValueError), isinstance(err, WorkerError), type(err).__name__
        (True, True, 'WorkerError')
    """

    def __new__(cls, *args, remote_traceback: str | None = None, **kwargs):
        name = _raised_name(remote_traceback)
        if name is None or issubclass(cls, ALSO_RAISED_AS[name]):
            return super().__new__(cls, *args)
        key = (cls, name)
        if key not in _ALSO:  # e.g. WorkerError and ValueError; same name, str and pickling as cls
            _ALSO[key] = type(cls.__name__, (cls, ALSO_RAISED_AS[name]), {
                "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__str__": BaseException.__str__,
                "_reap_error_class": cls})
        return super().__new__(_ALSO[key], *args)

    def __init__(self, message: str, *, worker_idx: int, remote_traceback: str | None = None,
                 exitcode: int | None = None):
        super().__init__(message)
        self.worker_idx = worker_idx
        self.remote_traceback = remote_traceback
        self.exitcode = exitcode

    def __reduce__(self):
        cls = getattr(type(self), "_reap_error_class", type(self))  # the class it was raised as, importable
        return _rebuild, (cls, str(self), self.worker_idx, self.remote_traceback, self.exitcode)


def _rebuild(cls, message, worker_idx, remote_traceback, exitcode):
    err = cls.__new__(cls, remote_traceback=remote_traceback)
    WorkerError.__init__(err, message, worker_idx=worker_idx, remote_traceback=remote_traceback,
                         exitcode=exitcode)
    return err


__all__ = ["WorkerError"]
