"""The pieces every multi-worker backend shares: CollectorWorker (the worker's side) and
WorkerWeights (what the driver keeps per worker when requests carry the weights)."""

import pytest
import torch
from tensordict.nn import TensorDictModule

from reap import Collector, GymEnv
from reap.collectors.bookkeeping import WorkerWeights
from reap.collectors.worker import (
    TRAJ_ID_BLOCK,
    TRAJ_KEY,
    VERSION_KEY,
    WORKER_KEY,
    CollectorWorker,
    format_worker_error,
)


def constant_policy(value: float) -> TensorDictModule:
    """Pendulum policy whose action is always ``value`` (zero weight, bias ``value``)."""
    net = torch.nn.Linear(3, 1)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.fill_(value)
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def weights_for(value: float) -> dict:
    return {"module.weight": torch.zeros(1, 3), "module.bias": torch.tensor([value])}


def actions(batch) -> list[float]:
    return sorted(set(batch["action"].flatten().tolist()))


@pytest.fixture
def worker():
    w = CollectorWorker(3, Collector(GymEnv("Pendulum-v1", num_envs=2), constant_policy(0.5), frames_per_batch=8))
    yield w
    w.close()


def test_weights_wait_for_the_next_rollout_and_the_latest_push_wins(worker):
    policy = worker.collector.policy
    worker.receive_weights(weights_for(1.0), version=1)
    worker.receive_weights(weights_for(-1.0), version=2)  # replaces version 1 before it was loaded
    assert policy.module.bias.item() == 0.5  # nothing loaded between rollouts until collect()
    batch = worker.collect()
    assert batch.batch_size == torch.Size([2, 4])
    assert actions(batch) == [-1.0]
    assert batch[VERSION_KEY].unique().tolist() == [2] and batch[WORKER_KEY].unique().tolist() == [3]
    assert (worker.version, worker.batches_since_update) == (2, 1)
    assert actions(worker.collect()) == [-1.0] and worker.batches_since_update == 2
    worker.receive_weights(weights_for(0.25), version=3)
    assert worker.batches_since_update == 2  # counts from the rollout that loads them
    assert actions(worker.collect()) == [0.25] and (worker.version, worker.batches_since_update) == (3, 1)


def test_collect_into_fills_a_slot_in_place_with_its_tags(worker):
    slot = worker.new_slot()
    assert slot[WORKER_KEY].unique().tolist() == [3] and slot[VERSION_KEY].unique().tolist() == [0]
    worker.receive_weights(weights_for(1.5), version=7)
    assert worker.collect_into(slot) is slot
    assert actions(slot) == [1.5] and slot[VERSION_KEY].unique().tolist() == [7]
    assert slot[WORKER_KEY].unique().tolist() == [3]
    assert set(slot.keys(True, True)) == set(worker.new_slot().keys(True, True))


def test_a_receiver_supplies_the_weights_and_their_version():
    class Counter:  # the receiver protocol: poll() loads what arrived, returns its version
        def __init__(self):
            self.version = 0

        def poll(self):
            return self.version

    receiver = Counter()
    worker = CollectorWorker(0, Collector(GymEnv("Pendulum-v1"), constant_policy(0.5), frames_per_batch=3),
                             receiver=receiver)
    try:
        slot = worker.new_slot()
        worker.collect_into(slot)
        worker.collect_into(slot)
        assert (worker.version, worker.batches_since_update) == (0, 2)
        receiver.version = 4
        worker.collect_into(slot)
        assert slot[VERSION_KEY].tolist() == [4, 4, 4] and (worker.version, worker.batches_since_update) == (4, 1)
    finally:
        worker.close()


def test_seed_state_plugin_options_and_close():
    def make(idx):
        return CollectorWorker(idx, Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=4))

    a, b = make(0), make(1)
    try:
        assert a.set_seed(11) == b.set_seed(11)
        assert torch.initial_seed() == 11  # the policy's sampling is seeded too
        first, second = a.collect(), b.collect()
        assert torch.equal(first["observation"], second["observation"])
        assert torch.equal(first["action"], second["action"])  # random actions, same generator seed
        assert first[WORKER_KEY].tolist() == [0] * 4 and second[WORKER_KEY].tolist() == [1] * 4
        state = a.state_dict()
        assert state["frames"] == 4
        b.load_state_dict({**state, "frames": 40})
        assert b.collector.frames == 40
        a.set_plugin_options("demo", {"level": 2})
        assert a.collector.plugin_options == {"demo": {"level": 2}}
        assert a.plugin_report("demo") == a.collector.plugin_report("demo")
    finally:
        a.close()
        b.close()
    collector = b.collector
    assert collector is None
    b.close()  # twice is fine


