"""A normal shutdown is quiet: neither the driver nor a worker prints anything (TensorPipe's
"pipe closed" / "end of file" warnings were printed by every RPC worker on every shutdown), and
it stays bounded with nothing left behind (shutdown_example.py, run in a process of its own)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).with_name("shutdown_example.py")
pytestmark = pytest.mark.slow  # a fresh interpreter and three collectors: tens of seconds


def test_shutdown_prints_nothing_and_leaves_nothing():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "OK", proc.stdout
    cases = {line.split()[1]: float(line.split()[2]) for line in lines if line.startswith("shutdown ")}
    assert sorted(cases) == ["gloo-break", "rpc-break", "rpc-end"], proc.stdout
    # bounded: the default timeout (10 s) for the batches in flight, with room for a loaded machine
    assert all(seconds < 20.0 for seconds in cases.values()), cases
    # torch's C++ warnings ("[W<date> tensorpipe_agent.cpp:...] ... pipe closed") start with "[W"
    noise = [line for line in proc.stderr.splitlines()
             if line.startswith("[W") or "pipe closed" in line or "tensorpipe" in line.lower()]
    assert not noise, proc.stderr
