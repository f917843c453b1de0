"""reap-profiling through RPCCollector and DistributedCollector: enable_profile reaches the chosen
workers only, and timings() has a row per worker (issue 16: a few lines per backend)."""

import json

import pytest

from reap_rpc import DistributedCollector, RPCCollector
from reap_testing import ConstantPolicy, env_fn

pytest.importorskip("reap_profiling")
pytestmark = pytest.mark.slow  # worker processes (torch imports): seconds each


@pytest.mark.parametrize("cls", [RPCCollector, DistributedCollector])
def test_profiling_traces_only_the_chosen_worker_and_times_each(tmp_path, cls):
    with cls([env_fn(batch=2, episode_len=4)] * 2, ConstantPolicy(1.0).as_module(), frames_per_batch=8,
             total_frames=48, sync=True) as collector:
        collector.enable_profile(workers=[1], num_rollouts=2, save_path=str(tmp_path / "t_{worker_idx}.json"))
        assert sum(batch.numel() for batch in collector) == 48
        timings = collector.timings()
        assert [t.worker for t in timings] == ["0", "1"]
        assert [t.frames for t in timings] == [24, 24] and all(t.rollouts == 6 for t in timings)
        collector.disable_profile()  # writes what was recorded
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t_1.json"]
    names = {event.get("name") for event in json.loads((tmp_path / "t_1.json").read_text())["traceEvents"]}
    assert {"reap::env_step", "reap::policy"} <= names
    # rollout 0 is the warm-up (warmup_rollouts=1), rollout 1 recorded, nothing after num_rollouts=2
    assert {n for n in names if n.startswith("reap::rollout ")} == {"reap::rollout 1"}
