"""reap-threads through reap's public entry points: weights, a slow trainer, backend dispatch,
arguments and ``reap plugins`` (the layout, seeds, hooks, faults and shutdown every backend
shares are reap_testing's contract, test_contract.py)."""

import doctest
import importlib
import json
import os
import subprocess
import sys
import threading
import time

import pytest
import torch
from tensordict import TensorDict

from reap import Collector, MultiCollector
from reap.cli import main as reap_main
from reap.plugins import get_weight_sync_scheme
from reap_testing import ConstantPolicy, EchoEnv, constant_policy, env_fn
from reap_threads import (
    ThreadAsyncCollector,
    ThreadSyncCollector,
    ThreadWeightSyncScheme,
)


def _worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("reap-threads-worker")]


@pytest.fixture(autouse=True)
def no_thread_left():
    yield
    assert not _worker_threads(), "a worker thread outlived its collector"


def test_weights_reach_every_worker_at_its_next_rollout():
    policy = constant_policy(0.0)
    with ThreadSyncCollector([env_fn(batch=2)] * 2, policy, worker_tags=True, frames_per_batch=8) as collector:
        first = collector.next()
        assert (first["action"] == 0).all() and (first["collector", "policy_version"] == 0).all()
        collector.update_policy_weights_(ConstantPolicy(2.0).as_module())
        batch = collector.next()
        assert (batch["action"] == 2.0).all() and (batch["collector", "policy_version"] == 1).all()
        collector.update_policy_weights_(TensorDict({"module": {"weight": torch.tensor([3.0])}}), worker_ids=[1])
        batch = collector.next()
        assert batch["action"][:, 0, 0, 0].tolist() == [2.0, 3.0]
        assert batch["collector", "policy_version"][:, 0, 0].tolist() == [1, 2]
        # no argument: the trainer's policy is read, copied at push time (later edits do not leak)
        with torch.no_grad():
            policy.module.weight.fill_(5.0)
        collector.update_policy_weights_()
        with torch.no_grad():
            policy.module.weight.fill_(6.0)
        assert (collector.next()["action"] == 5.0).all()
        with pytest.raises(ValueError, match="worker_ids"):
            collector.update_policy_weights_(policy, worker_ids=[2])
        with pytest.raises(ValueError, match="update_policy_weights_"):
            collector.update_policy_weights_({"other": torch.zeros(1)})


def test_a_slow_trainer_is_not_taken_for_a_stuck_worker():
    """Deadlines count from what the driver has read: batches waiting in the queue are progress."""
    with ThreadAsyncCollector([env_fn(batch=2)] * 2, None, frames_per_batch=4, total_frames=16,
                              worker_timeout=0.3) as collector:
        for _ in collector:
            time.sleep(0.6)  # training, longer than worker_timeout
    assert collector.frames == 16


