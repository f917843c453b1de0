"""What reap-collectors-ray's tests need: one small local Ray, and proof that nothing was left.

:func:`local_ray` starts a Ray on 127.0.0.1 sized for a small machine and, when it ends,
checks that no actor of reap's is alive, stops that Ray, and checks that no process it started
is left. :class:`ExitingEnv` ends its own process with ``os._exit`` at a given step;
:class:`HoldingEnv` stops at a given step, so that a test can act while an actor is inside that
rollout (the other faults are reap_testing's ``EchoEnv(fail_at=, hang_at=, die_at=)``).

Examples:
    >>> from reap_ray.testing import REAP_ACTOR_CLASSES
    >>> REAP_ACTOR_CLASSES
    ('CollectorActor', 'ReplayBufferActor', 'EvalActor')
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from reap_testing import EchoEnv
from reap_testing.leaks import descendant_pids

REAP_ACTOR_CLASSES = ("CollectorActor", "ReplayBufferActor", "EvalActor")
#: A Ray small enough for a 2-core CI machine, with room for a few one-CPU actors.
SMALL_RAY = {"num_cpus": 6, "object_store_memory": 300 * 2**20}


def reap_actors_alive() -> set[str]:
    """Ids of the reap actors (collectors, replay buffers, evaluation workers) of this driver that are not dead."""
    from reap_ray._ray import alive_actor_ids

    return alive_actor_ids(REAP_ACTOR_CLASSES, this_job=True)


def wait_no_reap_actors(timeout: float = 10.0) -> set[str]:
    """Poll until no reap actor is alive (at most ``timeout`` s); returns those still alive."""
    deadline = time.monotonic() + timeout
    alive = reap_actors_alive()
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = reap_actors_alive()
    return alive


def kill_actor(actor, timeout: float = 30.0) -> None:
    """``ray.kill(actor)``, then wait until the actor answers calls as dead.

    ``ray.kill`` only asks Ray to kill it: a call sent right after may still reach the actor
    and complete, so a test that kills an actor between batches waits here first.
    """
    import ray

    ray.kill(actor)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=timeout)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError(f"actor {actor} still answers {timeout} s after ray.kill")


def actor_pids(actors) -> set[int]:
    """Processes of these live Ray actors on this machine, with everything they started."""
    from ray._private import state

    pids = {state.actors(actor._actor_id.hex()).get("Pid") for actor in actors}
    return set().union(*({pid} | descendant_pids(pid) for pid in pids if pid))


def processes_of_session(session_dir: str) -> set[int]:
    """Live processes whose command line names this Ray session's directory."""
    name = Path(session_dir).name
    found = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if name in text and int(cmdline.parent.name) != os.getpid():
            found.add(int(cmdline.parent.name))
    return found


@contextlib.contextmanager
def local_ray(timeout: float = 30.0, **config):
    """A local Ray for a test module; at the end: no reap actor alive, no Ray process left.

    Raises AssertionError naming what was left. Ray must not be running when it starts.
    """
    import ray

    from reap_ray._ray import ensure_ray, shutdown_ray_if_ours

    if ray.is_initialized():
        raise RuntimeError("local_ray: Ray is already running in this process")
    before = descendant_pids(os.getpid())
    started = ensure_ray({**SMALL_RAY, **config})
    assert started, "local_ray: expected to start a new Ray"
    session_dir = ray._private.worker._global_node.get_session_dir_path()
    try:
        yield session_dir
    finally:
        alive = wait_no_reap_actors(timeout)
        shutdown_ray_if_ours()
        deadline = time.monotonic() + timeout
        left = (descendant_pids(os.getpid()) - before) | processes_of_session(session_dir)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = (descendant_pids(os.getpid()) - before) | processes_of_session(session_dir)
        assert not alive, f"reap actors still alive at the end of the tests: {sorted(alive)}"
        assert not left, f"Ray processes left after ray.shutdown(): {sorted(left)}"


class ExitingEnv(EchoEnv):
    """A ``EchoEnv`` whose process calls ``os._exit(exit_code)`` at step ``exit_at``.

    With ``once_file``, only the first process to get there exits (it creates the file), so a
    restarted actor runs on.
    """

    def __init__(self, batch: int | None = None, *, exit_at: int, exit_code: int = 3,
                 once_file: str | None = None, **kwargs):
        super().__init__(batch, **kwargs)
        self.exit_at, self.exit_code, self.once_file = exit_at, exit_code, once_file

    def _step_into(self, action, t, root, nxt):
        if self.steps + 1 == self.exit_at and (self.once_file is None or _first_here(self.once_file)):
            os._exit(self.exit_code)
        super()._step_into(action, t, root, nxt)


class HoldingEnv(EchoEnv):
    """A ``EchoEnv`` that stops for ``hold_for`` seconds at step ``hold_at`` in the first
    process to get there, which first creates ``once_file`` and writes into it the name of the
    thread stepping it: a test waits for that file to know the actor is inside that rollout; a
    restarted actor runs on.
    """

    def __init__(self, batch: int | None = None, *, hold_at: int, once_file: str, hold_for: float = 60.0,
                 **kwargs):
        super().__init__(batch, **kwargs)
        self.hold_at, self.once_file, self.hold_for = hold_at, once_file, hold_for

    def _step_into(self, action, t, root, nxt):
        if self.steps + 1 == self.hold_at and _first_here(self.once_file, threading.current_thread().name):
            time.sleep(self.hold_for)
        super()._step_into(action, t, root, nxt)


def _first_here(path: str, text: str = "") -> bool:
    """Create ``path`` holding ``text``; False if it existed (another process got there first)."""
    try:
        with open(path, "x") as f:
            f.write(text)
            return True
    except FileExistsError:
        return False
