"""The README's Python examples run as written, and leave nothing running behind them."""

import contextlib
import re
import time
from pathlib import Path

import pytest

from reap_testing import child_pids

README = Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_examples():
    blocks = python_blocks()
    assert blocks
    # the quickstart scales one loop by changing the collector line: all three lines run here
    quickstart = next(b for b in blocks if "RayCollector(" in b)
    assert all(f"train({name}(" in quickstart for name in ("Collector", "MultiSyncCollector", "RayCollector"))


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_example_runs(index):
    from multiprocessing import resource_tracker

    block = python_blocks()[index]
    resource_tracker.ensure_running()  # multiprocessing's long-lived helper, not the block's
    before = child_pids()
    if "RayCollector" in block:
        from reap_ray.testing import local_ray

        ray_context = local_ray()  # a small Ray on 127.0.0.1; checks no actor or Ray process is left
    else:
        ray_context = contextlib.nullcontext()
    with ray_context:
        exec(compile(block, f"README.md python block {index}", "exec"), {})
    deadline = time.monotonic() + 10
    while (left := child_pids() - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"README block {index} left child processes: {sorted(left)}"
