"""TorchRL behaviours of the multi-process collectors: ``isinstance(..., MultiCollector)``,
``len()``, and a user-held ``VanillaWeightUpdater`` that reaches the workers."""

import functools

import pytest
import torch
from tensordict.nn import TensorDictModule

from reap import MultiCollector, VanillaWeightUpdater
from reap_mp import MultiAsyncCollector, MultiSyncCollector
from reap_testing import FaultyEnv, constant_policy, env_fn
from reap_testing.policies import ConstantPolicy

FAST = "forkserver"


def _linear(value: float):
    module = torch.nn.Linear(2, 1)
    with torch.no_grad():
        module.weight.fill_(value)
        module.bias.zero_()
    return TensorDictModule(module, in_keys=["observation"], out_keys=["action"])


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_isinstance_multicollector_and_len(cls):
    assert issubclass(cls, MultiCollector)
    with cls([env_fn(), env_fn()], None, frames_per_batch=8, total_frames=20, mp_start_method=FAST) as c:
        assert isinstance(c, MultiCollector)
        assert len(c) == 3 == len(list(c))
    with cls([env_fn(), env_fn()], None, frames_per_batch=8, mp_start_method=FAST) as endless:
        with pytest.raises(RuntimeError, match="never stops and has no length"):
            len(endless)


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_user_held_vanilla_updater_reaches_the_workers(cls):
    trainer, updater = _linear(0.0), VanillaWeightUpdater()
    with cls([env_fn(), env_fn()], trainer, frames_per_batch=8, weight_updater=updater,
             mp_start_method=FAST) as collector:
        updater.push_weights(_linear(1.0))  # explicit weights
        batch = collector.next()
        assert torch.equal(batch["action"], batch["observation"].sum(-1, keepdim=True))
        with torch.no_grad():
            trainer.module.weight.fill_(2.0)
        updater.push_weights()  # no weights: the collector's policy, the trainer's module
        # async: batches collected before the push may come first (each of the 2 workers keeps
        # 2 rollouts queued, plus the one it is running)
        for _ in range(8):
            batch = collector.next()
            if torch.equal(batch["action"], 2 * batch["observation"].sum(-1, keepdim=True)):
                break
        else:
            raise AssertionError("the workers never ran the pushed weights")
    with cls([env_fn(), env_fn()], policy_factory=functools.partial(constant_policy, 0.0), frames_per_batch=8,
             weight_updater=VanillaWeightUpdater(), mp_start_method=FAST) as collector:
        with pytest.raises(ValueError, match="no weights given and the collector has no policy"):
            collector.weight_updater.vanilla.push_weights()


def test_max_frames_per_traj_adds_step_count_in_every_worker():
    with MultiSyncCollector([env_fn(episode_len=100)] * 2, None, frames_per_batch=8, total_frames=8,
                            max_frames_per_traj=3, mp_start_method=FAST) as collector:
        batch = collector.next()
    assert batch["next", "step_count"][..., 0].tolist() == [[1, 2, 3, 1], [1, 2, 3, 1]]
    assert batch["step_count"].dtype == torch.int64
    assert batch["next", "truncated"][..., 0].tolist() == [[False, False, True, False]] * 2


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_map_fn_get_distant_attr_and_per_worker_devices(cls):
    with cls([env_fn(), env_fn()], None, frames_per_batch=8, device=["cpu", torch.device("cpu")],
             mp_start_method=FAST) as c:
        assert c.get_distant_attr("worker_idx") == [0, 1]
        assert c.get_distant_attr("policy_device") == [torch.device("cpu")] * 2
        assert c.map_fn("get_distant_attr", [("worker_idx",), ("frames_per_batch",)]) == [0, 4 if c._sync else 8]
        with pytest.raises(ValueError, match=r"map_fn: Expected 2 argument entries \(one per worker\), got 1"):
            c.map_fn("get_distant_attr", [("worker_idx",)])
        assert set(c._weight_sync_schemes) == {"policy"}
    with pytest.raises(ValueError, match="device has 3 entries but there are 2 workers"):
        cls([env_fn(), env_fn()], None, frames_per_batch=8, device=["cpu"] * 3, mp_start_method=FAST)


