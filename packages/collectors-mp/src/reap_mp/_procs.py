"""Process plumbing shared by the collectors and ``ParallelEnv``.

* :class:`~reap.errors.WorkerError`: what the parent raises when a worker fails, naming the worker.
* :func:`get_context`: the multiprocessing context (``spawn`` unless told otherwise), with the
  guard that explains ``if __name__ == "__main__":`` when a spawned child re-imports the script
  (:mod:`reap.collectors.spawn`: a worker that dies of it is reported with that explanation).
* :class:`Payload`: cloudpickles what plain pickle cannot send to a spawned child: lambdas, and
  the functions and classes of ``__main__`` (the child's ``__main__`` is the script re-imported
  without its guarded block, so they may not exist there by name). Both pickle an ``mp.Value``
  (shared with the child, as when passed to ``Process`` directly); tensors are copied.
* :class:`WorkerHandle`: one child process and its pipe; every wait is bounded and watches the
  process sentinel, so a dead child is reported at once with its exit code or signal.
"""

from __future__ import annotations

import contextlib
import copyreg
import io
import multiprocessing
import multiprocessing.connection
import multiprocessing.reduction
import pickle
import signal
import time
import types
from collections import ChainMap

from reap.collectors.spawn import check_main_guard, prepare_reports, start_report
from reap.errors import WorkerError
from reap.pickling import MP_VALUE_REDUCERS, cloud_dumps  # also: an mp.Value's memory sent once

START_METHODS = ("spawn", "forkserver", "fork")
#: Seconds to wait for a worker's exit code once its pipe closed (it is on its way out).
EXIT_WAIT = 10.0


FORK_HINT = " Alternatively pass mp_start_method='fork'."


def get_context(method: str | None, owner: str):
    """The multiprocessing context for ``method`` (default ``spawn``), after the spawn guard."""
    method = method or "spawn"
    if method not in START_METHODS:
        raise ValueError(f"{owner}: mp_start_method must be one of {START_METHODS}, got {method!r}")
    check_main_guard(owner, method, FORK_HINT)
    prepare_reports()
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":  # the server imports reap once; each worker is then a cheap fork
        ctx.set_forkserver_preload(["reap_mp._forkserver_preload"])
    return ctx


class _NoMainPickler(pickle.Pickler):
    """Plain pickle (an ``mp.Value`` included), refusing the functions and classes of ``__main__``
    (sent by reference, a function defined under ``if __name__ == "__main__":`` would not exist
    in the child)."""

    dispatch_table = ChainMap(MP_VALUE_REDUCERS, copyreg.dispatch_table)

    def reducer_override(self, obj):
        if isinstance(obj, (type, types.FunctionType)) and obj.__module__ == "__main__":
            raise pickle.PicklingError(f"{obj.__qualname__} belongs to __main__")
        return NotImplemented


class Payload:
    """Wraps an object so that it reaches a spawned child even if plain pickle refuses it.

    What plain pickle refuses (lambdas, local functions) and whatever holds a function or class
    of ``__main__`` travels by value (cloudpickle). The child unpickles it on first access of
    ``obj`` (inside the worker's error handling), so a constructor the child cannot import is
    reported to the parent like any worker error.
    """

    def __init__(self, obj):
        self._obj = obj
        self._raw = None

    def __getstate__(self):
        try:
            buffer = io.BytesIO()
            _NoMainPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(self._obj)
            return {"raw": buffer.getvalue(), "cloud": False}
        except Exception:
            return {"raw": cloud_dumps(self._obj), "cloud": True}

    def __setstate__(self, state):
        self._raw = state["raw"]
        self._obj = None

    @property
    def obj(self):
        if self._raw is not None:
            try:
                self._obj = pickle.loads(self._raw)
            except (ImportError, AttributeError) as exc:
                raise RuntimeError(
                    f"the worker could not rebuild the env constructor or policy it was given: {exc}. "
                    "Objects sent to workers must be importable there: define them in an importable "
                    "module (or in the main script) rather than in a test file or a local scope"
                ) from exc
            self._raw = None
        return self._obj


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by {name} (exit code {exitcode})"
    return f"exited with code {exitcode}"


