"""Traces of a single-process Collector: which rollouts, which events, what is put back."""

from __future__ import annotations

import warnings

import pytest
import torch
from traces import event_names, rollouts_in

from reap import Collector, GymEnv
from reap.collectors.base import options_for_worker
from reap_profiling import ProfileConfig


def collector(frames_per_batch=10, total_frames=50, env=None, **kwargs):
    return Collector(env or GymEnv("CartPole-v1"), None, frames_per_batch=frames_per_batch,
                     total_frames=total_frames, **kwargs)


def test_records_only_the_rollouts_after_warmup_and_stops(tmp_path):
    with collector(total_frames=60) as c:  # 6 rollouts of 10 steps
        c.enable_profile(num_rollouts=3, warmup_rollouts=1, save_path=tmp_path / "w{worker_idx}.json")
        assert len(list(c)) == 6
    assert [p.name for p in tmp_path.iterdir()] == ["w0.json"]
    names = event_names(tmp_path / "w0.json")
    assert rollouts_in(names) == [1, 2]
    assert names["reap::env_step"] == 20  # 2 rollouts x 10 steps: nothing from rollouts 0, 3, 4, 5
    assert names["reap::policy"] == 20
    assert any(n.startswith("aten::") for n in names)  # the profiler recorded the ops too


def test_without_warmup_the_first_rollout_is_recorded(tmp_path):
    with collector(env=GymEnv("CartPole-v1", num_envs=2), frames_per_batch=8, total_frames=24) as c:
        c.enable_profile(num_rollouts=1, warmup_rollouts=0, save_path=tmp_path / "t.json")
        list(c)
    names = event_names(tmp_path / "t.json")
    assert rollouts_in(names) == [0]
    assert names["reap::env_step"] == 4 and names["reap::policy"] == 4  # 8 frames over 2 envs


def test_shutdown_before_num_rollouts_writes_what_was_recorded(tmp_path):
    c = collector(total_frames=20)
    c.enable_profile(num_rollouts=5, warmup_rollouts=0, save_path=tmp_path / "t.json")
    list(c)
    assert not (tmp_path / "t.json").exists()  # still recording
    c.shutdown()
    assert rollouts_in(event_names(tmp_path / "t.json")) == [0, 1]


def test_workers_empty_times_without_tracing(tmp_path):
    with collector() as c:
        c.enable_profile(workers=[], save_path=tmp_path / "t.json")
        list(c)
        assert c.timings()[0].frames == 50
    assert not any(tmp_path.iterdir())


def test_sub_workers_of_a_remote_worker_get_distinct_files(tmp_path):
    """What a remote collector whose workers are themselves multi-worker collectors forwards:
    options_for_worker at each level (remote worker 1, its sub-workers 0 and 1)."""
    for template, expected in [("t.json", ["t_1.0.json", "t_1.1.json"]),
                               ("w{worker_idx}.json", ["w1.0.json", "w1.1.json"])]:
        config = ProfileConfig(workers=[1], num_rollouts=1, warmup_rollouts=0,
                               save_path=str(tmp_path / template))
        for remote in (0, 1):
            for sub in (0, 1):
                with collector(total_frames=10, worker_idx=sub) as c:
                    c.set_plugin_options("profiling", options_for_worker(options_for_worker(config, remote), sub))
                    list(c)
        written = sorted(p.name for p in tmp_path.iterdir() if p.name in expected)
        assert written == expected
        for name in expected:
            assert event_names(tmp_path / name)["reap::env_step"] == 10
    assert len(list(tmp_path.iterdir())) == 4  # remote worker 0 was not chosen: no file of its


def test_on_trace_ready_gets_the_profiler_instead_of_a_file(tmp_path):
    seen = []
    with collector(total_frames=30) as c:
        c.enable_profile(num_rollouts=2, warmup_rollouts=0, save_path=tmp_path / "t.json",
                         on_trace_ready=seen.append)
        list(c)
    assert len(seen) == 1 and not (tmp_path / "t.json").exists()
    seen[0].export_chrome_trace(str(tmp_path / "mine.json"))
    assert event_names(tmp_path / "mine.json")["reap::env_step"] == 20


