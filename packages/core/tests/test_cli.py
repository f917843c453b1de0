import json
import pickle
import subprocess
import sys

import pytest
import torch
from safetensors.torch import save_file

from reap.cli import main

POLICY_MODULE = '''
import torch


def make_policy(env):
    return torch.nn.Linear(env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1])


def make_constant():
    return lambda observation: torch.zeros(1)
'''


@pytest.fixture
def policy_module(tmp_path, monkeypatch):
    (tmp_path / "demo_policies.py").write_text(POLICY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "demo_policies"


def load_run(out):
    """The frames ``reap collect --out`` wrote, reloaded as a reap-replay buffer from the files."""
    replay = pytest.importorskip("reap_replay")
    rb = replay.TensorDictReplayBuffer(storage=replay.LazyMemmapStorage.open(out))
    rb.loads(out)
    return rb[: len(rb)]


def test_collect_writes_a_replay_checkpoint_and_summary(tmp_path, capsys):
    out = tmp_path / "run"
    main(["collect", "--env", "CartPole-v1", "--frames", "450", "--num-envs", "3",
          "--frames-per-batch", "150", "--out", str(out), "--seed", "1", "--no-progress"])
    summary = capsys.readouterr().out
    assert summary.startswith("collected 450 frames in ")
    assert "frames/s" in summary and "episodes" in summary
    meta = json.loads((out / "reap_meta.json").read_text())
    assert meta["frames"] == 450 and meta["env"] == "CartPole-v1"
    assert meta["writer"] == "ReplayWriter"
    assert json.loads((out / "meta.json").read_text())["format"] == "reap-replay-checkpoint"
    data = load_run(out)
    assert data.batch_size == (450,)
    # each env's 50 steps of a batch are contiguous, and step t+1 starts where step t ended
    same_traj = data["collector", "traj_ids"][1:50] == data["collector", "traj_ids"][:49]
    assert torch.equal(data["observation"][1:50][same_traj], data["next", "observation"][:49][same_traj])
    assert data["next", "observation"].shape == (450, 4)
    assert data["next", "observation"].abs().sum() > 0
    episodes = int(data["next", "done"].sum())
    assert f"{episodes} episodes" in summary


def test_collect_with_policy_factory_and_safetensors_weights(tmp_path, policy_module, capsys):
    weights = tmp_path / "w.safetensors"
    save_file({"weight": torch.zeros(1, 3), "bias": torch.full((1,), 0.5)}, str(weights))
    out = tmp_path / "run"
    main(["collect", "--env", "Pendulum-v1", "--frames", "20", "--frames-per-batch", "10",
          "--policy", f"{policy_module}:make_policy", "--weights", str(weights), "--out", str(out),
          "--no-progress"])
    assert (load_run(out)["action"] == 0.5).all()


def test_collect_with_torch_state_dict_weights(tmp_path, policy_module):
    weights = tmp_path / "w.pt"
    torch.save({"weight": torch.zeros(1, 3), "bias": torch.full((1,), -0.25)}, weights)
    out = tmp_path / "run"
    main(["collect", "--env", "Pendulum-v1", "--frames", "10", "--frames-per-batch", "10",
          "--policy", f"{policy_module}:make_policy", "--weights", str(weights), "--out", str(out),
          "--no-progress"])
    assert (load_run(out)["action"] == -0.25).all()


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_weights_that_would_execute_code_are_refused(tmp_path, policy_module, capsys):
    weights = tmp_path / "evil.pt"
    with open(weights, "wb") as f:
        pickle.dump({"weight": Evil()}, f)
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--env", "Pendulum-v1", "--frames", "10", "--policy",
              f"{policy_module}:make_policy", "--weights", str(weights), "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr()
    assert "is not a weights-only torch file" in err.err and "pwned" not in err.out


@pytest.mark.parametrize("argv,message", [
    (["--env", "NoSuchEnv-v0", "--frames", "10"], "--env 'NoSuchEnv-v0' is not a registered"),
    (["--env", "CartPole-v1", "--frames", "0"], "--frames must be at least 1"),
    (["--env", "CartPole-v1", "--frames", "10", "--workers", "2"], "--workers > 1 needs a multi-process backend"),
    (["--env", "CartPole-v1", "--frames", "10", "--weights", "w.pt"], "--weights needs --policy"),
    (["--env", "CartPole-v1", "--frames", "10", "--policy", "nocolon"], "--policy must look like MODULE:FACTORY"),
    (["--env", "CartPole-v1", "--frames", "10", "--policy", "no_such_mod:f"], "cannot be imported"),
    (["--env", "CartPole-v1", "--frames", "10", "--backend", "ray", "--workers", "2"],
     "--backend 'ray': no collector backend named 'ray' is installed; install it with `uv pip install reap-collectors-ray`"),
])
def test_collect_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["collect", *argv, "--no-progress"])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_out_dir_must_be_new(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit):
        main(["collect", "--env", "CartPole-v1", "--frames", "10", "--out", str(tmp_path), "--no-progress"])
    assert "exists and is not an empty directory" in capsys.readouterr().err


def test_reap_entry_point_runs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "reap.cli", "plugins"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0
    assert "local      reap-core" in out.stdout and "backend 'local'" in out.stdout
