"""TorchRL's ``preemptive_threshold``: a sync batch ends once that share of the workers is done;
the slower workers stop at their next step and their steps not collected are marked."""

import pytest
import torch

from reap_mp import MultiAsyncCollector, MultiSyncCollector
from reap_testing import env_fn

FAST = "forkserver"
STEPS = 20
# two fast workers, two that would need STEPS * 0.5 s for a whole rollout
ENVS = [env_fn(), env_fn(), env_fn(step_sleep=0.5), env_fn(step_sleep=0.5)]


def _collected(traj_ids: torch.Tensor) -> int:
    """The steps of one worker's row that were collected: they must be a prefix."""
    n = int((traj_ids != -1).sum())
    assert (traj_ids[:n] != -1).all() and (traj_ids[n:] == -1).all(), traj_ids
    return n


def test_stack_marks_the_slow_workers_steps_and_they_go_on_where_they_stopped():
    with MultiSyncCollector(ENVS, None, frames_per_batch=4 * STEPS, total_frames=-1, preemptive_threshold=0.5,
                            cat_results="stack", mp_start_method=FAST) as c:
        assert c.preemptive_threshold == 0.5 and c.interruptor is not None
        it = iter(c)
        first = next(it)
        assert c.frames == int(first["collector", "mask"].sum())
        second = next(it)
    for batch in (first, second):
        traj_ids = batch["collector", "traj_ids"]
        assert batch.batch_size == (4, STEPS)
        assert torch.equal(batch["collector", "mask"], traj_ids != -1)
        assert [_collected(traj_ids[w]) for w in (0, 1)] == [STEPS, STEPS]
        assert all(1 <= _collected(traj_ids[w]) < STEPS for w in (2, 3))
    for w in (2, 3):  # a stopped worker's next rollout starts from the step after its last one
        last = _collected(first["collector", "traj_ids"][w]) - 1
        assert torch.equal(second["observation"][w, 0], first["next", "observation"][w, last])


def test_other_cat_results_drop_the_steps_not_collected():
    with MultiSyncCollector(ENVS, None, frames_per_batch=4 * STEPS, total_frames=-1, preemptive_threshold=0.5,
                            cat_results=-1, mp_start_method=FAST) as c:
        batch = next(iter(c))
        assert c.frames == batch.numel()
    assert 2 * STEPS + 2 <= batch.numel() < 4 * STEPS
    assert (batch["collector", "traj_ids"] != -1).all() and ("collector", "mask") not in batch.keys(True)


def test_threshold_one_never_preempts():
    with MultiSyncCollector([env_fn(), env_fn()], None, frames_per_batch=8, total_frames=8, preemptive_threshold=1.0,
                            cat_results="stack", mp_start_method=FAST) as c:
        assert c.interruptor is None and c.preemptive_threshold == 1.0
        batch = next(iter(c))
    assert (batch["collector", "traj_ids"] != -1).all() and ("collector", "mask") not in batch.keys(True)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"preemptive_threshold": -0.1}, ValueError, r"preemptive_threshold must be between 0.0 and 1.0 .* got -0.1"),
    ({"preemptive_threshold": 1.5}, ValueError, r"preemptive_threshold must be between 0.0 and 1.0 .* got 1.5"),
    ({"preemptive_threshold": 0.5, "track_traj_ids": False}, ValueError, r"it needs track_traj_ids=True"),
])
def test_bad_thresholds_are_refused_before_any_worker_starts(kwargs, error, match):
    with pytest.raises(error, match=match):
        MultiSyncCollector([env_fn(), env_fn()], None, frames_per_batch=8, mp_start_method=FAST, **kwargs)


def test_async_collection_refuses_a_threshold():
    with pytest.raises(ValueError, match=r"preemptive_threshold=0.5 stops the slow workers of a sync batch.*"
                                         r"Use MultiSyncCollector"):
        MultiAsyncCollector([env_fn(), env_fn()], None, frames_per_batch=8, preemptive_threshold=0.5,
                            mp_start_method=FAST)


def test_a_replay_buffer_gets_only_the_steps_collected():
    from reap.data import LazyTensorStorage, TensorDictReplayBuffer

    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(1000))
    with MultiSyncCollector(ENVS, None, frames_per_batch=4 * STEPS, total_frames=4 * STEPS, preemptive_threshold=0.5,
                            cat_results="stack", replay_buffer=rb, mp_start_method=FAST) as c:
        assert next(iter(c)) is None
        assert len(rb) == c.frames < 4 * STEPS
    assert (rb[:]["collector", "traj_ids"] != -1).all()
