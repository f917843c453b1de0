"""examples/lstm_ppo.py: an LSTM policy (reap-rnn-kernels) learns CartPole-v1 with the velocities
masked, clearly past a random policy (whose episodes last ~22 steps)."""

import importlib.util
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "lstm_ppo.py"


def test_lstm_ppo_learns_partially_observed_cartpole():
    spec = importlib.util.spec_from_file_location("lstm_ppo", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    threads = torch.get_num_threads()  # the example sets 1 for itself: given back afterwards
    try:
        summary = example.main(example.parse_args(["--seed", "0", "--total-frames", "81920",
                                                   "--target-return", "150"]))
    finally:
        torch.set_num_threads(threads)
    log = summary["log"]
    assert log[0]["mean_return_20"] < 40
    assert summary["final_mean_return_20"] >= 120, [entry["mean_return_20"] for entry in log]
