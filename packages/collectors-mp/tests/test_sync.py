"""MultiSyncCollector: weight forms and schemes, cat_results, options (workers forked from a server;
the layout, seeds and faults every backend shares are reap_testing's contract, test_contract.py)."""

import pytest
import torch
from tensordict import TensorDict

from reap import Collector, MultiCollector, VanillaWeightUpdater
from reap_mp import MultiProcessedWeightUpdater, MultiSyncCollector, WorkerError, worker_seed
from reap_testing import ConstantPolicy, constant_policy, env_fn

FAST = "forkserver"


@pytest.fixture(scope="module")
def sync():
    collector = MultiSyncCollector(
        [env_fn(batch=3, episode_len=4), env_fn(batch=3, episode_len=4)], constant_policy(0.5),
        worker_tags=True, frames_per_batch=24, total_frames=-1, mp_start_method=FAST,
    )
    yield collector
    collector.shutdown()


def test_weights_propagate_to_every_later_batch(sync):
    before = sync.get_policy_version()
    sync.update_policy_weights_(TensorDict({"module": {"weight": torch.tensor([3.0])}}))
    version = sync.policy_version
    assert sync.get_policy_version() == version == before + 1
    for _ in range(3):
        batch = sync.next()
        assert (batch["action"] == 3.0).all()
        assert (batch["collector", "policy_version"] == version).all()
    # module, state dict, weights_dict and model_id forms
    sync.update_policy_weights_(ConstantPolicy(4.0).as_module())
    assert (sync.next()["action"] == 4.0).all()
    sync.update_policy_weights_({"module.weight": torch.tensor([5.0])})
    assert (sync.next()["action"] == 5.0).all()
    sync.update_policy_weights_(weights_dict={"policy": {"weight": torch.tensor([6.0])}}, model_id="policy")
    assert (sync.next()["action"] == 6.0).all()
    with pytest.raises(ValueError, match="model_id='critic'"):
        sync.update_policy_weights_(ConstantPolicy(1.0), model_id="critic")


def test_worker_ids_update_only_those_workers(sync):
    sync.update_policy_weights_({"weight": torch.tensor([1.0])})
    sync.update_policy_weights_({"weight": torch.tensor([7.0])}, worker_ids=[1])
    batch = sync.next()
    assert (batch["action"][0] == 1.0).all() and (batch["action"][1] == 7.0).all()
    v = batch["collector", "policy_version"][:, 0, 0].tolist()
    assert v[1] == v[0] + 1
    with pytest.raises(ValueError, match="worker_ids must be worker indices"):
        sync.update_policy_weights_({"weight": torch.tensor([1.0])}, worker_ids=5)


def test_update_without_arguments_reads_the_trainers_policy():
    trainer = constant_policy(0.0)
    with MultiSyncCollector([env_fn(), env_fn()], trainer, frames_per_batch=8, total_frames=16,
                            mp_start_method=FAST, update_at_each_batch=True) as collector:
        it = iter(collector)
        assert (next(it)["action"] == 0.0).all()
        with torch.no_grad():
            trainer.module.weight.fill_(2.5)
        assert (next(it)["action"] == 2.5).all()  # update_at_each_batch pushed it
        with pytest.raises(StopIteration):
            next(it)


@pytest.mark.parametrize("scheme", ["pipe", "shared_mem"])
def test_schemes_and_updaters(scheme):
    trainer = ConstantPolicy(0.0)
    updater = MultiProcessedWeightUpdater(get_server_weights=lambda: TensorDict.from_module(trainer))
    with MultiSyncCollector([env_fn(), env_fn()], trainer.as_module(), frames_per_batch=8,
                            mp_start_method=FAST, weight_sync_schemes={"policy": scheme},
                            weight_updater=updater) as collector:
        assert type(collector.weight_sync_scheme).__name__.lower().startswith(scheme.replace("_", ""))
        with torch.no_grad():
            trainer.weight.fill_(8.0)
        collector.update_policy_weights_()  # the getter supplies the weights
        assert (collector.next()["action"] == 8.0).all()
        vanilla = VanillaWeightUpdater(weight_getter=lambda: {"module.weight": torch.tensor([9.0])})
        collector.weight_updater = MultiProcessedWeightUpdater  # placeholder replaced below
        from reap_mp.weight_sync import adapt_updater

        collector.weight_updater = adapt_updater(vanilla, "test")
        collector.weight_updater.register_collector(collector)
        collector.update_policy_weights_()
        assert (collector.next()["action"] == 9.0).all()


