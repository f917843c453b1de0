"""Installing only some reap packages: what is missing is named, what is there is found.

Each test builds a real, separate virtual environment with uv and installs only the packages
it names, from their folders as the README says (``uv pip install --no-sources <folders>``: a
normal install, not an editable link into this checkout), then runs Python in it. The error for
a missing package names the command that installs it, and that command works.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = os.environ.get("UV") or shutil.which("uv")

pytestmark = pytest.mark.skipif(UV is None, reason="needs uv on PATH")

INSTALLS = """
import importlib.metadata, json
for dist in importlib.metadata.distributions():
    if dist.metadata["Name"].startswith("reap-"):
        print(json.dumps([dist.metadata["Name"], json.loads(dist.read_text("direct_url.json"))]))
"""


def install(python: Path, *args: str) -> None:
    subprocess.run([UV, "pip", "install", "--quiet", "--python", str(python), *args], check=True, timeout=600)


def installed(python: Path) -> dict[str, dict]:
    """``{distribution: its direct_url.json}`` of the reap packages in ``python``'s environment."""
    out = run(python, INSTALLS)
    assert out.returncode == 0, out.stderr
    return dict(json.loads(line) for line in out.stdout.splitlines())


def new_venv(path: Path) -> Path:
    subprocess.run([UV, "venv", "--quiet", "--python", sys.executable, str(path)], check=True)
    return path / "bin" / "python"


@pytest.fixture(scope="module")
def make_venv(tmp_path_factory):
    made: dict[tuple[str, ...], Path] = {}  # one venv per combination: building one takes seconds

    def make(*packages: str, fresh: bool = False) -> Path:
        if packages in made and not fresh:
            return made[packages]
        python = new_venv(tmp_path_factory.mktemp("venv"))
        install(python, "--no-sources", *(str(ROOT / "packages" / p) for p in packages))
        # a normal install of each folder, not an editable link into this checkout
        assert installed(python) == {f"reap-{p}": {"url": (ROOT / "packages" / p).as_uri(), "dir_info": {}}
                                     for p in packages}
        if not fresh:
            made[packages] = python
        return python

    return make


def run(python: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300)


def hint(package: str) -> str:
    return f"install it with `uv pip install --no-sources {ROOT / 'packages' / package}`."


@pytest.mark.slow
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
                lambda: exec("from reap.data.replay_buffers.samplers import SliceSampler"),
                lambda: Collector([lambda: GymEnv("CartPole-v1")] * 2, None, frames_per_batch=8, backend="ray"),
                lambda: reap.LSTMModule, lambda: exec("from reap.modules import LSTMModule"),
                lambda: Collector(GymEnv("CartPole-v1"), None, frames_per_batch=8).enable_profile(workers=[0])):
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
    assert len(errors) == 9
    assert hint("collectors-mp")[:-1] in errors[0] and hint("collectors-mp")[:-1] in errors[1]
    assert errors[2] == f"error ReplayBuffer is provided by reap-replay, which is not installed; {hint('replay')}"
    assert errors[3] == f"error GAE is provided by reap-value, which is not installed; {hint('value')}"
    assert errors[4] == f"error SliceSampler is provided by reap-replay, which is not installed; {hint('replay')}"
    # reap-collectors-ray needs reap-replay: the command installs both
    assert errors[5] == ("error no collector backend named 'ray' is installed; reap-collectors-ray provides it: "
                         "install it with `uv pip install "
                         f"--no-sources {ROOT / 'packages/replay'} {ROOT / 'packages/collectors-ray'}`. "
                         "Installed: ['local'].")
    for line in errors[6:8]:
        assert line == f"error LSTMModule is provided by reap-rnn-kernels, which is not installed; {hint('rnn-kernels')}"
    assert errors[8] == f"error enable_profile is provided by reap-profiling, which is not installed; {hint('profiling')}"
    plugins = [line.split(":")[0] for line in lines if re.match(r"\w+: reap-", line)]  # one header per plugin
    assert plugins == ["local"] and "    collector backends: local" in lines


@pytest.mark.slow
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


@pytest.mark.slow
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
    assert second == f"error MultiSyncCollector is provided by reap-collectors-mp, which is not installed; {hint('collectors-mp')}"