def test_multi_worker_collectors_keep_their_own_worker_ids():
    class Outer:  # no collect_into: a multi-worker collector whose batches say which sub-worker
        def __iter__(self):
            from tensordict import TensorDict

            while True:
                yield TensorDict({WORKER_KEY: torch.tensor([0, 1])}, batch_size=[2])

    worker = CollectorWorker(5, Outer())
    assert not worker.tag_worker_id
    worker.receive_weights({}, 1)
    with pytest.raises(AttributeError):  # Outer has no update_policy_weights_
        worker.collect()
    worker = CollectorWorker(5, Outer(), apply_weights=lambda collector, weights: None)
    worker.receive_weights({}, 1)
    batch = worker.collect()
    assert batch[WORKER_KEY].tolist() == [0, 1] and batch[VERSION_KEY].tolist() == [1, 1]


def test_errors_are_text_naming_the_worker():
    with pytest.raises(ValueError, match="worker_idx must be a non-negative int, got -1"):
        CollectorWorker(-1, None)

    def failing():
        raise KeyError("obs")

    try:
        failing()
    except KeyError as exc:
        text, tb = format_worker_error(exc, 4, "collector actor")
    assert text == "collector actor 4 raised KeyError: 'obs'"
    assert "in failing" in tb and tb.rstrip().endswith("KeyError: 'obs'")


def test_worker_weights_sends_each_version_once_and_bounds_staleness():
    ww = WorkerWeights(3, max_interval=1)
    assert [ww.next_request(i) for i in range(3)] == [(None, 0)] * 3
    assert ww.push("a", [0, 2]) == 1 and ww.version == 1
    assert ww.next_request(0) == ("a", 1) and ww.next_request(0) == (None, 1)
    assert ww.next_request(1) == (None, 0)  # not pushed to worker 1
    assert ww.push("b", [1]) == 2
    assert ww.next_request(2) == ("a", 1) and ww.next_request(1) == ("b", 2)
    for i in (0, 0, 1):
        ww.delivered(i)
    assert ww.due() == [0] and ww.due([1, 2]) == [] and ww.batches_since_update(0) == 2
    ww.push("c", ww.due())  # a refresh resets the count once it is sent
    assert ww.batches_since_update(0) == 2 and ww.next_request(0) == ("c", 3)
    assert ww.batches_since_update(0) == 0 and ww.due() == []
    ww.max_interval = -1
    for _ in range(5):
        ww.delivered(1)
    assert ww.due() == []


def test_worker_weights_replaced_worker_gets_its_latest_weights_again():
    ww = WorkerWeights(2)
    ww.push("w1", [0, 1])
    ww.next_request(0)
    ww.delivered(0)
    ww.replaced(0)
    assert ww.batches_since_update(0) == 0 and ww.next_request(0) == ("w1", 1)
    assert ww.add_worker() == 2 and ww.num_workers == 3
    assert ww.next_request(2) == (None, 0)  # a new worker runs what it was built with
    ww.replaced(2)
    assert ww.next_request(2) == (None, 0)


def test_traj_id_offset_gives_each_worker_its_own_ids():
    def ids(offset):
        worker = CollectorWorker(0, Collector(GymEnv("Pendulum-v1", num_envs=2), None, frames_per_batch=8,
                                              max_frames_per_traj=2), traj_id_offset=offset)
        try:
            return worker.collect()[TRAJ_KEY]
        finally:
            worker.close()

    plain, shifted = ids(0), ids(3 * TRAJ_ID_BLOCK)
    assert plain.flatten().tolist() == [0, 0, 2, 2, 1, 1, 3, 3]  # env 0's then env 1's steps
    assert torch.equal(shifted, plain + 3 * TRAJ_ID_BLOCK)


