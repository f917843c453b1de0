"""MultiAsyncCollector: per-worker batches, version tags, double buffering."""

import pytest
import torch

from reap import MultiCollector
from reap_mp import MultiAsyncCollector
from reap_mp.testing import constant_policy, env_fn

FAST = "forkserver"


@pytest.fixture(scope="module")
def async_collector():
    collector = MultiCollector([env_fn(batch=2), env_fn(batch=2)], constant_policy(1.0), sync=False,
                               frames_per_batch=8, mp_start_method=FAST)
    yield collector
    collector.shutdown()


def test_batches_name_their_worker(async_collector):
    assert isinstance(async_collector, MultiAsyncCollector)
    it = iter(async_collector)
    seen = set()
    for _ in range(8):
        batch = next(it)
        assert batch.batch_size == (2, 4)
        worker = batch["collector", "worker_id"]
        assert worker.unique().numel() == 1
        seen.add(int(worker[0, 0]))
    assert seen == {0, 1}


def test_version_tags_match_the_weights_used(async_collector):
    it = iter(async_collector)
    for step in range(2, 6):
        async_collector.update_policy_weights_({"weight": torch.tensor([float(step)])})
        version = async_collector.policy_version
        # in-flight batches may predate the update; each says which version made it
        for _ in range(6):
            batch = next(it)
            tag = int(batch["collector", "policy_version"][0, 0])
            assert (batch["collector", "policy_version"] == tag).all()
            if tag == version:
                assert (batch["action"] == float(step)).all()
            else:
                assert tag < version and not (batch["action"] == float(step)).any()
        # two rollouts per worker were queued at most: by now every worker runs the new version
        assert tag == version


def test_batches_are_copies_not_shared_slots(async_collector):
    it = iter(async_collector)
    first = next(it)
    kept = first["next", "observation"].clone()
    for _ in range(4):
        next(it)
    assert torch.equal(first["next", "observation"], kept)
    assert not first["next", "observation"].is_shared()


def test_update_at_each_batch_targets_the_delivering_worker():
    trainer = constant_policy(0.0)
    with MultiAsyncCollector([env_fn(), env_fn()], trainer, frames_per_batch=4, total_frames=40,
                             update_at_each_batch=True, mp_start_method=FAST) as collector:
        versions = []
        for batch in collector:
            versions.append(int(batch["collector", "policy_version"][0]))
        assert collector.frames == 40
        assert len(versions) == 10
        assert collector.policy_version == 10  # one push per delivered batch
        assert versions == sorted(versions) or max(versions) > 0
