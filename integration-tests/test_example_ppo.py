"""examples/ppo_cartpole.py, run as a user runs it: it solves CartPole-v1 on the mp backend, and on
every other backend the trainer's weights reach the workers batch after batch."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ppo_cartpole.py"


def run_example(tmp_path, *args, timeout=540) -> dict:
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, str(EXAMPLE), *args, "--json", str(out)], capture_output=True,
                          text=True, timeout=timeout, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(out.read_text())


def run_in_process(*args) -> dict:
    """Backends without worker processes run in the test's process (no interpreter start-up)."""
    spec = importlib.util.spec_from_file_location("ppo_cartpole", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    threads = torch.get_num_threads()  # the example sets 1 for itself: given back to the test process
    try:
        return example.main(example.parse_args(list(args)))
    finally:
        torch.set_num_threads(threads)


def test_ppo_solves_cartpole_on_the_mp_backend(tmp_path):
    summary = run_example(tmp_path, "--backend", "mp", "--seed", "0", "--total-frames", "150000")
    assert summary["solved_at"] is not None and summary["solved_at"] <= 150_000, summary["final_mean_return_20"]
    assert summary["final_mean_return_20"] >= 195
    first = summary["log"][0]
    assert first["mean_return_20"] < 40  # it started from a random policy: the return was learned
    # every batch ran the weights pushed after the previous one
    assert [entry["policy_version"] for entry in summary["log"]] == [[i] for i in range(len(summary["log"]))]
    assert max(entry["logprob_lag"] for entry in summary["log"]) < 1e-4


@pytest.mark.parametrize("backend", ["local", "threads", "ray", "rpc", "distributed"])
def test_weights_reach_the_workers_on_every_backend(tmp_path, backend):
    args = ("--backend", backend, "--total-frames", "6144")
    summary = run_in_process(*args) if backend in ("local", "threads") else run_example(tmp_path, *args)
    log = summary["log"]
    assert [entry["frames"] for entry in log] == [2048, 4096, 6144]
    # the log-probabilities the workers recorded are those of the trainer's updated actor; each
    # update moved them far more than that, so a batch made with stale weights would show here
    assert max(entry["logprob_lag"] for entry in log) < 1e-4, log
    assert min(entry["logprob_moved"] for entry in log[:-1]) > 1e-2, log
    if backend != "local":  # the local collector runs the trainer's own actor: no versions to count
        assert [entry["policy_version"] for entry in log] == [[0], [1], [2]]
