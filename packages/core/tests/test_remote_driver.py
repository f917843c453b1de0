"""CollectorDriver, the driver every multi-worker backend shares, on workers in this process:
each request runs CollectorWorker.serve_collect at once (real collectors on real gymnasium envs;
only the transport is a direct call), so the requests the driver makes can be checked one by
one. The backends' own tests (and reap_testing's contract suite) drive it across processes,
threads, Ray actors and torch.distributed ranks."""

import pytest
import torch

from reap import Collector, GymEnv
from reap.collectors.driver import CollectorDriver
from reap.collectors.worker import VERSION_KEY, WORKER_KEY, CollectorWorker, worker_seed
from reap.weight_update import WeightSyncScheme

from .test_worker_bookkeeping import constant_policy, weights_for


class InProcessCollector(CollectorDriver):
    """Workers in this process; ``requests`` records (worker, version sent, weights sent, prefetch)."""

    def __init__(self, num_workers, policy, *, frames_per_batch, total_frames, sync=False, **kwargs):
        self.policy = policy
        self.per_worker = frames_per_batch // num_workers if sync else frames_per_batch
        self.workers = [None] * num_workers
        self.requests, self.answers = [], []
        kwargs.setdefault("worker_tags", True)  # the tests read which worker and weights made a batch
        self._init_driver(num_workers, sync=sync, frames_per_batch=frames_per_batch, total_frames=total_frames,
                          scheme=WeightSyncScheme(), **kwargs)
        self._start_workers()

    def _launch_worker(self, idx):
        collector = Collector(GymEnv("Pendulum-v1"), constant_policy(0.0), frames_per_batch=self.per_worker)
        self.workers[idx] = CollectorWorker(idx, collector)

    def _await_worker(self, idx):
        return self.workers[idx].ready_info()

    def _send_collect(self, idx, weights, version, prefetch):
        self.requests.append((idx, version, weights is not None, prefetch))
        self.answers.append((idx, self.workers[idx].serve_collect(weights, version, prefetch=prefetch)))

    def _receive(self, timeout):
        return self.answers.pop(0) if self.answers else None

    def _call(self, idx, method, args):
        return getattr(self.workers[idx], method)(*args)

    def _kill_worker(self, idx):
        self.workers[idx].close()

    def _close_workers(self, timeout):
        for worker in self.workers:
            worker.close()


def test_async_prefetches_but_starts_no_rollout_nobody_fetches():
    with InProcessCollector(2, constant_policy(0.0), frames_per_batch=4, total_frames=24) as collector:
        batches = list(collector)
        assert [b.numel() for b in batches] == [4] * 6
        assert [b[WORKER_KEY][0].item() for b in batches] == [0, 1, 0, 1, 0, 1]
        assert [r[3] for r in collector.requests] == [True, True, True, True, False, False]
        assert all(w._ahead is None for w in collector.workers)


def test_weights_pushed_during_a_prefetched_rollout_reach_the_rollout_after_it():
    with InProcessCollector(1, constant_policy(0.0), frames_per_batch=4, total_frames=20) as collector:
        got = []
        for batch in collector:
            got.append((batch[VERSION_KEY].unique().item(), batch["action"].unique().item()))
            if len(got) == 1:
                collector.update_policy_weights_(weights_for(1.0))
        # the request for batch 2 left before the push (asked before batch 1 is yielded) and
        # started batch 3; version 1 goes with the request for batch 3 and runs from batch 4
        assert got == [(0, 0.0), (0, 0.0), (0, 0.0), (1, 1.0), (1, 1.0)]
        assert collector.policy_version == 1


