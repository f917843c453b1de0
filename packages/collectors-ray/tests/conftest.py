import pytest

from reap_ray.testing import local_ray, wait_no_reap_actors


@pytest.fixture(scope="module", autouse=True)
def ray_session():
    """One local Ray per test module; at its end no reap actor is alive and no Ray process is left."""
    with local_ray() as session_dir:
        yield session_dir


@pytest.fixture(autouse=True)
def no_actor_left(ray_session):
    yield
    alive = wait_no_reap_actors(10.0)
    assert not alive, f"reap actors outlived the test: {sorted(alive)}"
