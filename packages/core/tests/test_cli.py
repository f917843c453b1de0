import importlib.util
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from reap.cli import main
from reap_testing import group_pids

REAP = str(Path(sys.executable).parent / "reap")  # the console script, as a user runs it

POLICY_MODULE = '''
import os
import signal

import torch


def make_policy(env):
    return torch.nn.Linear(env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1])


def make_constant():
    return lambda observation: torch.zeros(1)


CALLS = []


def make_counting():
    def policy(observation):
        CALLS.append(1)
        return torch.zeros(1)
    return policy


def make_failing_at_call_250():
    def policy(observation):
        CALLS.append(1)
        if len(CALLS) == 250:
            raise FloatingPointError("the policy broke at call 250")
        return torch.tensor([1, 0])
    return policy


def make_signalling(signum, at_call):
    def policy(observation):
        CALLS.append(1)
        if len(CALLS) == at_call:
            os.kill(os.getpid(), signum)
        return torch.tensor([1, 0])
    return policy


def make_sigterm_at_call_250():
    return make_signalling(signal.SIGTERM, 250)


def make_sigint_at_call_50():
    return make_signalling(signal.SIGINT, 50)


def make_after_sigterm():
    os.kill(os.getpid(), signal.SIGTERM)  # as if reap collect were stopped while building the policy
    return lambda observation: torch.tensor([1, 0])


def action_out_of_range():
    return lambda observation: torch.tensor([7, 0])


def action_float_for_discrete():
    return lambda observation: torch.tensor([0.5, 0.5])


def action_wrong_shape():
    return lambda observation: torch.zeros(3)


def sized_for_pendulum():
    return torch.nn.Linear(3, 1)


def action_one_for_three_envs():
    return lambda observation: torch.tensor(1)
'''


