"""examples/dqn_cartpole.py, run as a user runs it: batches from MultiAsyncCollector fill the
prioritized buffer, TD errors written back change the priorities, and the return rises well
above a random policy's."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dqn_cartpole.py"


def test_dqn_learns_from_a_prioritized_buffer(tmp_path):
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--seed", "0", "--total-frames", "20000",
                           "--eps-frames", "10000", "--json", str(out)],
                          capture_output=True, text=True, timeout=540, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    summary = json.loads(out.read_text())
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