def test_max_weight_update_interval_counts_the_prefetched_rollout():
    policy = constant_policy(0.0)
    with InProcessCollector(1, policy, frames_per_batch=4, total_frames=4 * 9,
                            max_weight_update_interval=2) as collector:
        versions = []
        for batch in collector:
            versions.append(batch[VERSION_KEY].unique().item())
            with torch.no_grad():
                policy.module.bias += 1.0  # the trainer moves on; no explicit update
        # as TorchRL's: fresh weights once a worker delivered more than 2 batches on its own, so
        # at most 3 batches on the same weights, though each rollout starts one request early
        assert versions == [0, 0, 0, 1, 1, 1, 2, 2, 2]
        assert [r[2] for r in collector.requests] == [False, False, True, False, False, True, False, False, False]


def test_update_after_each_batch_and_zero_interval_never_prefetch():
    for kwargs in ({"update_after_each_batch": True}, {"max_weight_update_interval": 0}):
        policy = constant_policy(0.0)
        with InProcessCollector(2, policy, frames_per_batch=4, total_frames=16, **kwargs) as collector:
            got = []
            for batch in collector:
                got.append(batch["action"].unique().item())
                with torch.no_grad():
                    policy.module.bias += 1.0
            assert not any(r[3] for r in collector.requests), kwargs
            # each request carries the central policy as it is when the request is sent: after the
            # trainer's step with update_after_each_batch, before it with max_weight_update_interval=0
            assert got == ([0.0, 0.0, 1.0, 2.0] if "update_after_each_batch" in kwargs else [0.0, 0.0, 0.0, 1.0])


def test_pause_twice_with_a_batch_between_keeps_every_batch():
    with InProcessCollector(2, constant_policy(0.0), frames_per_batch=4, total_frames=-1) as collector:
        it = iter(collector)
        next(it)
        with collector.pause():
            assert all(w._ahead is None or w._ahead.done() for w in collector.workers)
        next(it)  # one drained batch used, one request sent again
        with collector.pause():  # drains what is in flight, keeps the drained one
            assert len(collector._ready) == 2
        assert [next(it)[WORKER_KEY][0].item() for _ in range(2)] == [0, 1]


def test_set_seed_drops_the_batches_collected_before_it():
    expected = {}
    for idx in range(2):  # what worker idx collects first after set_seed(3)
        reference = CollectorWorker(idx, Collector(GymEnv("Pendulum-v1"), constant_policy(0.0), frames_per_batch=4))
        reference.set_seed(worker_seed(3, idx))
        expected[idx] = reference.serve_collect()["observation"]
        reference.close()
    with InProcessCollector(2, constant_policy(0.0), frames_per_batch=4, total_frames=-1) as collector:
        it = iter(collector)
        next(it)
        collector.set_seed(3)  # both workers' next batches were asked before it: dropped, asked again
        assert collector._inflight == {0, 1} and not collector._ready
        for _ in range(2):
            batch = next(it)
            idx = batch[WORKER_KEY][0].item()
            assert torch.equal(batch["observation"], expected.pop(idx))
        assert not expected
        with pytest.raises(TypeError, match="seed must be an int"):
            collector.set_seed("3")


def test_sync_stacks_one_part_per_worker_and_worker_ids_are_checked():
    with InProcessCollector(2, constant_policy(0.0), frames_per_batch=8, total_frames=16, sync=True) as collector:
        batches = list(collector)
        assert [b.batch_size for b in batches] == [torch.Size([2, 4])] * 2
        assert batches[0][WORKER_KEY][:, 0].tolist() == [0, 1]
        assert not any(r[3] for r in collector.requests)
        with pytest.raises(ValueError, match=r"worker_ids must be worker indices in \[0, 2\), got 2"):
            collector.update_policy_weights_(weights_for(1.0), worker_ids=2)


# ---- the arguments every remote collector checks and splits ---------------------------------------
def _common(**kwargs):
    args = {"frames_per_batch": 8, "total_frames": -1, "sync": False, "num_workers_per_collector": 1,
            "max_weight_update_interval": -1, "policy": None, "policy_factory": None, "postproc": None}
    return {**args, **kwargs, "owner": "MyCollector"}


