"""``start()`` on multi-process collectors: workers fill a replay buffer while the trainer pushes
weights, and ``async_shutdown()`` leaves no process or segment behind."""

import threading

import pytest
import torch

from reap_mp import MultiAsyncCollector, MultiSyncCollector
from reap_testing import BatchSink as Sink
from reap_testing import (
    constant_policy,
    env_fn,
    pid_alive,
    shm_left_by_us,
    shm_segments,
    wait_until,
)


@pytest.mark.parametrize("cls, scheme", [(MultiSyncCollector, "pipe"), (MultiAsyncCollector, "shared_mem")])
def test_start_collects_in_the_background_and_weights_reach_later_batches(cls, scheme, shm_before):
    sink = Sink()
    collector = cls([env_fn(batch=2, episode_len=100)] * 2, constant_policy(1.0), worker_tags=True, frames_per_batch=16,
                    total_frames=-1, replay_buffer=sink, weight_sync_schemes={"policy": scheme},
                    mp_start_method="forkserver")
    pids = list(collector.worker_pids)
    collector.start()
    wait_until(lambda: len(sink.batches) >= 2)
    collector.update_policy_weights_({"module.weight": torch.tensor([3.0])})
    version = collector.policy_version
    wait_until(lambda: any((b["collector", "policy_version"] == version).all() for b in sink.batches))
    collector.async_shutdown(timeout=30)
    assert not collector.is_running()
    assert not [t for t in threading.enumerate() if t.name.startswith(f"reap-{cls.__name__}-start")]
    for batch in sink.batches:  # every batch says which weights made it, and its actions agree
        tag = batch["collector", "policy_version"]
        assert (tag == tag.flatten()[0]).all()
        assert (batch["action"] == (3.0 if tag.flatten()[0] == version else 1.0)).all()
    assert not any(pid_alive(p) for p in pids)
    assert not shm_left_by_us(shm_segments() - shm_before)


def test_a_worker_dying_in_the_background_surfaces_in_async_shutdown(shm_before):
    sink = Sink()
    collector = MultiAsyncCollector([env_fn(), env_fn(die_at=30)], constant_policy(), frames_per_batch=4,
                                    total_frames=-1, replay_buffer=sink, mp_start_method="forkserver")
    pids = list(collector.worker_pids)
    with pytest.warns(RuntimeWarning, match="MultiAsyncCollector: background collection stopped: WorkerError"):
        collector.start()
        wait_until(lambda: not collector.is_running(), what="the background collection to stop")
    with pytest.raises(RuntimeError, match=r"the background collection failed: .*worker 1") as caught:
        collector.async_shutdown()
    assert type(caught.value.__cause__).__name__ == "WorkerError"
    assert len(sink.batches) >= 1  # the batches before the death stay in the buffer
    assert not any(pid_alive(p) for p in pids)
    assert not shm_left_by_us(shm_segments() - shm_before)