def test_turning_profiling_off_puts_back_the_users_own_wrappers(tmp_path):
    env = GymEnv("CartPole-v1")
    steps, rollouts = [], []
    original_step = env._step_into

    def users_step(*args):
        steps.append(1)
        return original_step(*args)

    env._step_into = users_step
    c = collector(env=env)
    original_rollout = c.rollout

    def users_rollout():
        rollouts.append(1)
        return original_rollout()

    c.rollout = users_rollout
    c.enable_profile(num_rollouts=2, warmup_rollouts=0, save_path=tmp_path / "t.json",
                     timing_sample_every=1)
    for _ in c:
        pass
    assert len(steps) == 50 and len(rollouts) == 5  # the user's wrappers ran under profiling's
    assert env._step_into is users_step and "_reset_into" not in env.__dict__  # put back after each rollout
    assert event_names(tmp_path / "t.json")["reap::env_step"] == 20
    runner = c._runner
    c.disable_profile()
    assert c.rollout is users_rollout and c._runner is runner
    assert not {"iterator", "update_policy_weights_"} & set(c.__dict__)
    c.disable_profile()  # a no-op the second time
    c.shutdown()


def test_enable_profile_after_iteration_started_is_an_error(tmp_path):
    with collector() as c:
        next(iter(c))
        with pytest.raises(RuntimeError, match="Cannot enable profiling after iteration has started; call enable_profile before"):
            c.enable_profile(save_path=tmp_path / "t.json")
    with pytest.raises(RuntimeError, match="was shut down"):
        c.enable_profile()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback on a machine without CUDA")
def test_cuda_without_cuda_records_the_cpu_and_warns_once(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with collector() as c:
            c.enable_profile(num_rollouts=3, warmup_rollouts=0, activities=["cpu", "cuda"],
                             save_path=tmp_path / "t.json")
            list(c)
    cuda = [w for w in caught if "CUDA is not available" in str(w.message)]
    assert len(cuda) == 1 and "recording the CPU only" in str(cuda[0].message)
    names = event_names(tmp_path / "t.json")
    assert names["reap::env_step"] == 30 and any(n.startswith("aten::") for n in names)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"num_rollouts": 2, "warmup_rollouts": 2}, ValueError, "num_rollouts=2 must be greater than warmup_rollouts=2"),
    ({"warmup_rollouts": -1}, ValueError, r"warmup_rollouts must be >= 0 \(an int\), got -1"),
    ({"workers": [1]}, ValueError, r"workers=\[1\] but the collector has 1 worker"),
    ({"workers": 0}, ValueError, "workers must be a list of worker indices"),
    ({"activities": ["gpu"]}, ValueError, "activities must hold 'cpu' and/or 'cuda'"),
    ({"timing_sample_every": 0}, ValueError, r"timing_sample_every must be >= 1 \(an int\)"),
    ({"on_trace_ready": "trace.json"}, TypeError, "on_trace_ready must be callable"),
    ({"num_rollout": 3}, TypeError, "unexpected keyword argument 'num_rollout'; the options are the fields"),
])
def test_bad_options_name_the_argument(kwargs, error, match):
    with collector() as c, pytest.raises(error, match=match):
        c.enable_profile(**kwargs)


def test_workers_are_a_sorted_list_as_torchrls():
    assert ProfileConfig().workers == [0] and ProfileConfig(workers=[2, 0, 2]).workers == [0, 2]
    torchrl_collectors = pytest.importorskip("torchrl.collectors")
    assert ProfileConfig(workers=[1]).workers == torchrl_collectors.ProfileConfig(workers=[1]).workers


def test_config_or_keywords_not_both():
    with collector() as c:
        with pytest.raises(TypeError, match="pass a ProfileConfig or its fields as keywords, not both"):
            c.enable_profile(ProfileConfig(), num_rollouts=2)
        with pytest.raises(TypeError, match="config must be a ProfileConfig"):
            c.enable_profile({"num_rollouts": 2})
        with pytest.raises(TypeError, match="'profiling' plugin option must be a ProfileConfig"):
            c.set_plugin_options("profiling", {"num_rollouts": 2})
        with pytest.raises(RuntimeError, match=r"timings\(\): profiling is off; call collector.enable_profile"):
            c.timings()


def test_a_remote_collector_that_does_not_forward_options_is_refused():
    from reap.collectors.base import BaseCollector

    class NoForwarding(BaseCollector):  # a backend written before plugin options existed
        num_workers = 2

    with pytest.raises(NotImplementedError, match="NoForwarding does not forward plugin options"):
        NoForwarding().enable_profile()
