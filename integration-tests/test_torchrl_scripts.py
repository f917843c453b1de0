"""Issue 26's measure: ten TorchRL 0.14.1 scripts, ported with the README's ``sed`` alone, run on reap.

``torchrl_scripts/`` holds ten short scripts written as a TorchRL user writes them (DQN with a
prioritized buffer, TorchRL's PPO tutorial, a custom ``EnvBase``, transforms, TorchRL's recurrent
DQN tutorial, CartPole with a one-hot policy, ``split_trajs``, TorchRL's ``RayCollector``
docstring example, ``ParallelEnv`` with a ``SliceSampler``, an LSTM PPO). Each is copied, rewritten
by the ``sed`` command of README.md's "Coming from TorchRL" (taken from the README, not retyped)
and run as a file in a process of its own: it must exit 0 and leave no process behind.

The scripts keep TorchRL's models and losses (``torchrl.modules``, ``torchrl.objectives``), as the
README says they stay: a ported script that still imports TorchRL is skipped where TorchRL is not
installed (``uv sync --group bench`` installs it). ``test_script_runs_on_torchrl`` runs each
original on TorchRL itself, so that every script stays a valid probe.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from reap_testing import group_left

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "torchrl_scripts"
NAMES = ["dqn_prioritized", "ppo_tutorial", "custom_env", "transforms", "recurrent_dqn",
         "cartpole_onehot", "split_trajs", "ray_collector", "parallel_env_slices", "lstm_ppo"]
# Scripts that fail on a reap bug not fixed yet: {name: reason}. They flip to XPASS when fixed.
BROKEN: dict[str, str] = {}

pytestmark = pytest.mark.slow


def readme_sed() -> str:
    """The bash block of README.md's "Coming from TorchRL" that rewrites ``train.py``."""
    readme = (ROOT / "README.md").read_text()
    return re.search(r"```bash\n(names=.*?sed -i -E .*?)```", readme, re.S).group(1)


def run(command: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """``command`` in a session of its own; fails if it runs past ``timeout`` s or leaves a process."""
    proc = subprocess.Popen(command, cwd=cwd, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    left = group_left(proc.pid)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    assert not left, f"{command} left processes: {sorted(left)}\n{err}"
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def torchrl_installed() -> bool:
    try:
        import torchrl  # noqa: F401
    except ImportError:
        return False
    return True


def on_reap(name: str, tmp_path: Path) -> subprocess.CompletedProcess | str:
    """The script ported with the README's sed and run on reap; a string says why it cannot run."""
    if shutil.which("sed") is None or shutil.which("bash") is None:
        return "the README's sed needs GNU sed and bash"
    script = tmp_path / f"{name}.py"
    shutil.copy(SCRIPTS / f"{name}.py", script)
    subprocess.run(["bash", "-c", readme_sed().replace("train.py", str(script))], check=True, timeout=60)
    ported = script.read_text()
    # collection, envs, data and value estimation now come from reap
    assert re.search(r"^from reap\.(collectors|envs)", ported, re.M)
    assert not re.search(r"\btorchrl\.(collectors|envs|data|objectives\.value)\b", ported)
    if "torchrl" in ported and not torchrl_installed():
        return "the script keeps TorchRL's models and losses: needs TorchRL (uv sync --group bench)"
    return run([sys.executable, str(script)], tmp_path, timeout=300)


def on_torchrl(name: str, tmp_path: Path) -> subprocess.CompletedProcess | str:
    """The original script run on TorchRL; a string says why it cannot run."""
    if not torchrl_installed():
        return "needs TorchRL (uv sync --group bench)"
    script = SCRIPTS / f"{name}.py"
    command = [sys.executable, str(script)]
    if "PrioritizedReplayBuffer" in script.read_text():
        # TorchRL's compiled segment trees do not load against this torch build: stand-ins
        command = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(SCRIPTS)!r}); "
                   "import runpy, torchrl_trees; torchrl_trees.install(); "
                   f"runpy.run_path({str(script)!r}, run_name='__main__')"]
    return run(command, tmp_path, timeout=300)


@pytest.fixture(scope="module")
def started(request, tmp_path_factory):
    """Every selected run of this module, started two at a time (the scripts are single-threaded
    and the suite has two cores): ``started[test_name, script_name]`` is its Future."""
    targets = {"test_script_runs_on_reap_after_the_readme_sed": on_reap, "test_script_runs_on_torchrl": on_torchrl}
    items = [(item.originalname, item.callspec.params["name"]) for item in request.session.items
             if item.module is request.module and item.originalname in targets]
    with ThreadPoolExecutor(2) as pool:
        futures = {(test, name): pool.submit(targets[test], name, tmp_path_factory.mktemp(name))
                   for test, name in items}
        yield futures
        for future in futures.values():
            future.cancel()


def outcome(future: Future) -> subprocess.CompletedProcess:
    result = future.result()
    if isinstance(result, str):
        pytest.skip(result)
    return result


def test_there_are_ten_scripts():
    assert sorted(p.stem for p in SCRIPTS.glob("*.py") if p.stem != "torchrl_trees") == sorted(NAMES)
    assert "sed -i -E" in readme_sed() and "train.py" in readme_sed()


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=BROKEN[name])) if name in BROKEN else name
    for name in NAMES
])
def test_script_runs_on_reap_after_the_readme_sed(name, started):
    out = outcome(started["test_script_runs_on_reap_after_the_readme_sed", name])
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]


@pytest.mark.parametrize("name", NAMES)
def test_script_runs_on_torchrl(name, started):
    """The original on TorchRL: a script that fails there is no probe of reap."""
    out = outcome(started["test_script_runs_on_torchrl", name])
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
