"""Settings the whole test session needs before any test module imports anything, and how its
tests are spread over test processes.

Triton reads ``TRITON_INTERPRET`` when it is first imported, and several packages import it
indirectly (torch.profiler and torch.compile load torch._inductor, which loads triton). Without a
GPU, reap-rnn-kernels' Triton kernels run under Triton's interpreter, so the variable is set here,
before the first test module is collected, rather than in that package's own conftest.
"""

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Ray renices its worker processes to 15, below the raylet's. Here the suite's other test processes
# run at 0 on two cores, and a Ray actor then gets a few percent of a core: importing torch took
# it past RayCollector's 120 s start timeout in CI (at niceness 0, 89 s beside six busy processes).
# Every Ray the suite starts, in a test process or in a program a test runs, inherits this.
os.environ.setdefault("RAY_worker_niceness", "0")


@pytest.fixture(autouse=True)
def _child_processes_read_tensordict_s_environment():
    """tensordict's own ``torch.stack`` can leave ``LAZY_LEGACY_OP=None`` in ``os.environ``, which
    every Python started afterwards fails to read (reap.collectors.spawn explains); tests start
    scripts and workers, so each starts without it, as a user's fresh process would."""
    from reap.collectors.spawn import drop_unreadable_lazy_legacy  # after TRITON_INTERPRET is set

    drop_unreadable_lazy_legacy()


_ONE_TEST_PROCESS = {"packages/collectors-ray/tests": "ray"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Schedule a file at a time on a test process (``--dist loadgroup``), and every test that starts
    a Ray (reap-ray's files, and the tests marked ``ray``) on the same one: reap-ray's modules share
    one local Ray there, and two Rays starting beside the suite's other processes on two cores left
    an actor unready after 120 s in CI (twice: a reap-ray module's beside the README example's, then
    beside test_signal_handlers[ray]'s)."""
    root = config.rootpath
    for item in items:
        file = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else str(item.path)
        group = next((name for folder, name in _ONE_TEST_PROCESS.items() if file.startswith(folder + "/")), file)
        item.add_marker(pytest.mark.xdist_group("ray" if item.get_closest_marker("ray") else group))
    # the Ray tests first: pytest-xdist hands out groups in the order of their first test, and the
    # Ray group, the longest by far, must start at once on its process while the others share the rest
    items[:] = sorted(items, key=lambda item: item.get_closest_marker("xdist_group").args[0] != "ray")