# ---- serve_collect: one request of a remote driver, with prefetching -----------------------------
def test_serve_collect_prefetch_returns_the_rollout_started_ahead_and_delays_weights(worker):
    first = worker.serve_collect(None, 0, prefetch=True)
    # the second request's weights arrive while the rollout started ahead runs: that rollout's
    # batch keeps the old weights and version, the one after it runs the new ones
    second = worker.serve_collect(weights_for(-1.0), 4, prefetch=True)
    third = worker.serve_collect(None, 4)
    fourth = worker.serve_collect(weights_for(1.5), 5)  # nothing ahead: loaded before this rollout
    assert [actions(b) for b in (first, second, third, fourth)] == [[0.5], [0.5], [-1.0], [1.5]]
    assert [b[VERSION_KEY].unique().tolist() for b in (first, second, third, fourth)] == [[0], [0], [4], [5]]
    # four consecutive rollouts of the same envs: each batch starts where the previous ended
    for a, b in zip((first, second, third), (second, third, fourth)):
        assert torch.equal(a["next", "observation"][:, -1], b["observation"][:, 0])
    assert worker._ahead is None


def test_serve_collect_set_seed_and_load_state_drop_the_rollout_ahead():
    def make():
        return CollectorWorker(0, Collector(GymEnv("Pendulum-v1"), constant_policy(0.0), frames_per_batch=4))

    reference, worker = make(), make()
    try:
        reference.set_seed(11)
        expected = reference.serve_collect()["observation"]
        worker.serve_collect(prefetch=True)
        worker.set_seed(11)  # the rollout ahead predates the seed: it is dropped
        assert torch.equal(worker.serve_collect()["observation"], expected)
        worker.serve_collect(prefetch=True)
        state = reference.state_dict()  # waits for nothing: no rollout ahead there
        worker.settle()  # waits, keeps the batch
        assert worker._ahead is not None and worker._ahead.done()
        worker.load_state_dict(state)
        assert worker._ahead is None
    finally:
        reference.close()
        worker.close()


class TrippedPolicy(torch.nn.Module):
    """A Pendulum policy that runs ``then()`` on each call past its first ``limit`` calls."""

    def __init__(self, then):
        super().__init__()
        self.linear = torch.nn.Linear(3, 1)
        self.then = then
        self.calls, self.limit = 0, None

    def forward(self, observation):
        self.calls += 1
        if self.limit is not None and self.calls > self.limit:
            self.then()
        return self.linear(observation)


def _broke():
    raise RuntimeError("policy broke")


def test_serve_collect_error_in_the_rollout_ahead_reaches_the_next_request():
    policy = TensorDictModule(TrippedPolicy(_broke), in_keys=["observation"], out_keys=["action"])
    worker = CollectorWorker(2, Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=4))
    policy.module.limit = policy.module.calls + 8  # 4 steps a batch: the third batch fails
    try:
        worker.serve_collect(prefetch=True)
        worker.serve_collect(prefetch=True)  # the second batch; the third fails ahead
        worker.settle()  # the error stays in the rollout for the next request
        with pytest.raises(RuntimeError, match="policy broke"):
            worker.serve_collect()
    finally:
        worker.close()


def test_close_waits_for_the_rollout_ahead_and_stops_its_thread():
    import threading

    worker = CollectorWorker(0, Collector(GymEnv("Pendulum-v1"), constant_policy(0.0), frames_per_batch=64))
    worker.serve_collect(prefetch=True)
    assert any(t.name.startswith("reap-prefetch-0") for t in threading.enumerate())
    worker.close()
    worker.close()  # once
    assert worker.collector is None and worker._ahead is None
    for t in threading.enumerate():
        if t.name.startswith("reap-prefetch-0"):
            t.join(5.0)
            assert not t.is_alive()


def test_serve_collect_times_out_on_a_rollout_ahead_that_does_not_end():
    import threading

    release = threading.Event()

    policy = TensorDictModule(TrippedPolicy(lambda: release.wait(10.0)), in_keys=["observation"], out_keys=["action"])
    worker = CollectorWorker(1, Collector(GymEnv("Pendulum-v1"), policy, frames_per_batch=4))
    try:
        policy.module.limit = policy.module.calls + 4  # the rollout started ahead stalls
        worker.serve_collect(prefetch=True)
        with pytest.raises(TimeoutError, match=r"the rollout started ahead did not end within 0.2 s"):
            worker.serve_collect(timeout=0.2)
        release.set()  # it ends; the next request gets its batch
        assert worker.serve_collect(timeout=10.0).numel() == 4
    finally:
        release.set()
        worker.close()
