"""examples/lstm_ppo.py: an LSTM policy (reap-rnn-kernels) learns CartPole-v1 with the velocities
masked, clearly past a random policy (whose episodes last ~22 steps)."""

import pytest

pytestmark = pytest.mark.slow


def test_lstm_ppo_learns_partially_observed_cartpole(run_example):
    summary = run_example("lstm_ppo", "--seed", "0", "--total-frames", "81920", "--target-return", "150")
    log = summary["log"]
    assert log[0]["mean_return_20"] < 40
    assert summary["final_mean_return_20"] >= 120, [entry["mean_return_20"] for entry in log]
