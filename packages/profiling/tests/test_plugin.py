"""The plugin: found through the registry, silent when off, named when missing; docs run."""

from __future__ import annotations

import doctest
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import reap
import reap_profiling
from reap import Collector, GymEnv
from reap.plugins import get_registries, hook
from reap_profiling.plugin import ROLLOUT_HOOKS

ROOT = Path(__file__).resolve().parents[3]

MODULES = ["reap_profiling", "reap_profiling.config", "reap_profiling.timings", "reap_profiling.api",
           "reap_profiling.plugin"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_every_public_object_has_an_example():
    for name in reap_profiling.__all__:
        obj = getattr(reap_profiling, name)
        assert ">>>" in (obj.__doc__ or "") + (importlib.import_module(obj.__module__).__doc__ or ""), name
        assert getattr(reap, name) is obj  # exported through reap as well


def profiling_impls(hook_name: str) -> list[str]:
    return [impl.plugin_name for impl in getattr(hook(), hook_name).get_hookimpls()
            if impl.plugin_name.startswith("profiling")]


def test_rollout_hooks_are_registered_only_while_a_collector_is_profiled(tmp_path):
    assert get_registries().pm.get_plugin(ROLLOUT_HOOKS) is None
    for name in ("reap_rollout_start", "reap_rollout_end", "reap_worker_phase", "reap_batch_ready"):
        assert profiling_impls(name) == []  # installed, not enabled: the rollout path calls nothing of ours
    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=10, total_frames=20) as c:
        c.enable_profile(workers=[])
        assert profiling_impls("reap_rollout_start") == [ROLLOUT_HOOKS]
        list(c)
    assert profiling_impls("reap_rollout_start") == []  # shutdown unregistered them
    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=10, total_frames=20) as c:
        c.enable_profile(workers=[])
        c.disable_profile()
        assert profiling_impls("reap_rollout_start") == []


def test_without_the_package_enable_profile_names_it():
    code = textwrap.dedent("""
        import reap
        from reap import Collector, GymEnv
        from reap.plugins import PluginNotInstalledError
        c = Collector(GymEnv("CartPole-v1"), None, frames_per_batch=10, total_frames=10)
        for call in (c.enable_profile, c.timings, lambda: reap.ProfileConfig):
            try:
                call()
            except PluginNotInstalledError as exc:
                print("error", exc)
        c.disable_profile()  # nothing to turn off
        print("batches", len(list(c)))
        c.shutdown()
    """)
    env = {**os.environ, "REAP_DISABLE_PLUGINS": "profiling"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    not_loaded = ("is provided by reap-profiling, which is installed but its reap plugin is not loaded "
                  "(REAP_DISABLE_PLUGINS / REAP_DISABLE_PLUGIN_AUTOLOAD, or it failed to load: run `reap "
                  "plugins`); reinstall it with `uv pip install --no-sources --reinstall-package reap-profiling "
                  f"{ROOT / 'packages' / 'profiling'}`.")
    assert lines == [f"error {name} {not_loaded}" for name in ("enable_profile", "collector_timings", "ProfileConfig")
                     ] + ["batches 1"]


def test_torchrl_names_of_the_config_and_the_collectors_profile_config(tmp_path):
    import torch

    from reap_profiling import ProfileConfig

    config = ProfileConfig(workers=[0, 2], save_path=str(tmp_path / "w{worker_idx}.json"), activities=["cpu"])
    assert [config.should_profile_worker(i) for i in range(4)] == [True, False, True, False]
    assert config.get_save_path(worker_idx=2) == tmp_path / "w2.json"
    assert ProfileConfig().get_save_path(worker_idx=0) == Path("./collector_profile_0.json")
    assert config.get_activities() == [torch.profiler.ProfilerActivity.CPU]
    with Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=4, total_frames=12) as collector:
        assert collector.profile_config is None
        collector.enable_profile(num_rollouts=2, warmup_rollouts=1, save_path=str(tmp_path / "t{worker_idx}.json"))
        assert (collector.profile_config.num_rollouts, collector.profile_config.warmup_rollouts) == (2, 1)
        list(collector)
        collector.disable_profile()
        assert collector.profile_config is None
    assert (tmp_path / "t0.json").exists()
