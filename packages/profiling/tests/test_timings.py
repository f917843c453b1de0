"""The timing summary of a single-process Collector against known costs and a stopwatch."""

from __future__ import annotations

import time

import pytest
import torch

from reap import Collector
from reap.weight_update import WeightUpdaterBase
from reap_profiling.timings import PHASES
from reap_testing import BusyEnv

ENV_STEP, POLICY_CALL, TRAINER, PUSH = 2e-3, 1e-3, 0.05, 0.02


def busy_policy(observation):
    end = time.perf_counter() + POLICY_CALL
    while time.perf_counter() < end:
        pass
    return torch.zeros(1)


class SlowUpdater(WeightUpdaterBase):
    def push_weights(self, weights=None, worker_ids=None):
        time.sleep(PUSH)


def test_shares_add_up_to_the_wall_time_and_match_known_costs():
    c = Collector(BusyEnv(step_seconds=ENV_STEP, episode_len=1000), busy_policy, frames_per_batch=25,
                  total_frames=100, weight_updater=SlowUpdater())
    c.enable_profile(workers=[], timing_sample_every=2)  # rollouts 0 and 2 timed step by step
    start = time.perf_counter()
    for _ in c:
        time.sleep(TRAINER)
        c.update_policy_weights_()
    elapsed = time.perf_counter() - start
    t = c.timings()[0]
    c.shutdown()
    assert (t.worker, t.frames, t.rollouts) == ("0", 100, 4)
    assert sum(t.seconds().values()) == pytest.approx(t.wall, rel=1e-9)
    assert sum(t.shares().values()) == pytest.approx(1.0)
    assert t.wall == pytest.approx(elapsed, rel=0.05, abs=0.02)  # the phases cover the wall time
    # busy loops and sleeps last at least their nominal time; a loaded machine only adds to them
    assert t.env_step >= 0.9 * 100 * ENV_STEP  # extrapolated from the two sampled rollouts
    assert t.policy >= 0.9 * 100 * POLICY_CALL
    assert t.env_step > t.policy > t.other
    assert t.wait >= 4 * TRAINER and t.weight_sync >= 4 * PUSH
    assert t.wait < 4 * TRAINER + 0.15  # none of the 0.3 s of rollouts counted as waiting
    assert t.profiler == 0.0
    assert t.frames_per_s == pytest.approx(100 / t.wall)


def test_traced_rollouts_have_their_own_share(tmp_path):
    c = Collector(BusyEnv(step_seconds=1e-3, episode_len=1000), busy_policy, frames_per_batch=10,
                  total_frames=50)
    # every untraced rollout timed step by step: the env time is then a sum, not extrapolated
    # from one sampled rollout (which a loaded machine can slow in its other phases)
    c.enable_profile(num_rollouts=2, warmup_rollouts=1, save_path=tmp_path / "t.json", timing_sample_every=1)
    list(c)
    t = c.timings()[0]
    c.shutdown()
    assert t.profiler >= 10 * (1e-3 + POLICY_CALL)  # one traced rollout of 10 steps
    assert t.env_step >= 0.9 * 40 * 1e-3  # the four others
    assert sum(t.shares().values()) == pytest.approx(1.0)


def test_table_has_a_row_per_worker_and_a_column_per_phase():
    c = Collector(BusyEnv(step_seconds=1e-4), None, frames_per_batch=10, total_frames=20)
    c.enable_profile(workers=[])
    list(c)
    table = str(c.timings())
    c.shutdown()
    header, row = table.splitlines()
    assert header.split()[:4] == ["worker", "frames", "frames/s", "wall"]
    for title in PHASES.values():
        assert title in header
    cells = row.split()
    assert cells[:2] == ["0", "20"]
    assert sum(float(cell.rstrip("%")) for cell in cells[4:]) == pytest.approx(100, abs=0.5)


def test_timings_after_rollout_calls_outside_the_iterator():
    c = Collector(BusyEnv(step_seconds=1e-4), None, frames_per_batch=10, total_frames=-1)
    c.enable_profile(workers=[])
    for _ in range(3):
        c.rollout()
        time.sleep(TRAINER)
    t = c.timings()[0]  # the last wait is still open: counted up to now
    c.shutdown()
    assert (t.frames, t.rollouts) == (30, 3)
    assert t.wait >= 3 * TRAINER
