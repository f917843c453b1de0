"""Installing only some reap packages: what is missing is named, what is there is found.

Each test builds a real, separate virtual environment with uv and installs only the packages
it names, then runs Python in it.
"""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = os.environ.get("UV") or shutil.which("uv")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(UV is None, reason="needs uv on PATH")]


@pytest.fixture(scope="module")
def make_venv(tmp_path_factory):
    made: dict[tuple[str, ...], Path] = {}  # one venv per combination: building one takes seconds

    def make(*packages: str) -> Path:
        if packages in made:
            return made[packages]
        venv = tmp_path_factory.mktemp("venv")
        subprocess.run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
        python = venv / "bin" / "python"
        args = [str(ROOT / "packages" / p) for p in packages]
        subprocess.run([UV, "pip", "install", "--quiet", "--python", str(python), *args], check=True,
                       timeout=600)
        made[packages] = python
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
    assert "uv pip install reap-collectors-mp" in errors[0] and "uv pip install reap-collectors-mp" in errors[1]
    assert "ReplayBuffer is provided by reap-replay" in errors[2]
    assert "GAE is provided by reap-value" in errors[3]
    assert errors[4] == ("error SliceSampler is provided by reap-replay, which is not installed; "
                         "install it with `uv pip install reap-replay`.")
    assert errors[5].startswith("error no collector backend named 'ray' is installed; "
                                "install it with `uv pip install reap-collectors-ray`.")
    for line in errors[6:8]:
        assert line == ("error LSTMModule is provided by reap-rnn-kernels, which is not installed; "
                        "install it with `uv pip install reap-rnn-kernels`.")
    assert errors[8] == ("error enable_profile is provided by reap-profiling, which is not installed; "
                         "install it with `uv pip install reap-profiling`.")
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
                         frames_per_batch=32, total_frames=64, sync=True, actor_start_timeout=240,
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
