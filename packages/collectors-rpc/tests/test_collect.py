"""RPCCollector and DistributedCollector on real worker processes over loopback: TorchRL's
layouts in sync and async mode, weights seen in the next batch, worker ids, state (seeds, hooks
and faults, as on every backend, are reap_testing's contract: test_contract.py)."""

import pytest
import torch

from reap import Collector
from reap_rpc import DistributedCollector, DistributedSyncCollector, RPCCollector
from reap_testing import ConstantPolicy, env_fn, listening_addresses

VERSION = ("collector", "policy_version")
WORKER = ("collector", "worker_id")
pytestmark = pytest.mark.slow  # every test starts worker processes (torch imports): seconds each


def _weight(batch):
    """The constant action of every frame of ``batch`` (its policy's single weight)."""
    return batch["action"].flatten().unique().tolist()


@pytest.mark.parametrize("cls, layout", [(RPCCollector, [4, 4]), (DistributedCollector, [2, 2, 4])])
def test_sync_layout_weights_worker_ids_seeds_and_loopback(cls, layout):
    policy = ConstantPolicy(1.0)
    with cls([env_fn(batch=2, episode_len=4)] * 2, policy.as_module(), worker_tags=True, frames_per_batch=16,
             total_frames=48, sync=True, visible_devices=["cpu", torch.device("cpu")]) as collector:
        # every socket of the driver and its workers listens on 127.0.0.1
        listening = listening_addresses([*collector.worker_pids, __import__("os").getpid()])
        assert ("127.0.0.1", collector.tcp_port) in listening
        assert {addr for addr, _ in listening} == {"127.0.0.1"}, listening
        seen = []
        for i, batch in enumerate(collector):
            # RPC: the workers' [2 envs, 4 steps] concatenated; distributed: stacked
            assert batch.batch_size == torch.Size(layout)
            ids = batch[WORKER].reshape(2, -1)
            assert ids[0].unique().tolist() == [0] and ids[1].unique().tolist() == [1]
            seen.append((_weight(batch), batch[VERSION].unique().tolist()))
            policy.weight.data.fill_(10.0 + i)
            collector.update_policy_weights_(policy)
        assert seen == [([1.0], [0]), ([10.0], [1]), ([11.0], [2])]
        assert collector.frames == 48
        # trajectory ids never collide across workers
        traj = batch["collector", "traj_ids"].reshape(2, -1)
        assert not set(traj[0].tolist()) & set(traj[1].tolist())
        # a second iteration reuses the workers; worker_ids (0-based) reaches only worker 1
        collector.total_frames = 64
        collector.update_policy_weights_({"module.weight": torch.tensor([5.0])}, worker_ids=[1])
        batch = next(iter(collector)).reshape(2, -1)
        assert _weight(batch[0]) == [12.0] and _weight(batch[1]) == [5.0]
        with pytest.raises(ValueError, match=r"worker_ids must be worker indices in \[0, 2\)"):
            collector.update_policy_weights_(policy, worker_ids=[2])
        with pytest.raises(ValueError, match=r"'module.weight' has shape \(2,\) but the policy's has shape \(1,\)"):
            collector.update_policy_weights_({"module.weight": torch.ones(2)})
        state = collector.state_dict()
        assert len(state) == 2 and state[0]["frames"] == 4 * 8  # each worker's own count: 4 batches
        collector.load_state_dict(state)
        pids = collector.worker_pids
    assert collector._closed and len(pids) == 2


@pytest.mark.parametrize("cls", [RPCCollector, DistributedCollector])
def test_async_update_after_each_batch_then_max_weight_update_interval(cls):
    """No worker collects with weights more than k batches old (k=0: update_after_each_batch)."""
    policy = ConstantPolicy(0.0)
    with cls([env_fn(), env_fn()], policy.as_module(), worker_tags=True, frames_per_batch=3, total_frames=3 * 12,
             update_after_each_batch=True) as collector:
        for k in (0, 2):
            runs = {0: [], 1: []}
            for batch in collector:
                assert batch.batch_size == torch.Size([3])  # each worker's batch, as it arrives
                runs[batch[WORKER][0].item()].append((batch[VERSION][0].item(), _weight(batch)[0]))
                policy.weight.data += 1.0  # the trainer moves on; no explicit update
            assert all(runs.values()), runs
            for got in runs.values():
                versions = [v for v, _ in got]
                streak = longest = 1
                for a, b in zip(versions, versions[1:]):
                    streak = streak + 1 if a == b else 1
                    longest = max(longest, streak)
                assert longest <= k + 1, runs  # never more than k batches on the same weights
                assert [w for _, w in got] == sorted(w for _, w in got)
            collector.update_after_each_batch = False
            collector.max_weight_update_interval = 2
            collector.total_frames += 3 * 16


@pytest.mark.parametrize("cls", [RPCCollector, DistributedCollector])
def test_async_workers_prefetch_so_pushed_weights_reach_the_rollout_after_the_next(cls):
    """One worker: the request for batch 2 left before the trainer saw batch 1 and started
    batch 3; weights pushed after batch 1 go with the request for batch 3 and run from batch 4
    (without prefetching, from batch 3). Versions always name the weights used."""
    policy = ConstantPolicy(1.0)
    with cls([env_fn()], policy.as_module(), worker_tags=True, frames_per_batch=4, total_frames=4 * 5) as collector:
        got = []
        for batch in collector:
            got.append((batch[VERSION].unique().tolist(), _weight(batch)))
            if len(got) == 1:
                collector.update_policy_weights_({"module.weight": torch.tensor([7.0])})
        assert got == [([0], [1.0]), ([0], [1.0]), ([0], [1.0]), ([1], [7.0]), ([1], [7.0])]


def test_distributed_sync_collector_update_interval_and_split_trajs():
    policy = ConstantPolicy(1.0)
    with DistributedSyncCollector([env_fn(episode_len=3)] * 2, policy.as_module(), frames_per_batch=12,
                                  total_frames=36, update_interval=2, split_trajs=True) as collector:
        weights = []
        for batch in collector:
            # split_trajs on the driver: [trajectories, max length], 2 workers x 6 steps / 3 per episode
            assert batch.batch_size == torch.Size([4, 3])
            assert batch["collector", "mask"].all()
            weights.append(_weight(batch))
            policy.weight.data += 1.0
        # the central policy is sent after every 2nd batch: batch 3 runs weight 3
        assert weights == [[1.0], [1.0], [3.0]]


def test_backends_and_policy_factory_defers_weights():
    collector = Collector([env_fn()] * 2, policy_factory=lambda: ConstantPolicy(3.0).as_module(),
                          backend="distributed", sync=True, frames_per_batch=8, total_frames=16)
    with collector:
        assert isinstance(collector, DistributedCollector) and collector._sync
        first = next(iter(collector))
        assert first.batch_size == torch.Size([2, 4]) and _weight(first) == [3.0]
        with pytest.raises(ValueError, match="no weights given and the collector has no policy to read them from"):
            collector.update_policy_weights_()  # no central policy to read
        collector.update_policy_weights_(weights_dict={"policy": {"module.weight": torch.tensor([7])}})
        assert _weight(next(iter(collector))) == [7.0]  # exact cast int64 -> float32
