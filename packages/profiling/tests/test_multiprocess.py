"""Profiling MultiSyncCollector and MultiAsyncCollector: the config reaches the worker processes."""

from __future__ import annotations

import functools
import time

import pytest
from traces import event_names, rollouts_in

from reap import MultiAsyncCollector, MultiSyncCollector
from reap_testing import ConstantPolicy, EchoEnv, pid_alive

pytestmark = pytest.mark.slow
FAST = "forkserver"


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_only_the_chosen_workers_write_traces_and_all_report_timings(cls, tmp_path):
    env_fn = functools.partial(EchoEnv, 2)  # 2 envs: 10 steps per 20-frame rollout
    c = cls([env_fn] * 2, ConstantPolicy(1.0).as_module(), frames_per_batch=40 if cls is MultiSyncCollector else 20,
            total_frames=200, mp_start_method=FAST)
    try:
        c.enable_profile(workers=[1], num_rollouts=3, warmup_rollouts=1,
                         save_path=tmp_path / "worker{worker_idx}.json")
        with pytest.raises(ValueError, match="workers=\\[2\\] but the collector has 2 worker"):
            c.enable_profile(workers=[2])
        for _ in c:
            time.sleep(0.02)
        with pytest.raises(RuntimeError, match="Cannot enable profiling after iteration has started"):
            c.enable_profile()
        live = c.timings()
        pids = c.worker_pids
    finally:
        c.shutdown()
    assert [p.name for p in tmp_path.iterdir()] == ["worker1.json"]
    names = event_names(tmp_path / "worker1.json")
    assert rollouts_in(names) == [1, 2]
    assert names["reap::env_step"] == 20 and names["reap::policy"] == 20
    after = c.timings()  # gathered from the workers as they shut down
    assert [t.worker for t in after] == ["0", "1"]
    if cls is MultiSyncCollector:  # both workers fill every batch
        assert [t.frames for t in after] == [100, 100] and [t.rollouts for t in after] == [5, 5]
    else:  # double-buffered workers collect ahead of what the trainer takes
        assert after.frames >= 200 and all(t.rollouts >= 3 for t in after)
    for t in after:
        assert sum(t.shares().values()) == pytest.approx(1.0)
        assert t.env_step > 0 and t.policy > 0 and t.wait > 0
    assert after[0].profiler == 0.0 < after[1].profiler  # only worker 1 ran traced rollouts
    assert [t.frames for t in live] == [t.frames for t in after]
    assert not any(pid_alive(p) for p in pids)  # profiling keeps no worker alive


def test_the_sync_trainer_waits_and_the_workers_say_so(tmp_path):
    env_fn = functools.partial(EchoEnv, 2)
    with MultiSyncCollector([env_fn] * 2, ConstantPolicy(1.0).as_module(), frames_per_batch=40,
                            total_frames=120, mp_start_method=FAST) as c:
        c.enable_profile(workers=[])
        for _ in c:
            time.sleep(0.2)  # a slow trainer: the workers wait for it
            c.update_policy_weights_()
        timings = c.timings()
    assert not any(tmp_path.iterdir())
    for t in timings:
        assert (t.frames, t.rollouts) == (60, 3)
        assert t.wait >= 2 * 0.2 and t.shares()["wait"] > 0.5
        assert t.weight_sync >= 0.0