@pytest.mark.slow
def test_core_with_replay_only(make_venv, tmp_path):
    python = make_venv("core", "replay")
    run_dir = str(tmp_path / "run")
    out = run(python, f"""
import json, torch
from tensordict import TensorDict
import reap
from reap import LazyMemmapStorage, LazyTensorStorage, TensorDictReplayBuffer
from reap.cli import main
rb = TensorDictReplayBuffer(storage=LazyTensorStorage(16), batch_size=5)
rb.extend(TensorDict({{"x": torch.arange(20)}}, [20]))
sample = rb.sample()
print("buffer", len(rb), sorted(rb[:]["x"].tolist()) == list(range(4, 20)), sample.batch_size[0],
      all(4 <= x < 20 for x in sample["x"].tolist()))
main(["collect", "--env", "CartPole-v1", "--frames", "40", "--frames-per-batch", "20", "--seed", "3",
      "--out", {run_dir!r}, "--no-progress"])
print("writer", json.load(open({run_dir!r} + "/reap_meta.json"))["writer"])
loaded = TensorDictReplayBuffer(storage=LazyMemmapStorage.open({run_dir!r}), batch_size=8)
loaded.loads({run_dir!r})
frames = loaded[:]
print("reloaded", len(loaded), loaded.sample().batch_size[0], frames["next", "reward"].sum().item(),
      bool((frames["next", "observation"][:-1][~frames["next", "done"][:-1, 0]]
            == frames["observation"][1:][~frames["next", "done"][:-1, 0]]).all()))
try:
    reap.MultiSyncCollector
except ImportError as exc:
    print("error", exc)
""")
    assert out.returncode == 0, out.stderr
    assert "plain tensordict memmap" not in out.stderr
    lines = out.stdout.splitlines()
    # a 16-slot buffer after 20 writes holds the last 16; a sample of 5 comes from them
    assert lines[0] == "buffer 16 True 5 True"
    assert "writer ReplayWriter" in lines
    # 40 CartPole frames, reward 1 each; the root of step t+1 is the "next" of step t but across a reset
    assert lines[-2] == "reloaded 40 8 40.0 True"
    assert lines[-1].startswith("error") and "reap-collectors-mp" in lines[-1]


@pytest.mark.slow
@pytest.mark.ray
def test_core_with_ray_collects_on_a_local_ray_and_leaves_nothing(make_venv):
    from reap_ray.testing import processes_of_session

    python = make_venv("core", "replay", "collectors-ray")  # reap-collectors-ray depends on reap-replay
    out = run(python, """
import torch, ray
from tensordict.nn import TensorDictModule
from reap import GymEnv, RayCollector
from reap_ray._ray import alive_actor_ids
policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
collector = RayCollector(lambda: GymEnv("Pendulum-v1", num_envs=2), policy, num_collectors=2,
                         frames_per_batch=32, total_frames=64, sync=True, start_timeout=240,
                         ray_init_config={"num_cpus": 2, "object_store_memory": 100 * 2**20})
node = ray._private.worker._global_node
print("session", node.get_session_dir_path())
print("address", node.node_ip_address)
for batch in collector:
    print("batch", tuple(batch.batch_size), tuple(batch["next", "reward"].shape))
    collector.update_policy_weights_(policy)
collector.shutdown()
print("actors alive", len(alive_actor_ids(("CollectorActor",), this_job=True)))
collector.shutdown(shutdown_ray=True)  # the Ray it started
print("ray running", ray.is_initialized())
""")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    session = next(line.split(" ", 1)[1] for line in lines if line.startswith("session"))
    assert "address 127.0.0.1" in lines
    assert [line for line in lines if line.startswith("batch")] == ["batch (2, 2, 8) (2, 2, 8, 1)"] * 2
    assert lines[-2:] == ["actors alive 0", "ray running False"]
    deadline = time.monotonic() + 30
    while (left := processes_of_session(session)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"Ray processes left after the collector's shutdown: {sorted(left)}"


@pytest.mark.slow
def test_the_command_an_error_names_installs_the_package(make_venv):
    """From core alone, the error for RayCollector names reap-replay and reap-collectors-ray by
    their folders; running that command makes the import work, and installs them normally. Then
    reap-rnn-kernels without its dependencies, as where triton has no wheels (macOS, Windows):
    the "pad" backend runs, the "triton" one says what to do."""
    python = make_venv("core", fresh=True)
    out = run(python, "from reap.collectors.distributed import RayCollector")
    message = out.stderr.strip().splitlines()[-1]
    command = message.partition("install it with `")[2].partition("`")[0]
    assert command == f"uv pip install --no-sources {ROOT / 'packages/replay'} {ROOT / 'packages/collectors-ray'}"
    install(python, *shlex.split(command)[3:])
    install(python, "--no-sources", "--no-deps", str(ROOT / "packages" / "rnn-kernels"))
    assert {dist: record["dir_info"] for dist, record in installed(python).items()} == {
        "reap-core": {}, "reap-replay": {}, "reap-collectors-ray": {}, "reap-rnn-kernels": {}}
    out = run(python, """
import importlib.util, torch
from tensordict import TensorDict
from reap import LSTMModule, PluginNotInstalledError
from reap.collectors.distributed import RayCollector
print(RayCollector.__module__.split(".")[0])
print("triton", importlib.util.find_spec("triton"))
lstm = LSTMModule(input_size=3, hidden_size=4, in_key="x", out_key="y")
td = TensorDict({"x": torch.zeros(2, 3), "is_init": torch.ones(2, 1, dtype=torch.bool)}, [2])
print("pad", tuple(lstm(td)["y"].shape))
try:
    LSTMModule(input_size=3, hidden_size=4, in_key="x", out_key="y", recurrent_backend="triton")
except PluginNotInstalledError as exc:
    print("error", exc)
""")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "reap_ray", "triton None", "pad (2, 4)",
        "error recurrent_backend='triton' needs the triton package, which is not installed. Triton publishes "
        "wheels for Linux on x86_64 and aarch64, where reap-rnn-kernels installs it; there, install it with "
        "`uv pip install triton`. Elsewhere use recurrent_backend='scan' (or 'pad')."]