@pytest.fixture
def policy_module(tmp_path, monkeypatch):
    (tmp_path / "demo_policies.py").write_text(POLICY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "demo_policies", raising=False)  # a fresh CALLS each test
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
    assert meta["complete"] is True and meta["stopped_by"] is None and meta["frames_requested"] == 450
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
    (["--env", "NoSuchEnv-v0", "--frames", "10"], "--env 'NoSuchEnv-v0' is not a registered gymnasium id; python -c "
     "'import gymnasium; gymnasium.pprint_registry()' lists them"),
    (["--env", "CartPol-v1", "--frames", "10"], "--env 'CartPol-v1' is not a registered gymnasium id; did you mean "
     "CartPole-v1, CartPole-v0"),
    (["--env", "CartPole-v1", "--frames", "0"], "--frames must be an integer from 1 to 2**63 - 1, got 0"),
    (["--env", "CartPole-v1", "--frames", "1" + "0" * 30, "--out", "never-made"],
     f"--frames must be an integer from 1 to 2**63 - 1, got 1{'0' * 30}"),
    (["--env", "CartPole-v1", "--frames", "1.5"], "argument --frames: must be a whole number, got '1.5'"),
    (["--env", "CartPole-v1", "--frames", "ten"], "argument --frames: must be a whole number, got 'ten'"),
    (["--env", "CartPole-v1", "--frames", "10", "--workers", "2000", "--backend", "mp"],
     "--workers must be an integer from 1 to 1024, got 2000"),
    (["--env", "CartPole-v1", "--frames", "10", "--num-envs", "100000"],
     "--num-envs must be an integer from 1 to 65536, got 100000"),
    (["--env", "CartPole-v1", "--frames", "10", "--frames-per-batch", "-3"],
     "--frames-per-batch must be an integer from 1 to 2**63 - 1, got -3"),
    (["--env", "CartPole-v1", "--frames", "10", "--frames-per-batch", str(10**15)],
     f"--frames-per-batch {10**15} ({10**15} frames a batch with --num-envs 1, --workers 1) needs about "),
    (["--env", "CartPole-v1", "--frames", "10", "--seed", "1e100"],
     f"--seed must be an integer from 0 to 2**63 - 1, got {int(1e100)}"),
    (["--env", "CartPole-v1"], "the following arguments are required: --frames"),
    (["--env", "CartPole-v1", "--frames", "10", "--workers", "2"], "--workers > 1 needs a multi-process backend"),
    (["--env", "CartPole-v1", "--frames", "10", "--weights", "w.pt"], "--weights needs --policy"),
    (["--env", "CartPole-v1", "--frames", "10", "--policy", "nocolon"],
     "--policy must look like MODULE:FACTORY or path/to/file.py:FACTORY, got 'nocolon'"),
    (["--env", "CartPole-v1", "--frames", "10", "--policy", "no_such_mod:f"],
     "--policy 'no_such_mod:f' cannot be imported: ModuleNotFoundError: No module named 'no_such_mod'; give an "
     "importable module (a MODULE.py in the current directory, an installed package, or a path/to/file.py)"),
    (["--env", "CartPole-v1", "--frames", "10", "--backend", "nosuch", "--workers", "2"],
     "--backend 'nosuch': no collector backend named 'nosuch' is installed; install the plugin that provides it"),
    (["--env", "CartPole-v1", "--frames", "10", "--max-frames-per-traj", "0"],
     "--max-frames-per-traj must be an integer from 1 to 2**63 - 1, got 0"),
    (["--env", "CartPole-v1", "--frames", "10", "--seed", "-1"], "--seed must be an integer from 0 to 2**63 - 1, got -1"),
    (["--env", "CartPole-v1", "--frames", "10", "--seed", str(2**63)],
     f"--seed must be an integer from 0 to 2**63 - 1, got {2**63}"),
])
def test_collect_bad_arguments(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # --policy may put the current directory on it
    with pytest.raises(SystemExit) as exc:
        main(["collect", *argv, "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"reap: error: {message}" in err
    assert "Traceback" not in err and not any(tmp_path.iterdir())  # nothing was written


def test_out_larger_than_the_disk_is_refused_before_collecting(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--env", "CartPole-v1", "--frames", str(10**17), "--out", str(tmp_path / "run")])
    assert exc.value.code == 2
    # 66 bytes a CartPole frame (observations, one-hot action, flags, rewards) and its 8-byte trajectory id
    assert re.search(rf"reap: error: --frames {10**17} with --out needs about [\d,.]+ GiB of disk at \d+ bytes a "
                     rf"frame of CartPole-v1, more than the [\d,.]+ GiB free in {re.escape(str(tmp_path))}; collect "
                     "fewer frames or choose a disk with room", capsys.readouterr().err)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("env_id,module,message", [
    ("ALE/Pong-v5", "ale_py", "--env 'ALE/Pong-v5': the ALE envs come with ale-py, which is not installed; install it "
                              "(uv pip install ale-py)"),
    ("HalfCheetah-v5", "mujoco", "--env 'HalfCheetah-v5' needs a package that is not installed: MuJoCo is not "
                                 "installed, run `pip install \"gymnasium[mujoco]\"`"),
])
def test_env_whose_package_is_missing_names_it(env_id, module, message, capsys):
    if importlib.util.find_spec(module):
        pytest.skip(f"{module} is installed here")
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--env", env_id, "--frames", "10"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == f"reap: error: {message}\n"


def test_version_help_and_plugins(capsys):
    from reap import __version__
    from reap.plugins import collector_backends

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out == f"reap {__version__}\n"
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    backends = text[text.index("backends (--backend; installed plugins add theirs):"):].splitlines()[1:]
    assert [line.split()[0] for line in backends] == sorted(collector_backends(), key=lambda n: (n != "local", n))
    assert "threads" in collector_backends()  # the reap-threads plugin's backend is listed with the built-in ones
    for name, entry in collector_backends().items():
        assert f"  {name:<12} {entry.summary}" in backends
    for default in ("(default: local)", "(default: 1000)", "(default: 1)", "(default: random actions)"):
        assert default in " ".join(text.split())
    main(["plugins"])
    listing = capsys.readouterr().out
    assert max(len(line) for line in listing.splitlines()) <= 100
    assert "ray: reap-collectors-ray " in listing and "    collector backends: ray\n" in listing
    assert "RayCollector," in listing and "    weight-sync schemes: shared_mem, pipe\n" in listing


POLICY_FILE = '''
import torch
from tensordict.nn import TensorDictModule

NOT_CALLABLE = 3


def make(env):
    return TensorDictModule(torch.nn.Linear(3, 1, bias=False), in_keys=["observation"], out_keys=["action"])


def raising():
    raise ValueError("no GPU here")


def wrong_keys():
    return TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["act"])


def returns_a_dict():
    return lambda observation: {"act": observation}
'''


@pytest.mark.parametrize("spec,message", [
    ("sub/file_policies.py:NOT_CALLABLE", "--policy 'sub/file_policies.py:NOT_CALLABLE': NOT_CALLABLE is a int, not a "
                                          "factory; name a function (or class) that returns the policy"),
    ("sub/file_policies.py:raising", "--policy 'sub/file_policies.py:raising': the factory raised ValueError: no GPU "
                                     "here (at {dir}/sub/file_policies.py:13); fix the factory"),
    ("sub/missing.py:make", "--policy 'sub/missing.py:make': there is no file sub/missing.py (looked in {dir}/sub)"),
    ("sub/file_policies.py:nothing", "--policy 'sub/file_policies.py:nothing': sub/file_policies.py defines no "
                                     "'nothing'; name a factory defined in it"),
    ("sub/file_policies.py:wrong_keys", "--policy 'sub/file_policies.py:wrong_keys' does not fit --env Pendulum-v1: "
                                        "policy does not write the action key 'action' (it writes ['act']); set its "
                                        "out_keys to include 'action'"),
    ("sub/file_policies.py:returns_a_dict", "--policy 'sub/file_policies.py:returns_a_dict' does not fit --env "
                                            "Pendulum-v1: its action is a dict, not a tensor; return the action, or "
                                            "write it under 'action' (a TensorDictModule)"),
    ("sub/broken_policies.py:make", "--policy 'sub/broken_policies.py:make' cannot be imported: NameError: name "
                                    "'undefined_name' is not defined; give an importable module"),
])
def test_policy_factory_errors_are_one_line(spec, message, tmp_path, monkeypatch, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "file_policies.py").write_text(POLICY_FILE)
    (tmp_path / "sub" / "broken_policies.py").write_text("undefined_name\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the file's folder goes on it
    for name in ("file_policies", "broken_policies"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--env", "Pendulum-v1", "--frames", "10", "--policy", spec, "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("reap: error: " + message.format(dir=tmp_path)) and err.count("\n") == 1  # one line


def test_out_dir_must_be_new(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    with pytest.raises(SystemExit):
        main(["collect", "--env", "CartPole-v1", "--frames", "10", "--out", str(tmp_path), "--no-progress"])
    assert "exists and is not an empty directory" in capsys.readouterr().err


def test_unwritable_out_is_refused_before_collecting(tmp_path, policy_module, capsys):
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "run"
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--env", "Pendulum-v1", "--frames", "100", "--frames-per-batch", "100",
              "--policy", f"{policy_module}:make_counting", "--out", str(out), "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"reap: error: --out '{out}' cannot be written (Not a directory); choose a directory" in err
    assert getattr(sys.modules.get(policy_module), "CALLS", []) == []  # not a single step was run


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_out_in_a_read_only_directory_is_refused(tmp_path, capsys):
    parent = tmp_path / "ro"
    parent.mkdir(mode=0o500)
    with pytest.raises(SystemExit):
        main(["collect", "--env", "CartPole-v1", "--frames", "10", "--out", str(parent / "run"), "--no-progress"])
    assert "cannot be written (Permission denied)" in capsys.readouterr().err


@pytest.mark.parametrize("env,factory,extra,message", [
    ("CartPole-v1", "action_out_of_range", [],
     "does not fit --env CartPole-v1: its first action is [7, 0], the env takes one-hot vectors of length 2 (OneHot); "
     "make the policy return valid actions"),
    ("CartPole-v1", "action_float_for_discrete", [],
     "does not fit --env CartPole-v1: the action is float32 but the env expects torch.int64 (OneHot), and 0.5 is "
     "not a whole number; return an integer action (e.g. one_hot(logits.argmax(-1), n))"),
    ("Pendulum-v1", "action_wrong_shape", [],
     "does not fit --env Pendulum-v1: the action has shape (3,) but the env's action_spec expects (1,)"),
    ("CartPole-v1", "sized_for_pendulum", [],
     "fails on the first observation of --env CartPole-v1 {'observation': (4,)}: RuntimeError: mat1 and mat2 "
     "shapes cannot be multiplied (1x4 and 3x1); build it for this env (a factory that takes an argument "
     "receives the env)"),
    ("CartPole-v1", "action_one_for_three_envs", ["--num-envs", "3"],
     "does not fit --env CartPole-v1: the action has shape () but the env's action_spec expects (3, 2) (batch (3,))"),
])
def test_policy_whose_action_does_not_fit_the_env(env, factory, extra, message, policy_module, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--env", env, "--frames", "10", "--policy", f"{policy_module}:{factory}", *extra,
              "--no-progress"])
    assert exc.value.code == 2
    assert f"reap: error: --policy '{policy_module}:{factory}' {message}" in capsys.readouterr().err


def test_safetensors_file_that_is_not_one(tmp_path, policy_module, capsys):
    weights = tmp_path / "w.safetensors"
    torch.save({"weight": torch.zeros(1, 3), "bias": torch.zeros(1)}, weights)  # a torch file, misnamed
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--env", "Pendulum-v1", "--frames", "10", "--policy", f"{policy_module}:make_policy",
              "--weights", str(weights), "--no-progress"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"reap: error: --weights '{weights}' is not a safetensors file (" in err
    assert "save the state dict with safetensors.torch.save_file" in err


def test_error_mid_run_keeps_the_frames_so_far_then_raises(tmp_path, policy_module, capsys):
    out = tmp_path / "run"
    with pytest.raises(FloatingPointError, match="the policy broke at call 250"):
        main(["collect", "--env", "CartPole-v1", "--frames", "1000", "--frames-per-batch", "100",
              "--policy", f"{policy_module}:make_failing_at_call_250", "--out", str(out), "--no-progress"])
    # two probes (reap collect's check, then the collector's), then steps: 2 batches of 100 completed
    meta = json.loads((out / "reap_meta.json").read_text())
    assert meta["frames"] == 200 and meta["frames_requested"] == 1000 and meta["complete"] is False
    assert meta["error"] == "FloatingPointError: the policy broke at call 250"
    data = load_run(out)
    assert data.batch_size == (200,) and (data["action"] == torch.tensor([1, 0])).all()
    assert capsys.readouterr().out.startswith("collected 200 frames in ")


@pytest.fixture
def signal_guard():
    """SIGINT and SIGTERM fail the test (instead of stopping pytest) unless reap collect handles them."""
    def unhandled(signum, frame):
        raise AssertionError(f"{signal.Signals(signum).name} reached the handler reap collect should replace")

    previous = {s: signal.signal(s, unhandled) for s in (signal.SIGINT, signal.SIGTERM)}
    yield unhandled
    for s, handler in previous.items():
        signal.signal(s, handler)


@pytest.mark.parametrize("factory,code,frames", [
    ("make_sigterm_at_call_250", 143, 200),  # two probes, two whole batches of 100, then mid-batch
    ("make_sigint_at_call_50", 130, 0),  # during the first batch: nothing to keep
])
def test_signal_mid_batch_keeps_the_whole_batches_before_it(factory, code, frames, tmp_path, policy_module,
                                                           capsys, signal_guard):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--env", "CartPole-v1", "--frames", "1000", "--frames-per-batch", "100",
              "--policy", f"{policy_module}:{factory}", "--out", str(out), "--no-progress"])
    assert exc.value.code == code
    name = signal.Signals(code - 128).name
    assert signal.getsignal(signal.SIGINT) is signal.getsignal(signal.SIGTERM) is signal_guard  # restored
    meta = json.loads((out / "reap_meta.json").read_text())
    assert meta["frames"] == frames and meta["complete"] is False and meta["stopped_by"] == name
    summary = capsys.readouterr().out
    assert summary.startswith(f"collected {frames} frames in ")
    assert summary.rstrip().endswith(f"; stopped by {name} before 1000 frames, marked incomplete in reap_meta.json")
    if frames:
        data = load_run(out)
        assert data.batch_size == (frames,) and (data["action"] == torch.tensor([1, 0])).all()
    else:
        assert ", none written to " in summary
        assert sorted(p.name for p in out.iterdir()) == ["reap_meta.json"]


def test_signal_before_collecting_writes_nothing(tmp_path, policy_module, capsys, signal_guard):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["collect", "--env", "CartPole-v1", "--frames", "100", "--policy", f"{policy_module}:make_after_sigterm",
              "--out", str(out), "--no-progress"])
    assert exc.value.code == 143
    assert capsys.readouterr().err.endswith("reap: stopped by SIGTERM before collecting; nothing was written\n")
    assert not out.exists()
    assert signal.getsignal(signal.SIGTERM) is signal_guard


@pytest.mark.slow
def test_policy_file_given_by_its_path_reaches_the_workers(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "file_policies.py").write_text(POLICY_FILE)
    run = subprocess.run([REAP, "collect", "--env", "Pendulum-v1", "--frames", "20", "--frames-per-batch", "10",
                          "--backend", "mp", "--workers", "2", "--policy", "sub/file_policies.py:make",
                          "--out", "run", "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("collected 20 frames in ")
    assert load_run(tmp_path / "run").batch_size == (20,)


@pytest.mark.slow
def test_policy_module_in_the_current_directory_is_found(tmp_path):
    (tmp_path / "my_cwd_policies.py").write_text(POLICY_MODULE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([REAP, "collect", "--env", "Pendulum-v1", "--frames", "10", "--frames-per-batch", "10",
                          "--policy", "my_cwd_policies:make_constant", "--no-progress"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("collected 10 frames in ")


FRAMES = 640_000  # a whole number of 64-frame batches, far more than a run gets through before the signal


@pytest.mark.slow
@pytest.mark.parametrize("signum,backend,to_group", [
    (signal.SIGINT, "mp", True),  # Ctrl-C in a terminal: the workers get it too (one process: in-process tests)
    # kill PID: reap collect must stop its workers itself, whatever runs them
    *[(signal.SIGTERM, backend, False) for backend in ("local", "mp", "threads", "rpc", "distributed")],
    pytest.param(signal.SIGTERM, "ray", False, marks=pytest.mark.ray),
], ids=lambda v: v.name if isinstance(v, signal.Signals) else ("group" if v is True else None))
def test_signal_mid_run_saves_the_frames_so_far(tmp_path, signum, backend, to_group):
    from reap.plugins import collector_backends

    if backend not in collector_backends():
        pytest.skip(f"backend {backend!r} is not installed")
    out = tmp_path / "run"
    workers = [] if backend == "local" else ["--backend", backend, "--workers", "2"]
    proc = subprocess.Popen([REAP, "collect", "--env", "CartPole-v1", "--frames", str(FRAMES), "--num-envs", "2",
                             "--frames-per-batch", "64", *workers, "--out", str(out), "--seed", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not (out / "storage" / "layout.json").exists():  # the first batch is being written (Ray: after it starts)
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no batch within 240 s"
            time.sleep(0.05)
        time.sleep(0.3)
        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr, stderr
    summary = re.fullmatch(
        r"collected (\d+) frames in [\d.]+ s \([\d,]+ frames/s\), \d+ episodes, mean episode reward \S+, "
        rf"written to {re.escape(str(out))}; stopped by {name} before {FRAMES} frames, marked incomplete "
        r"in reap_meta\.json", stdout.strip().splitlines()[-1])
    assert summary, stdout
    frames = int(summary.group(1))
    meta = json.loads((out / "reap_meta.json").read_text())
    assert meta["complete"] is False and meta["stopped_by"] == name and meta["error"] is None
    assert meta["frames"] == frames and meta["frames_requested"] == FRAMES
    assert 0 < frames < FRAMES and frames % 64 == 0
    data = load_run(out)  # the README's loader
    assert data.batch_size == (frames,)
    assert (data["next", "observation"].abs().sum(-1) > 0).all()  # every row was written
    same_traj = data["collector", "traj_ids"][1:] == data["collector", "traj_ids"][:-1]
    assert same_traj.any()
    assert torch.equal(data["observation"][1:][same_traj], data["next", "observation"][:-1][same_traj])
    deadline = time.monotonic() + 30
    while group_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_pids(proc.pid)  # no worker outlived reap collect