def test_extend_buffer_false_writes_each_workers_steps():
    from reap import LazyTensorStorage, ReplayBuffer

    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    with MultiSyncCollector([env_fn(batch=2), env_fn(batch=2)], None, frames_per_batch=16, total_frames=16,
                            replay_buffer=rb, extend_buffer=False, mp_start_method=FAST) as c:
        assert list(c) == [None]
    # each worker's 4 steps of its 2 envs: 8 items of shape [2], a worker's steps in order
    assert len(rb) == 8 and rb[:].batch_size == (8, 2)
    assert rb[:]["collector", "traj_ids"][:4, 0].tolist() == [rb[0]["collector", "traj_ids"][0].item()] * 4


class _Unpicklable(ConstantPolicy):
    def __reduce_ex__(self, protocol):
        raise TypeError("this policy stays in the trainer")


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_policy_and_policy_factory_together(cls):
    """TorchRL's: workers build theirs with the factory; the policy is where weights are read."""
    trainer = TensorDictModule(_Unpicklable(1.0), in_keys=["observation"], out_keys=["action"])
    with cls([env_fn(), env_fn()], trainer, policy_factory=functools.partial(constant_policy, 0.0),
             frames_per_batch=8, total_frames=-1, mp_start_method=FAST) as collector:
        it = iter(collector)
        assert (next(it)["action"] == 0).all()  # the factory's policy
        collector.update_policy_weights_()
        # async: each worker's batch under way and its prefetched one may predate the update
        for _ in range(8):
            batch = next(it)
            if (batch["action"] == 1).all():
                break
    assert (batch["action"] == 1).all()


def test_per_worker_weights_as_a_dict():
    """TorchRL's update_policy_weights_({worker: weights}): each worker gets its own."""
    with MultiSyncCollector([env_fn(), env_fn()], policy_factory=[functools.partial(constant_policy, 0.0)] * 2,
                            frames_per_batch=8, total_frames=-1, cat_results="stack", mp_start_method=FAST) as c:
        it = iter(c)
        next(it)
        c.update_policy_weights_({0: constant_policy(1.0), 1: constant_policy(2.0)})
        batch = next(it)
        with pytest.raises(ValueError, match=r"pass \{worker_index: weights\} or worker_ids=, not both"):
            c.update_policy_weights_({0: constant_policy(1.0)}, worker_ids=[0])
        with pytest.raises(ValueError, match=r"worker_ids must be worker indices in \[0, 2\), got \[5\]"):
            c.update_policy_weights_({5: constant_policy(1.0)})
    assert (batch["action"][0] == 1).all() and (batch["action"][1] == 2).all()


def test_a_workers_builtin_error_is_also_that_error():
    """A worker whose env refuses its arguments: `except ValueError` catches it, as TorchRL's
    (which builds an env in the trainer's process) raises it there; it is still a WorkerError."""
    from reap import ParallelEnv
    from reap.errors import WorkerError

    bad = functools.partial(FaultyEnv, where="init", how="nope")  # its constructor: ValueError
    with pytest.raises(ValueError, match="FaultyEnv: where must be one of") as info:
        MultiSyncCollector([env_fn(), bad], None, frames_per_batch=8, mp_start_method=FAST)
    assert isinstance(info.value, WorkerError) and not isinstance(info.value, TypeError)
    assert info.value.worker_idx == 1 and "while starting" in str(info.value)
    with pytest.raises(WorkerError) as again:
        ParallelEnv(2, bad, mp_start_method=FAST)
    assert type(again.value).__mro__[1:] == type(info.value).__mro__[1:]


