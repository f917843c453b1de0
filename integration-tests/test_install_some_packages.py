"""Installing only some reap packages: what is missing is named, what is there is found.

Each test builds a real, separate virtual environment with uv and installs only the packages
it names, then runs Python in it.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = os.environ.get("UV") or shutil.which("uv")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(UV is None, reason="needs uv on PATH")]


@pytest.fixture(scope="module")
def make_venv(tmp_path_factory):
    def make(*packages: str) -> Path:
        venv = tmp_path_factory.mktemp("venv")
        subprocess.run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
        python = venv / "bin" / "python"
        args = [str(ROOT / "packages" / p) for p in packages]
        subprocess.run([UV, "pip", "install", "--quiet", "--python", str(python), *args], check=True,
                       timeout=600)
        return python

    return make


def run(python: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300)


def test_core_alone(make_venv):
    python = make_venv("core")
    out = run(python, """
import reap
from reap import Collector, GymEnv, MultiCollector
from reap.cli import main
with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=8, total_frames=8) as c:
    print("batch", next(iter(c)).shape)
for attempt in (lambda: MultiCollector([lambda: GymEnv("CartPole-v1")] * 2, None, frames_per_batch=8),
                lambda: Collector([lambda: GymEnv("CartPole-v1")] * 2, None, frames_per_batch=8, backend="mp"),
                lambda: reap.ReplayBuffer, lambda: reap.GAE,
                lambda: exec("from reap.data.replay_buffers.samplers import SliceSampler")):
    try:
        attempt()
    except ImportError as exc:
        print("error", exc)
main(["plugins"])
""")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "batch torch.Size([8])"
    errors = [line for line in lines if line.startswith("error")]
    assert len(errors) == 5
    assert "uv pip install reap-collectors-mp" in errors[0] and "uv pip install reap-collectors-mp" in errors[1]
    assert "ReplayBuffer is provided by reap-replay" in errors[2]
    assert "GAE is provided by reap-value" in errors[3]
    assert errors[4] == ("error SliceSampler is provided by reap-replay, which is not installed; "
                         "install it with `uv pip install reap-replay`.")
    plugin_lines = [line for line in lines if line.startswith("local")]
    assert len(plugin_lines) == 1 and "backend 'local'" in plugin_lines[0]
    assert not any(line.startswith(("mp ", "replay ", "value ")) for line in lines)


def test_core_alone_collect_out_says_it_writes_a_plain_memmap(make_venv, tmp_path):
    python = make_venv("core")
    out = run(python, f"""
from reap.cli import main
from tensordict import TensorDict
main(["collect", "--env", "CartPole-v1", "--frames", "40", "--frames-per-batch", "20",
      "--out", {str(tmp_path / "run")!r}, "--no-progress"])
print("frames", TensorDict.load_memmap({str(tmp_path / "run")!r}).batch_size[0])
""")
    assert out.returncode == 0, out.stderr
    assert "reap-replay is not installed, so --out gets a plain tensordict memmap" in out.stderr
    assert out.stdout.splitlines()[-1] == "frames 40"


def test_core_with_value_only(make_venv):
    python = make_venv("core", "value")
    out = run(python, """
import reap
print(reap.GAE.__module__.split(".")[0])
try:
    reap.MultiSyncCollector
except ImportError as exc:
    print("error", exc)
""")
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first == "reap_value"
    assert "reap-collectors-mp" in second
