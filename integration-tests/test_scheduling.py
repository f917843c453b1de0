"""The suite's scheduling (conftest.py) holds: under ``--dist loadgroup`` each test runs in its group,
a file's tests on one test process and every Ray test on reap-ray's, so that module fixtures (a
local Ray, a script run) start once and two Rays never start at once. pytest-xdist marks a grouped
test by suffixing its id with ``@group``; a pytest it cannot do that with (9.2, pytest-xdist issue
1386) drops the groups without a word, which this test turns into a failure."""

import pytest


def _skip_unless_loadgroup(config) -> None:
    # a pytest-xdist worker run with --dist loadgroup has the option; pytest -n 0 has none
    if not getattr(config.option, "loadgroup", False):
        pytest.skip("not run by pytest-xdist's --dist loadgroup (pytest -n 0?)")


def test_this_file_is_one_group(request):
    _skip_unless_loadgroup(request.config)
    assert request.node.nodeid.endswith("@integration-tests/test_scheduling.py"), (
        f"{request.node.nodeid} carries no xdist group: --dist loadgroup is ignoring conftest.py's groups "
        "(pytest-xdist and pytest versions that do not work together? see pyproject.toml's dev group)"
    )


@pytest.mark.ray
def test_a_ray_test_is_in_the_ray_group(request):
    _skip_unless_loadgroup(request.config)
    assert request.node.nodeid.endswith("@ray"), request.node.nodeid
