"""TorchRL's ``pre_collect_hook``/``post_collect_hook`` run in the workers of the multi-process
collectors (set at construction or later), and ``track_policy_version`` tags their batches."""

import os

import pytest
import torch
from tensordict.nn import TensorDictModule

from reap_mp import MultiAsyncCollector, MultiSyncCollector
from reap_testing import env_fn

FAST = "forkserver"


def _recorder(folder, tag):
    """A hook that appends ``tag`` (and the batch size) to a file named after the process."""
    def record(*batch):
        with open(os.path.join(folder, str(os.getpid())), "a") as f:
            f.write(f"{tag}{batch[0].numel() if batch else ''}\n")
    return record


def _calls(folder):
    return {int(pid): open(os.path.join(folder, pid)).read().split() for pid in os.listdir(folder)}


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_hooks_run_in_each_worker(cls, tmp_path):
    with cls([env_fn(), env_fn()], None, frames_per_batch=8, total_frames=32, mp_start_method=FAST,
             pre_collect_hook=_recorder(tmp_path, "pre"), post_collect_hook=_recorder(tmp_path, "post")) as c:
        assert c.pre_collect_hook is not None
        list(c)
        pids = set(c.worker_pids)
    calls = _calls(tmp_path)
    assert set(calls) == pids and os.getpid() not in calls
    per_batch = "4" if cls is MultiSyncCollector else "8"  # a sync batch is split between the two workers
    for worker_calls in calls.values():
        assert worker_calls[:2] == ["pre", f"post{per_batch}"]
        assert worker_calls.count("pre") == worker_calls.count(f"post{per_batch}") >= 1


def test_hooks_set_after_construction_reach_the_workers(tmp_path):
    with MultiSyncCollector([env_fn(), env_fn()], None, frames_per_batch=8, total_frames=16,
                            mp_start_method=FAST) as c:
        c.pre_collect_hook = _recorder(tmp_path, "pre")
        c.set_post_collect_hook(_recorder(tmp_path, "post"))
        assert len(list(c)) == 2
        pids = set(c.worker_pids)
    assert {pid: calls for pid, calls in _calls(tmp_path).items()} == {pid: ["pre", "post4"] * 2 for pid in pids}


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_track_policy_version_follows_weight_updates(cls):
    policy = TensorDictModule(torch.nn.Linear(2, 1), in_keys=["observation"], out_keys=["action"])
    with cls([env_fn(), env_fn()], policy, frames_per_batch=8, total_frames=-1, track_policy_version=True,
             mp_start_method=FAST) as c:
        it = iter(c)
        first = next(it)
        c.update_policy_weights_(policy)
        for _ in range(12):  # async: batches collected or prefetched before the update come first
            batch = next(it)
            if (batch["next", "policy_version"] == 1).all():
                break
    assert first["policy_version"].dtype == torch.int64 and first["policy_version"].shape == first.batch_size
    assert (first["next", "policy_version"] == 0).all()
    assert (batch["policy_version"] == 1).all() and (batch["next", "policy_version"] == 1).all()