def test_backend_dispatch_like_the_other_backends():
    policy = constant_policy(1.0)
    with Collector(env_fn(batch=2), policy, backend="threads", num_collectors=2, frames_per_batch=8,
                   total_frames=16, backend_options={"worker_timeout": 30}) as collector:  # async, as TorchRL's
        assert isinstance(collector, ThreadAsyncCollector) and collector.worker_timeout == 30
        assert [b.batch_size for b in collector] == [torch.Size([2, 4])] * 2
    with Collector(env_fn(batch=2), policy, backend="threads", num_workers=2, frames_per_batch=16,
                   total_frames=32, sync=True) as collector:
        assert isinstance(collector, ThreadSyncCollector) and isinstance(collector, MultiCollector)
        assert len(collector) == 2
        assert [b.batch_size for b in collector] == [torch.Size([2, 2, 4])] * 2
    with MultiCollector([env_fn(), env_fn()], policy, backend="threads", sync=False,
                        frames_per_batch=5, total_frames=10) as collector:
        assert isinstance(collector, ThreadAsyncCollector)
        assert [b.batch_size for b in collector] == [torch.Size([5])] * 2
    assert isinstance(get_weight_sync_scheme("threads").cls(), ThreadWeightSyncScheme)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="frames_per_batch must be a positive int"):
        ThreadSyncCollector([env_fn()], None, frames_per_batch=0)
    with pytest.raises(ValueError, match="cat_results"):
        ThreadSyncCollector([env_fn()], None, frames_per_batch=4, cat_results="glue")
    with pytest.raises(ValueError, match=r"weight_sync_schemes must be ThreadWeightSyncScheme\(\) \('threads'\)"):
        ThreadSyncCollector([env_fn()], None, frames_per_batch=4, weight_sync_schemes="pipe")
    with pytest.raises(TypeError, match="not an env instance"):
        ThreadSyncCollector(EchoEnv(), None, frames_per_batch=4)
    with pytest.raises(ValueError, match="worker_timeout"):
        ThreadSyncCollector([env_fn()], None, frames_per_batch=4, worker_timeout=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        ThreadSyncCollector([env_fn()], None, frames_per_batch=4, bogus=1)


def test_reap_plugins_lists_it(capsys):
    reap_main(["plugins"])
    out = capsys.readouterr().out
    assert "threads: reap-threads " in out
    block = out[out.index("threads: reap-threads "):].split("\n")[1:3]
    assert block == ["    collector backends: threads", "    weight-sync schemes: threads"]


def test_reap_collect_runs_on_the_threads_backend(tmp_path, capsys):
    reap_main(["collect", "--env", "CartPole-v1", "--frames", "2000", "--backend", "threads", "--workers", "2",
              "--no-progress", "--out", str(tmp_path / "run")])
    assert capsys.readouterr().out.startswith("collected 2000 frames in ")
    meta = json.loads((tmp_path / "run" / "reap_meta.json").read_text())
    assert (meta["backend"], meta["workers"], meta["frames"], meta["complete"]) == ("threads", 2, 2000, True)


@pytest.mark.slow
def test_without_the_plugin_the_backend_is_a_clear_error():
    code = ("from reap import Collector\nfrom reap_testing import env_fn\n"
            "Collector(env_fn(), None, backend='threads', frames_per_batch=4)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "REAP_DISABLE_PLUGINS": "threads"})
    assert out.returncode != 0
    assert "no collector backend named 'threads' is installed" in out.stderr


@pytest.mark.parametrize("name", ["reap_threads.collectors", "reap_threads.weight_sync", "reap_threads.plugin"])
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_set_truncated_reaches_the_worker_collectors():
    with ThreadAsyncCollector([env_fn(batch=2, episode_len=100)] * 2, constant_policy(), frames_per_batch=8,
                              total_frames=16, set_truncated=True) as collector:
        for batch in collector:  # [2 envs, 4 steps] from either worker
            assert batch["next", "truncated"].squeeze(-1).tolist() == [[False, False, False, True]] * 2


def test_start_collects_into_the_buffer_in_the_background():
    from reap_testing import BatchSink, wait_until

    sink = BatchSink()
    collector = ThreadSyncCollector([env_fn(batch=2, episode_len=100)] * 2, constant_policy(1.0), frames_per_batch=16,
                                    total_frames=64, replay_buffer=sink)
    collector.start()
    wait_until(lambda: not collector.is_running(), what="the end of the background collection")
    collector.async_shutdown()
    # each worker's batch is written, as TorchRL's workers write theirs: 4 batches of 2 workers
    assert [b.batch_size for b in sink.batches] == [torch.Size([2, 4])] * 8
    assert not _worker_threads()


def test_preemptive_threshold_stops_the_slow_threads():
    """The same interruptor as the worker processes': threads share it as it is."""
    envs = [env_fn(), env_fn(step_sleep=0.5)]  # the slow one would take 10 s for its 20 steps
    with ThreadSyncCollector(envs, None, frames_per_batch=40, preemptive_threshold=0.5, cat_results="stack") as c:
        batch = c.next()
    traj_ids = batch["collector", "traj_ids"]
    slow = int((traj_ids[1] != -1).sum())
    assert (traj_ids[0] != -1).all() and 1 <= slow < 20 and (traj_ids[1, slow:] == -1).all()
    assert torch.equal(batch["collector", "mask"], traj_ids != -1)
