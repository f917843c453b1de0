"""A program's own SIGINT and SIGTERM handlers are as it set them after a collector of any backend
is built, iterated and shut down (Ray's ``ray.init`` installs its own SIGTERM handler in the
driver; reap puts the program's back)."""

import contextlib
import signal
from multiprocessing import resource_tracker

import pytest

from reap import Collector
from reap_testing import child_pids, constant_policy, env_fn, wait_until

BACKENDS = {  # name: the keyword arguments that pick it
    "local": {}, "mp-sync": {"backend": "mp", "sync": True}, "mp-async": {"backend": "mp", "sync": False},
    "threads": {"backend": "threads"}, "ray": {"backend": "ray"}, "rpc": {"backend": "rpc"},
    "distributed": {"backend": "distributed"},
}


def _on_sigint(signum, frame):
    raise AssertionError("no signal is sent in this test")


def _on_sigterm(signum, frame):
    raise AssertionError("no signal is sent in this test")


@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param(b, marks=pytest.mark.ray) if b == "ray" else b for b in BACKENDS])
def test_the_programs_signal_handlers_are_kept(backend):
    ours = {signal.SIGINT: _on_sigint, signal.SIGTERM: _on_sigterm}
    previous = {signum: signal.signal(signum, handler) for signum, handler in ours.items()}

    def check(when: str) -> None:
        now = {signum: signal.getsignal(signum) for signum in ours}
        assert now == ours, f"{backend}, {when}: the handlers are {now}, the program set {ours}"

    kwargs = BACKENDS[backend]
    resource_tracker.ensure_running()  # multiprocessing's long-lived helper, not a worker
    before = child_pids()
    try:
        if backend == "ray":
            from reap_ray.testing import local_ray

            starting = local_ray()  # ray.init, as a RayCollector that starts Ray calls it
        else:
            starting = contextlib.nullcontext()
        with starting:
            check("after Ray started")
            envs = env_fn(batch=2) if backend == "local" else [env_fn(batch=2)] * 2
            collector = Collector(envs, constant_policy(), frames_per_batch=8, total_frames=24, **kwargs)
            check("after construction")
            for _ in collector:
                check("while iterating")
            check("after iteration")
            collector.shutdown()
            check("after shutdown")
        check("after Ray stopped")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    wait_until(lambda: child_pids() <= before, timeout=30, what="the workers to exit")