@pytest.mark.parametrize("extend_buffer", [True, False])
def test_a_sync_batch_reaches_the_buffer_worker_by_worker(extend_buffer):
    """TorchRL's workers write their own batches: a 1-dim storage holds every frame."""
    from reap import LazyTensorStorage, ReplayBuffer

    rb = ReplayBuffer(storage=LazyTensorStorage(256))
    with MultiSyncCollector([env_fn(), env_fn()], None, frames_per_batch=32, total_frames=64, replay_buffer=rb,
                            extend_buffer=extend_buffer, mp_start_method=FAST) as c:
        lengths = [len(rb) for _ in c]
    assert lengths == [32, 64]
    ids = rb[:]["collector", "traj_ids"]
    assert ids[:16].unique().numel() < ids[:32].unique().numel()  # worker 0's 16 frames, then worker 1's


@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_compact_obs_reaches_the_workers(cls):
    """The workers' batches (and the shared-memory slots they fill) leave ("next", obs) out."""
    with cls([env_fn(), env_fn()], None, frames_per_batch=8, total_frames=8, compact_obs=True,
             mp_start_method=FAST) as c:
        batch = next(iter(c))
    assert ("next", "observation") not in batch.keys(True) and "observation" in batch.keys()
    assert ("next", "reward") in batch.keys(True) and ("next", "done") in batch.keys(True)


@pytest.mark.parametrize("cls, kwargs", [(MultiSyncCollector, {"cat_results": "stack"}), (MultiAsyncCollector, {})])
def test_non_tensor_entries_come_back_from_the_workers(cls, kwargs):
    """A worker's strings do not fit its shared-memory slot: they come by pipe, beside it."""
    from reap_testing.labels import labelled_env

    with cls([labelled_env, labelled_env], None, frames_per_batch=60, total_frames=120, mp_start_method=FAST,
             **kwargs) as c:
        batches = list(c)
    rows = [row for b in batches for row in (b.unbind(0) if b.batch_dims == 2 else [b])]
    assert len(rows) >= 2
    for row in rows:
        labels, nexts = list(row["label"]), list(row["next", "label"])
        assert len(labels) == row.batch_size[-1] and all(isinstance(x, str) for x in labels + nexts)
        for t in range(1, len(labels)):
            if labels[t] == "reset":
                assert nexts[t] == "step 1"
            else:
                assert labels[t] == nexts[t - 1]


def test_an_async_workers_two_slots_do_not_share_memory():
    """The prefetched rollout fills the other slot: a batch is never overwritten by the next."""
    with MultiAsyncCollector([env_fn(episode_len=1000)], None, frames_per_batch=4, total_frames=40,
                             mp_start_method=FAST) as c:
        c.set_seed(1)
        batches = list(c)
    keys = [tuple(b["observation"][:, 1].tolist()) for b in batches]  # the env's seeded random column
    assert len(batches) == 10 and len(set(keys)) == 10
    steps = torch.cat([b["observation"][:, 0] for b in batches])  # steps into the one long episode
    assert torch.equal(steps, torch.arange(steps.numel(), dtype=steps.dtype))


@pytest.mark.parametrize("cls, kwargs", [(MultiSyncCollector, {"cat_results": "stack"}), (MultiAsyncCollector, {})])
def test_variable_shape_batches_come_whole_from_the_workers(cls, kwargs):
    """No shared-memory slot fits entries whose shape changes: each batch comes by pipe."""
    from tensordict import LazyStackedTensorDict

    from reap_testing import GrowingEnv

    with cls([GrowingEnv, GrowingEnv], None, frames_per_batch=20, total_frames=40, mp_start_method=FAST,
             **kwargs) as c:
        batches = list(c)
    for batch in batches:
        assert isinstance(batch, LazyStackedTensorDict) and batch.names[-1] == "time"
        rows = batch.unbind(0) if batch.batch_dims == 2 else [batch]
        for row in rows:
            assert [row[t]["observation"].shape[0] for t in range(5)] == [1, 2, 3, 4, 5]
