"""``start()`` / ``is_running()`` / ``async_shutdown()``: collection into a replay buffer in a
background thread, as TorchRL's collectors offer it."""

import threading
import time

import pytest
import torch
from tensordict.nn import TensorDictModule

from reap import Collector
from reap_testing import BatchSink as Sink
from reap_testing import CountingEnv, wait_until


class Scale(torch.nn.Module):
    """``action = weight`` (a parameter), whatever the observation."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([0.5]))

    def forward(self, observation):
        return (observation * 0 + self.weight).detach()


def policy():
    return TensorDictModule(Scale(), in_keys=["observation"], out_keys=["action"])


def started(sink) -> Collector:
    """An endless collector filling ``sink`` in the background, once its first batch is in."""
    collector = Collector(lambda: CountingEnv(limit=1e9), policy(), frames_per_batch=5, total_frames=-1,
                          replay_buffer=sink)
    collector.start()
    wait_until(lambda: len(sink.batches) >= 1)
    return collector


def background_threads():
    return [t for t in threading.enumerate() if t.name.startswith("reap-Collector-start")]


def test_start_fills_the_buffer_until_total_frames_then_stops():
    sink = Sink()
    collector = Collector(lambda: CountingEnv(limit=1e9), policy(), frames_per_batch=10, total_frames=100,
                          replay_buffer=sink)
    collector.start()
    wait_until(lambda: not collector.is_running())
    assert [b.numel() for b in sink.batches] == [10] * 10
    assert sink.batches[-1]["next", "observation"].flatten()[-1].item() == 50.0  # 100 steps of 0.5
    collector.async_shutdown()
    assert not background_threads()


def test_weights_pushed_while_running_reach_the_next_batches():
    sink = Sink()
    collector = started(sink)
    assert collector.is_running()
    wait_until(lambda: len(sink.batches) >= 2)
    before = len(sink.batches)
    collector.update_policy_weights_({"module.weight": torch.tensor([2.0])})  # between two batches
    after = len(sink.batches)
    wait_until(lambda: len(sink.batches) >= after + 2)
    collector.async_shutdown(timeout=10)
    assert not collector.is_running() and not background_threads()
    actions = [set(b["action"].flatten().tolist()) for b in sink.batches]
    switch = actions.index({2.0})
    assert all(a == {0.5} for a in actions[:switch]) and all(a == {2.0} for a in actions[switch:])
    assert before <= switch <= after  # the batch under way at the push kept its weights: no batch mixes
    with pytest.raises(RuntimeError, match="the collector was shut down"):
        collector.start()


def test_an_error_in_the_background_stops_it_and_async_shutdown_raises_it():
    collector = Collector(lambda: CountingEnv(limit=1e9), policy(), frames_per_batch=5, total_frames=-1,
                          replay_buffer=Sink(fail_after=3))
    with pytest.warns(RuntimeWarning, match="background collection stopped: RuntimeError\\('storage is full'\\)"):
        collector.start()
        wait_until(lambda: not collector.is_running())
    with pytest.raises(RuntimeError, match="Collector: the background collection failed: storage is full"):
        collector.async_shutdown()
    assert collector._closed and not background_threads()


def test_start_needs_a_replay_buffer():
    collector = Collector(lambda: CountingEnv(), policy(), frames_per_batch=5)
    with pytest.raises(RuntimeError, match=r"Collector.start\(\) collects into a replay buffer: build the collector with replay_buffer="):
        collector.start()
    assert not collector.is_running()
    collector.async_shutdown()  # no background collection: a plain shutdown
    assert collector._closed


def test_shutdown_while_running_waits_for_the_batch_under_way():
    sink = Sink()
    collector = started(sink)
    collector.shutdown()  # not async_shutdown: still stops the thread first
    assert not background_threads()
    assert all(b.numel() == 5 for b in sink.batches)


def test_a_collector_without_a_replay_buffer_says_so():
    from reap.collectors.base import BaseCollector

    class Bare(BaseCollector):
        def iterator(self):
            yield from ()

    with pytest.raises(RuntimeError, match=r"Bare.start\(\) collects into a replay buffer: Bare takes none, or iterate it"):
        Bare().start()


def test_pause_holds_the_background_collection():
    sink = Sink()
    collector = started(sink)
    with collector.pause():
        paused = len(sink.batches)
        time.sleep(0.3)  # a batch of 5 steps takes well under a millisecond
        assert len(sink.batches) == paused
    wait_until(lambda: len(sink.batches) > paused)  # and it goes on after the block
    collector.async_shutdown()
