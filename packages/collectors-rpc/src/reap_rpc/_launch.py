"""Starting, watching and stopping the worker processes of ``launcher="mp"``.

Each worker is forked from multiprocessing's ``forkserver``, which imports torch, tensordict
and reap once (:data:`PRELOAD`): a worker starts in a fraction of a second instead of paying
seconds of imports like a ``spawn``-ed interpreter. Like ``spawn``, it re-imports the main
script, so a script must build collectors under ``if __name__ == "__main__":``. A worker is
never a daemon (it may run a multi-process collector of its own); its specification travels
cloudpickled (lambdas included) with the caller's environment as it is now (the server's is
the one it started with); only the child's environment receives the loopback pins
(``TP_SOCKET_IFNAME``, ``GLOO_SOCKET_IFNAME``): the caller's ``os.environ`` is never written.
A watcher thread blocks on the processes' sentinels and reports each death at once. The
launcher holds the forkserver (:class:`~reap.collectors.lifetime.ForkserverUse`) until
:meth:`ProcessLauncher.stop`: the last collector to stop stops it.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import threading
import time

import cloudpickle

from reap.collectors.lifetime import ForkserverUse
from reap.collectors.spawn import prepare_reports
from reap_rpc._worker import worker_main

#: What the forkserver imports before forking workers (the server is shared by every
#: ``forkserver`` user of this process; the first to start it sets what it preloads).
PRELOAD = ["reap_rpc._worker", "reap.collectors.collector", "reap.collectors.worker"]


def worker_context():
    """The ``forkserver`` multiprocessing context the workers start from, preloading :data:`PRELOAD`."""
    prepare_reports()  # before the forkserver starts: its workers inherit where to explain a missing main guard
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _child(payload: bytes) -> None:
    worker_main(pickle.loads(payload))


def describe_exit(exitcode: int | None) -> str:
    """``exit code 1`` / ``killed by SIGKILL``."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


class ProcessLauncher:
    """The worker processes of one collector, and a thread reporting their deaths."""

    def __init__(self, on_death):
        self._ctx = worker_context()
        self.procs: list = []
        self._on_death = on_death
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._thread = None
        self._lock = threading.Lock()
        self._stopping = False
        self._forkserver = ForkserverUse()

    def start(self, specs: list[dict]) -> None:
        for spec in specs:
            spec = {**spec, "env": {**os.environ, **(spec.get("env") or {})}}  # as spawn would see it
            proc = self._ctx.Process(target=_child, args=(cloudpickle.dumps(spec),),
                                     name=f"reap-rpc-worker-{spec['idx']}", daemon=False)
            proc.start()
            self.procs.append(proc)
        self._thread = threading.Thread(target=self._watch, name="reap-rpc-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        waiting = {p.sentinel: i for i, p in enumerate(self.procs)}
        while waiting:
            ready = multiprocessing.connection.wait([self._wake_r, *waiting])
            if self._wake_r in ready or self._stopping:
                return
            for sentinel in ready:
                idx = waiting.pop(sentinel)
                self._on_death(idx, self.exitcode(idx))

    def exitcode(self, idx: int, wait: float = 0.0) -> int | None:
        # one thread at a time: a forkserver child's exit status is read once from its sentinel
        # (a second reader racing the first would take it for a lost server: exit code 255)
        with self._lock:
            proc = self.procs[idx]
            proc.join(wait)
            return proc.exitcode

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self, grace: float) -> None:
        """Let the workers leave on their own for ``grace`` s, then terminate, then kill."""
        self._stopping = True
        try:
            self._wake_w.send(None)
        except OSError:
            pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)
        with self._lock:
            deadline = time.monotonic() + max(grace, 0.1)
            for proc in self.procs:
                proc.join(max(0.0, deadline - time.monotonic()))
            for proc in self.procs:
                if proc.is_alive():
                    proc.terminate()
            for proc in self.procs:
                proc.join(2.0)
                if proc.is_alive():
                    proc.kill()
                    proc.join(5.0)
            for proc in self.procs:
                if proc.exitcode is not None:
                    proc.close()
        self._wake_r.close()
        self._wake_w.close()
        self._forkserver.release()
