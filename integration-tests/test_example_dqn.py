"""examples/dqn_cartpole.py (its ``main``, in the test's process, its workers forked from the
forkserver): batches from MultiAsyncCollector fill the prioritized buffer, TD
errors written back change the priorities, and the return rises well above a random policy's."""

import pytest

pytestmark = pytest.mark.slow


def test_dqn_learns_from_a_prioritized_buffer(run_example):
    summary = run_example("dqn_cartpole", "--seed", "0", "--total-frames", "20000", "--eps-frames", "10000",
                          "--mp-start-method", "forkserver")
    log, returns = summary["log"], [r for _, r in summary["returns"]]
    # data flows: every frame asked for arrived, and learning ran on all but the warm-up batches
    assert summary["frames"] == 20_096  # ceil(20000 / 128) whole batches of 128 frames
    assert [entry["frames"] for entry in log] == sorted(entry["frames"] for entry in log)
    assert len(log) >= (20_000 - 1_000) // 128 - 1
    # TD errors written back with update_priority: new items enter at the highest priority, so
    # without the write-back every importance weight would stay exactly equal
    assert max(entry["priority_weight_spread"] for entry in log) > 0.1
    # the return: a random policy averages ~22 on CartPole-v1
    assert sum(returns[:20]) / 20 < 40
    assert sum(returns[-20:]) / 20 > 100, returns[-20:]
