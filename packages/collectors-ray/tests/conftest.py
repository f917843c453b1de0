import contextlib
from pathlib import Path

import pytest
import ray

from reap_ray.testing import local_ray, wait_no_reap_actors


class _SharedRay:
    """One local Ray for every test module that wants it, started on first use. A module that
    needs no Ray in this process (its own cluster) stops it first; the next module starts another.
    Each stop checks that no reap actor is alive and no Ray process is left."""

    def __init__(self):
        self._stack: contextlib.ExitStack | None = None
        self.session_dir: str | None = None

    def start(self) -> str:
        if self._stack is None:
            stack = contextlib.ExitStack()
            self.session_dir = stack.enter_context(local_ray())
            self._stack = stack
        return self.session_dir

    def stop(self) -> None:
        stack, self._stack, self.session_dir = self._stack, None, None
        if stack is not None:
            stack.close()


_SHARED = _SharedRay()
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def shared_ray():
    try:
        yield _SHARED
    finally:
        _SHARED.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After this directory's last test, stop the shared Ray: the tests of other packages run
    in the same process and must find no Ray (nor its sockets) there."""
    result = yield
    if nextitem is None or HERE not in Path(nextitem.path).resolve().parents:
        _SHARED.stop()
    return result


@pytest.fixture(scope="module", autouse=True)
def ray_session(shared_ray):
    """The local Ray of the tests (shared across modules); at its end no reap actor is alive and
    no Ray process is left. A module with a Ray of its own overrides this fixture and calls
    ``shared_ray.stop()`` first."""
    yield shared_ray.start()


@pytest.fixture(autouse=True)
def no_actor_left(ray_session):
    yield
    if ray.is_initialized():
        alive = wait_no_reap_actors(10.0)
        assert not alive, f"reap actors outlived the test: {sorted(alive)}"