@pytest.mark.parametrize("kwargs, error, match", [
    ({"sync": 1}, TypeError, "MyCollector: sync must be True or False, got 1"),
    ({"frames_per_batch": 0}, ValueError, "MyCollector: frames_per_batch must be a positive int, got 0"),
    ({"num_workers_per_collector": 0}, ValueError, "num_workers_per_collector must be a positive int, got 0"),
    ({"max_weight_update_interval": -2}, ValueError, r"max_weight_update_interval must be -1 \(no forced update\)"),
    ({"policy": object(), "policy_factory": object}, ValueError, "pass policy or policy_factory, not both"),
    ({"postproc": 3}, TypeError, "postproc must be callable, got 3"),
    ({"policy_factory": [print, 3]}, TypeError, "MyCollector: policy_factory must be callable, got 3"),
])
def test_check_remote_arguments_names_the_argument(kwargs, error, match):
    from reap.collectors.remote import check_remote_arguments

    with pytest.raises(error, match=match):
        check_remote_arguments(**_common(**kwargs))


def _split(per_collector, num_collectors=None, num_workers=None, sync=False, frames_per_batch=8):
    from reap.collectors.remote import split_per_collector

    return split_per_collector(per_collector, num_collectors=num_collectors, num_workers=num_workers,
                               frames_per_batch=frames_per_batch, sync=sync, owner="MyCollector")


def test_split_per_collector_counts_and_checks():
    make = lambda: GymEnv("Pendulum-v1")  # noqa: E731
    assert _split({"create_env_fn": make}) == (1, {"create_env_fn": [make]})
    n, lists = _split({"create_env_fn": [make, make], "device": "cpu"})
    assert n == 2 and lists["device"] == ["cpu", "cpu"]
    assert _split({"create_env_fn": make}, num_workers=3)[0] == 3
    for per_collector, kwargs, error, match in [
        ({"create_env_fn": make}, {"num_collectors": 2, "num_workers": 3}, ValueError,
         "num_workers=3 and num_collectors=2 differ"),
        ({"create_env_fn": make}, {"num_collectors": 0}, ValueError, "num_collectors must be a positive int"),
        ({"create_env_fn": [make] * 2, "device": ["cpu"] * 3}, {}, ValueError,
         r"per-collector lists of different lengths: \{'create_env_fn': 2, 'device': 3\}"),
        ({"create_env_fn": []}, {}, ValueError, "create_env_fn is an empty list"),
        ({"create_env_fn": [make, 3]}, {}, TypeError, "create_env_fn must be an env or a callable returning one, got 3"),
        ({"create_env_fn": make, "collector_kwargs": [{}, "x"]}, {"num_collectors": 2}, TypeError,
         "collector_kwargs must be a dict"),
        ({"create_env_fn": [make] * 3}, {"sync": True}, ValueError,
         "sync=True splits frames_per_batch=8 evenly across 3 collectors; pass a multiple of 3"),
    ]:
        with pytest.raises(error, match=match):
            _split(per_collector, **kwargs)


def test_remote_collector_kwargs_repeats_the_env_for_multi_process_collectors():
    from reap.collectors.remote import remote_collector_kwargs
    from reap_testing import CountingEnv

    make = lambda: GymEnv("Pendulum-v1")  # noqa: E731
    kwargs = remote_collector_kwargs({"frames_per_batch": 8, "total_frames": 99}, create_env_fn=make,
                                     collector_class=Collector, num_envs=2, devices={"device": "cpu", "env_device": None},
                                     collector_kwargs={"split_trajs": True}, policy_factory=constant_policy, owner="X")
    assert kwargs == {"frames_per_batch": 8, "total_frames": -1, "device": "cpu", "split_trajs": True,
                      "create_env_fn": [make, make], "policy_factory": constant_policy}
    with pytest.raises(TypeError, match="X: with num_workers_per_collector > 1 or a multi-process collector_class, "
                                        "create_env_fn must be callables, not env instances"):
        remote_collector_kwargs({}, create_env_fn=CountingEnv(), collector_class=Collector, num_envs=2, owner="X")