@pytest.mark.slow
def test_core_from_a_wheel_names_the_folders_in_a_clone(tmp_path):
    """Installed from a wheel, reap-core knows no clone on this machine: its hints name the
    folders to install from a clone of the repository."""
    subprocess.run([UV, "build", "--quiet", "--wheel", "--out-dir", str(tmp_path / "dist"),
                    str(ROOT / "packages" / "core")], check=True, timeout=300)
    python = new_venv(tmp_path / "venv")
    install(python, str(next((tmp_path / "dist").glob("reap_core-*.whl"))))
    out = run(python, """
try:
    from reap.data import SliceSampler
except ImportError as exc:
    print(exc)
""")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("SliceSampler is provided by reap-replay, which is not installed; install it "
                                  "with `uv pip install --no-sources ./packages/replay` in a clone of reap's "
                                  "repository.")


@pytest.mark.parametrize("platform,resolves", [
    ("x86_64-manylinux_2_28", True), ("aarch64-manylinux_2_28", True), ("aarch64-apple-darwin", True),
    ("x86_64-pc-windows-msvc", True), ("x86_64-apple-darwin", False)])
def test_the_workspace_resolves_on_each_platform(platform, resolves):
    """Every package's requirements resolve for Linux, macOS (arm64) and Windows, with triton on
    Linux only. Intel macOS cannot resolve for torch alone: torch 2.3 and later publish no wheels
    for it. Needs PyPI."""
    out = subprocess.run([UV, "pip", "compile", "--quiet", "--no-header", "--python-version", "3.11",
                          "--python-platform", platform, str(ROOT / "pyproject.toml")],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MACOSX_DEPLOYMENT_TARGET": "14.0"})  # torch's macOS wheels
    if not resolves:
        assert out.returncode != 0
        said = " ".join(out.stderr.split())  # uv wraps its explanation to the terminal's width
        assert re.search(r"Because torch\S* has no wheels with a matching platform tag", said), out.stderr
        assert "triton" not in out.stderr
        return
    assert out.returncode == 0, out.stderr
    pins = {line.split("==")[0] for line in out.stdout.splitlines() if "==" in line}
    assert {"torch", "tensordict", "ray", "gymnasium"} <= pins
    assert ("triton" in pins) == ("linux" in platform)