def test_cat_results_and_frames_lists():
    fns = [env_fn(batch=2), env_fn(batch=2)]
    with MultiSyncCollector(fns, constant_policy(), frames_per_batch=16, cat_results="cat",
                            mp_start_method=FAST) as collector:
        assert collector.next().batch_size == (4, 4)  # [workers * envs, T]
    with MultiSyncCollector(fns, constant_policy(), frames_per_batch=[8, 16], cat_results=-1,
                            total_frames=48, mp_start_method=FAST) as collector:
        batches = list(collector)
        assert [b.batch_size for b in batches] == [torch.Size([2, 12])] * 2  # along time
        assert collector.frames == 48


def test_worker_seed_ranges_do_not_overlap():
    n_envs = 16
    ranges = []
    for seed in (0, 1, 2, 100):
        for idx in range(8):
            s = worker_seed(seed, idx)
            assert s == worker_seed(seed, idx)
            ranges.append(set(range(s, s + n_envs)))
    for i, a in enumerate(ranges):
        for b in ranges[i + 1:]:
            assert not a & b


def test_same_seed_two_collectors_identical_batches():
    out = []
    for _ in range(2):
        with MultiSyncCollector([env_fn(batch=2), env_fn(batch=2)], constant_policy(1.0),
                                frames_per_batch=16, total_frames=32, mp_start_method=FAST) as c:
            c.set_seed(5)
            out.append([b["next", "observation"] for b in c])
    assert all(torch.equal(a, b) for a, b in zip(*out))


def test_postproc_split_trajs_replay_buffer_and_policy_factory():
    class Buffer(list):
        def extend(self, batch):
            self.append(batch)

    buffer = Buffer()
    with MultiCollector([env_fn(episode_len=3), env_fn(episode_len=3)], sync=True,
                        policy_factory=[constant_policy, constant_policy], frames_per_batch=12,
                        total_frames=24, split_trajs=True, replay_buffer=buffer,
                        postproc=lambda b: b.set("tag", torch.ones(b.shape)),
                        mp_start_method=FAST) as collector:
        assert all(b is None for b in collector)
        with pytest.raises(ValueError, match="no weights given"):
            collector.update_policy_weights_()
    assert len(buffer) == 2
    batch = buffer[0]
    assert ("collector", "mask") in batch.keys(True) and "tag" in batch.keys()
    assert batch.batch_size[1] == 3  # trajectories of 3 steps


def test_collector_backend_mp_and_init_random_frames():
    with Collector([env_fn(), env_fn()], constant_policy(0.25), backend="mp", sync=True,
                   frames_per_batch=8, total_frames=24, init_random_frames=8,
                   mp_start_method=FAST) as collector:
        assert isinstance(collector, MultiSyncCollector)
        batches = list(collector)
        assert not (batches[0]["action"] == 0.25).all()  # random actions first
        assert (batches[1]["action"] == 0.25).all()
        state = collector.state_dict()
        assert set(state) == {"worker0", "worker1", "frames", "iter"}
        collector.load_state_dict(state)


def test_num_workers_per_collector_replicates_the_env():
    with MultiSyncCollector(env_fn(), constant_policy(), num_workers=2, num_workers_per_collector=2,
                            frames_per_batch=16, mp_start_method=FAST) as collector:
        assert collector.next().batch_size == (2, 2, 4)


def test_policy_without_parameters_cannot_be_updated():
    with MultiSyncCollector([env_fn()], None, frames_per_batch=4, mp_start_method=FAST) as collector:
        with pytest.raises(ValueError, match="has no parameters"):
            collector.update_policy_weights_({"weight": torch.ones(1)})
        assert collector.next().batch_size == (1, 4)
    with pytest.raises(RuntimeError, match="shut down"):
        collector.next()
    assert WorkerError  # exported


@pytest.mark.parametrize("cat_results", ["stack", -1])
def test_set_truncated_marks_the_end_of_every_workers_rollout(cat_results):
    with MultiSyncCollector([env_fn(batch=2, episode_len=100)] * 2, constant_policy(), frames_per_batch=16,
                            total_frames=16, cat_results=cat_results, set_truncated=True,
                            mp_start_method=FAST) as collector:
        batch = next(iter(collector))
    truncated = batch["next", "truncated"].squeeze(-1)
    ends = [3] if cat_results == "stack" else [3, 7]  # [2 workers, 2 envs, 4 steps] or [2 envs, 8 steps]
    expected = torch.zeros_like(truncated)
    expected[..., ends] = True
    assert torch.equal(truncated, expected)
    assert torch.equal(batch["next", "done"].squeeze(-1), expected)  # no episode ended: done only there


@pytest.mark.parametrize("cat_results, names", [("stack", [None, "time"]), (0, ["time"])])
def test_sync_batches_name_their_last_dim_time_as_torchrls(cat_results, names):
    with MultiSyncCollector([env_fn(), env_fn()], ConstantPolicy(1.0).as_module(), frames_per_batch=8,
                            total_frames=8, cat_results=cat_results, mp_start_method="forkserver") as collector:
        assert next(iter(collector)).names == names
