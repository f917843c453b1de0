"""The READMEs' Python examples (the root README's and reap-collectors-rpc's) run as files, each
in a process of its own, and leave no process behind. (What a script without its main guard gets,
the driver's error explaining the guard, is checked in reap-collectors-mp's and -rpc's
test_faults.py for the same collectors.)"""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from reap_testing import group_left

ROOT = Path(__file__).resolve().parents[1]
READMES = ["README.md", "packages/collectors-rpc/README.md"]
GUARD = 'if __name__ == "__main__":'


def python_blocks(readme: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / readme).read_text(), flags=re.S)


def run(command: list[str], cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``command`` in a session of its own; fails if it runs past ``timeout`` s or leaves a process."""
    proc = subprocess.Popen(command, cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)  # until it and all that share its pipes end
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    left = group_left(proc.pid)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not left, f"{command} left processes: {sorted(left)}\n{err}"
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_readmes_have_runnable_python_examples():
    quickstart = next(b for b in python_blocks("README.md") if "RayCollector(" in b)
    # the quickstart scales one loop by changing the collector line: all three lines run
    assert all(f"    train({name}(" in quickstart for name in ("Collector", "MultiSyncCollector", "RayCollector"))
    assert GUARD in quickstart and GUARD in python_blocks(READMES[1])[0]


@pytest.mark.slow
@pytest.mark.parametrize("readme, index", [
    pytest.param(r, i, marks=[pytest.mark.ray] if "RayCollector(" in block else [])
    for r in READMES for i, block in enumerate(python_blocks(r))])
def test_readme_example_runs_as_a_file(readme, index, tmp_path):
    block = python_blocks(readme)[index]
    path = tmp_path / "example.py"
    path.write_text(block)
    command, env, ray_context = [sys.executable, str(path)], {}, contextlib.nullcontext()
    if 'launcher="torchrun"' in block:  # one "node" of four ranks: rank 0 trains, ranks 1-3 collect
        torchrun = str(Path(sys.executable).with_name("torchrun"))
        command = [torchrun, "--nnodes=1", "--nproc-per-node=4", "--master-addr=127.0.0.1",
                   f"--master-port={_free_port()}", "--max-restarts=0", str(path)]
    if "RayCollector(" in block:  # the example joins a small Ray on 127.0.0.1, checked for leftovers
        from reap_ray.testing import local_ray

        ray_context = local_ray()
    with ray_context:
        if "RayCollector(" in block:
            import ray

            env["RAY_ADDRESS"] = ray.get_runtime_context().gcs_address
        out = run(command, tmp_path, env)
    assert out.returncode == 0, out.stdout + out.stderr