class WorkerHandle:
    """A child process, the parent's end of its pipe, and bounded waits on both."""

    def __init__(self, ctx, idx: int, target, args: tuple, *, label: str, timeout: float):
        self.idx = idx
        self.label = label
        self.timeout = timeout
        self.conn, child_conn = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=target, args=(idx, child_conn, *args),
                                   name=f"{label}-{idx}", daemon=False)
        try:
            self.process.start()
        except BaseException:
            self.conn.close()
            raise
        finally:
            child_conn.close()
        # start-up waits run from here (a forkserver's own first start is not the worker's)
        self.started = time.monotonic()
        self.closed = False

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def send(self, msg) -> None:
        if self.closed:
            raise WorkerError(f"{self.label} {self.idx} was shut down", worker_idx=self.idx)
        try:
            self.conn.send(msg)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError) as exc:
            # a worker that raised sent its traceback before it exited: report that
            raise self._pending_error() or self.dead_error(f"could not be sent {msg[0]!r}") from exc

    def _pending_error(self) -> WorkerError | None:
        """The worker's error report if one is waiting in the pipe (batches before it are dropped)."""
        try:
            while self.conn.poll(0):
                message = self.conn.recv()
                if isinstance(message, tuple) and message and message[0] == "error":
                    return self.error_from(message)
        except Exception:  # noqa: BLE001 - nothing readable left: no report
            pass
        return None

    def dead_error(self, what: str, *, exit_wait: float = 0.5) -> WorkerError:
        """The error for a worker that ended; with the explanation it left if it died while
        importing the main script (on a line of its own after the first)."""
        self.process.join(exit_wait)
        code = self.process.exitcode
        report = start_report(self.pid) if code is not None else None
        return WorkerError(
            f"{self.label} {self.idx} {describe_exit(code)} and {what}" + (f"\n\n{report}" if report else ""),
            worker_idx=self.idx, exitcode=code,
        )

    def error_from(self, message) -> WorkerError:
        """The WorkerError for an ``("error", text, traceback)`` message."""
        _, text, tb = message
        return WorkerError(
            f"{self.label} {self.idx} raised {text}\n\nTraceback from the worker:\n{tb}",
            worker_idx=self.idx, remote_traceback=tb,
        )

    def wait(self, timeout: float) -> bool:
        """True once a message is ready, False after ``timeout`` s; WorkerError if the child dies."""
        deadline = time.monotonic() + timeout
        while True:
            if self.conn.poll(0):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            multiprocessing.connection.wait([self.conn, self.process.sentinel], timeout=left)
            if not self.conn.poll(0) and not self.process.is_alive():
                raise self.dead_error("sent no reply")

    def recv(self, timeout: float | None = None):
        """The next message; WorkerError if the child dies, raised, or stays silent past timeout."""
        timeout = self.timeout if timeout is None else timeout
        start = time.monotonic()
        if not self.wait(timeout):
            raise WorkerError(
                f"{self.label} {self.idx} sent nothing for {time.monotonic() - start:.1f} s "
                f"(worker_timeout={timeout:g} s); it may be stuck in its env or policy. Raise "
                "worker_timeout for slower workers.",
                worker_idx=self.idx,
            )
        return self._read()

    def _read(self):
        try:
            raw = self.conn.recv_bytes()
        except (EOFError, ConnectionResetError, OSError) as exc:
            # the worker's end closed: it is exiting. On a loaded machine a dying interpreter
            # can take seconds to go; wait for its exit code rather than call it "running"
            raise self.dead_error("closed its pipe", exit_wait=EXIT_WAIT) from exc
        try:
            # a separate step: shared-memory tensors arrive as file descriptors fetched from
            # the worker while unpickling; a failure there is not the worker closing its pipe
            message = multiprocessing.reduction.ForkingPickler.loads(raw)
        except Exception as exc:  # noqa: BLE001 - reported with the worker's index
            alive = self.process.is_alive()
            raise WorkerError(
                f"{self.label} {self.idx} sent a message the parent could not unpickle "
                f"({type(exc).__name__}: {exc}); the worker {describe_exit(None if alive else self.process.exitcode)}",
                worker_idx=self.idx, exitcode=None if alive else self.process.exitcode,
            ) from exc
        if isinstance(message, tuple) and message and message[0] == "error":
            raise self.error_from(message)
        return message

    def close(self, grace: float = 2.0) -> None:
        """Ask the child to stop, then terminate and kill it if it lingers; idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.process.is_alive():
            try:
                self.conn.send(("close",))
            except Exception:  # noqa: BLE001 - a broken pipe means it is going anyway
                pass
            self.process.join(grace)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(grace)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(grace)
        self.conn.close()
        try:
            self.process.close()
        except ValueError:  # still running after kill: nothing more can be done
            pass


def wait_any(handles, timeout: float):
    """Handles that have a message ready or whose process ended, within ``timeout``."""
    objects = {}
    for handle in handles:
        objects[handle.conn] = handle
        objects[handle.process.sentinel] = handle
    ready = multiprocessing.connection.wait(list(objects), timeout=timeout)
    seen, out = set(), []
    for obj in ready:
        handle = objects[obj]
        if handle.idx not in seen:
            seen.add(handle.idx)
            out.append(handle)
    return out


@contextlib.contextmanager
def worker_session(conn):
    """The body of a worker process: errors go to the parent, then everything is closed.

    Yields a list; append the ``close``/``shutdown`` callables of what the worker builds. An
    exception in the body is sent back as ``("error", text, traceback)`` (the parent raises it
    as a :class:`WorkerError`); a closed pipe or an interrupt just ends the worker.
    """
    closers: list = []
    try:
        yield closers
    except KeyboardInterrupt:
        pass  # Ctrl-C reaches the whole process group: the parent handles its own
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
        # Pipe errors too: an EOFError or BrokenPipeError raised by the env, the policy or a
        # library is a worker error like any other. Only if the send fails is the parent gone.
        try:
            conn.send(worker_error_message(exc))
        except Exception:  # noqa: BLE001 - the parent went away or is shutting us down
            pass
    finally:
        for close in reversed(closers):
            try:
                close()
            except Exception:  # noqa: BLE001 - closing on the way out is best effort
                pass
        conn.close()


def worker_error_message(exc: BaseException) -> tuple[str, str, str]:
    """The ``("error", text, traceback)`` message a worker sends for ``exc``."""
    import traceback

    return ("error", f"{type(exc).__name__}: {exc}",
            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
