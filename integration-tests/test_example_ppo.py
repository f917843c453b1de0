"""examples/ppo_cartpole.py: it solves CartPole-v1 on the mp backend, and on every other backend the
trainer's weights reach the workers batch after batch.

The example's ``main`` runs in the test's process where that needs no interpreter of its own (the
mp workers fork from the forkserver, which the earlier tests of the session have started); the
remote backends run in fresh interpreters, as a user's script would start them: Ray in one, on the
test process of the suite's Ray tests, and RPC and torch.distributed together in another.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WEIGHTS_ARGS = ("--total-frames", "6144")


def _remote_summaries(folder: Path, backends: tuple) -> dict:
    """The example on each of ``backends``, one after the other in one fresh interpreter."""
    out = folder / "summaries.json"
    script = textwrap.dedent(f"""
        import json, sys, traceback
        import cloudpickle
        import ray.cloudpickle
        sys.path.insert(0, {str(EXAMPLES)!r})
        import ppo_cartpole as example
        for pickler in (cloudpickle, ray.cloudpickle):  # workers need not find examples/ on their path
            pickler.register_pickle_by_value(example)
        summaries = {{}}
        for backend in {backends!r}:  # one backend's failure does not stop the others
            try:
                summaries[backend] = example.main(example.parse_args(["--backend", backend, *{WEIGHTS_ARGS!r}]))
            except Exception:
                summaries[backend] = {{"error": traceback.format_exc()}}
            with open({str(out)!r}, "w") as f:
                json.dump(summaries, f)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=540,
                          cwd=out.parent)
    summaries = json.loads(out.read_text()) if out.exists() else {}
    return {backend: summaries.get(backend, {"error": proc.stdout[-2000:] + proc.stderr[-4000:]})
            for backend in backends}


def test_ppo_solves_cartpole_on_the_mp_backend(run_example):
    summary = run_example("ppo_cartpole", "--backend", "mp", "--mp-start-method", "forkserver", "--seed", "0",
                          "--total-frames", "150000")
    assert summary["solved_at"] is not None and summary["solved_at"] <= 150_000, summary["final_mean_return_20"]
    assert summary["final_mean_return_20"] >= 195
    first = summary["log"][0]
    assert first["mean_return_20"] < 40  # it started from a random policy: the return was learned
    # every batch ran the weights pushed after the previous one
    assert [entry["policy_version"] for entry in summary["log"]] == [[i] for i in range(len(summary["log"]))]
    assert max(entry["logprob_lag"] for entry in summary["log"]) < 1e-4


def _check_the_weights_reached_the_workers(summary: dict, backend: str) -> None:
    log = summary["log"]
    assert summary["backend"] == backend
    assert [entry["frames"] for entry in log] == [2048, 4096, 6144]
    # the log-probabilities the workers recorded are those of the trainer's updated actor; each
    # update moved them far more than that, so a batch made with stale weights would show here
    assert max(entry["logprob_lag"] for entry in log) < 1e-4, log
    assert min(entry["logprob_moved"] for entry in log[:-1]) > 1e-2, log
    if backend != "local":  # the local collector runs the trainer's own actor: no versions to count
        assert [entry["policy_version"] for entry in log] == [[0], [1], [2]]


@pytest.mark.parametrize("backend", ["local", "threads"])
def test_weights_reach_the_workers_on_every_backend(run_example, backend):
    _check_the_weights_reached_the_workers(run_example("ppo_cartpole", "--backend", backend, *WEIGHTS_ARGS), backend)


# Ray on the Ray tests' process; RPC and torch.distributed share one interpreter on another
@pytest.mark.parametrize("backends", [pytest.param(("ray",), marks=pytest.mark.ray, id="ray"),
                                      pytest.param(("rpc", "distributed"), id="rpc-distributed")])
def test_weights_reach_the_workers_on_every_remote_backend(tmp_path, backends):
    """A failure names its backend."""
    failures = []
    for backend, summary in _remote_summaries(tmp_path, backends).items():
        try:
            assert "error" not in summary, summary["error"]
            _check_the_weights_reached_the_workers(summary, backend)
        except AssertionError as exc:
            failures.append(f"{backend}: {exc}")
    assert not failures, "\n\n".join(failures)
