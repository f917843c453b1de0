"""``trajs_per_batch``, ``trajs_per_write`` and ``traj_format`` (TorchRL 0.14's): batches of whole
trajectories, ``"padded"`` or ``"cat"``, or whole trajectories written flat to a replay buffer, from
``Collector`` and the multi-worker collectors (the shared driver, here on workers in this process;
reap-collectors-mp's processes once), side by side with TorchRL on the same dynamics.

The env: two sub-envs counting 0, 1, (2) under a policy that always adds 1, done after 2 and 3
steps: trajectories of known lengths, ids and values.
"""

import functools
import warnings

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from reap import Collector
from reap.collectors.multi_worker import MultiWorkerCollector, build_worker
from reap.collectors.traj_batches import TrajectoryBatches, pad_trajectories
from reap.weight_update import WeightSyncScheme
from reap_testing import BatchSink, CountingEnv

MASK, IDS = ("collector", "mask"), ("collector", "traj_ids")


def count_up():
    return TensorDictModule(torch.ones_like, in_keys=["observation"], out_keys=["action"])


def two_lengths():
    """Constructors of the two sub-envs: done after 2 and after 3 steps."""
    return [_counting_2, _counting_3]


def _counting_2():
    return CountingEnv(limit=2.0)


def _counting_3():
    return CountingEnv(limit=3.0)


def values(batch, key):
    return batch[key].reshape(*batch.batch_size, -1)[..., 0].tolist()


# ---- Collector: the layouts ----------------------------------------------------------------------
def test_padded_batches_hold_whole_trajectories_of_a_batched_env():
    with Collector(two_lengths(), count_up(), frames_per_batch=8, total_frames=24, trajs_per_batch=3,
                   traj_format="padded") as collector:
        batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([3, 3])] * 3
    first = batches[0]
    # env 0 runs trajectories 0, 2, 4, ... (2 steps), env 1 runs 1, 3, ... (3 steps); they end
    # in the order of their ids within a batch, and trajectory 2 ends before 3 (in the next batch)
    assert first[IDS].tolist() == [[0, 0, 0], [1, 1, 1], [2, 2, 0]]
    assert values(first, "observation") == [[0, 1, 0], [0, 1, 2], [0, 1, 0]]
    assert values(first, ("next", "done")) == [[False, True, False], [False, False, True], [False, True, False]]
    assert first[MASK].tolist() == [[True, True, False], [True, True, True], [True, True, False]]
    assert first[MASK].dtype == torch.bool
    assert [b[IDS][:, 0].tolist() for b in batches] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert first.names == [None, "time"]


def test_cat_batches_put_the_trajectories_end_to_end():
    with Collector(two_lengths(), count_up(), frames_per_batch=8, total_frames=24, trajs_per_batch=3,
                   traj_format="cat") as collector:
        batches = list(collector)
    assert [b[IDS].tolist() for b in batches] == [[0, 0, 1, 1, 1, 2, 2], [3, 3, 3, 4, 4, 5, 5],
                                                  [6, 6, 6, 7, 7, 8, 8, 8]]
    assert values(batches[0], ("next", "observation")) == [1, 2, 1, 2, 3, 1, 2]
    assert all(MASK not in b.keys(True) for b in batches)
    assert all(int(b["next", "done"].sum()) == 3 and bool(b["next", "done"][-1]) for b in batches)


def test_a_trajectory_spanning_batches_is_put_back_together():
    # 2 frames a batch, trajectories of 3 steps: each is cut across two batches
    with Collector(_counting_3, count_up(), frames_per_batch=2, total_frames=12, trajs_per_batch=1,
                   traj_format="cat") as collector:
        assert collector.trajs_per_batch == 1 and collector.traj_format == "cat"
        batches = list(collector)
    assert [b[IDS].tolist() for b in batches] == [[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3]]
    assert [values(b, "observation") for b in batches] == [[0, 1, 2]] * 4


def test_pad_trajectories_repeats_non_tensor_entries_in_the_padding():
    from tensordict import NonTensorStack

    trajs = [TensorDict({"obs": torch.arange(n), "text": NonTensorStack(*[word] * n)}, batch_size=[n])
             for n, word in ((3, "pick"), (1, "place"))]
    out = pad_trajectories(trajs)
    assert out["obs"].tolist() == [[0, 1, 2], [0, 0, 0]]
    assert [item.data for item in out.get("text")[1]] == ["place"] * 3
    assert out[MASK].tolist() == [[True, True, True], [True, False, False]]


def test_terminated_or_truncated_alone_ends_a_trajectory():
    trajs = TrajectoryBatches(1, "cat")
    batch = TensorDict({IDS: torch.tensor([5, 5, 6]), ("next", "terminated"): torch.tensor([[0], [1], [0]]).bool()},
                       batch_size=[3])
    assert [b[IDS].tolist() for b in trajs.regroup(batch)] == [[5, 5]]
    assert list(trajs.partial) == [6]


# ---- Collector: the replay buffer --------------------------------------------------------------------
def test_replay_buffer_gets_complete_trajectories_flat_and_the_collector_yields_none():
    sink = BatchSink()
    with Collector(two_lengths(), count_up(), frames_per_batch=8, total_frames=24, trajs_per_batch=3,
                   replay_buffer=sink) as collector:
        yielded = list(collector)
    assert yielded == [None, None, None]  # once per collected batch, as TorchRL
    # every trajectory that ended in a batch, in one extend() (trajs_per_write=None), flat: not
    # trajs_per_batch of them (the third batch ends four)
    assert [b[IDS].tolist() for b in sink.batches] == [[0, 0, 1, 1, 1, 2, 2], [3, 3, 3, 4, 4, 5, 5],
                                                       [6, 6, 6, 7, 7, 8, 8, 8, 9, 9]]
    assert all(b.batch_dims == 1 and bool(b["next", "done"][-1]) for b in sink.batches)


def test_trajs_per_write_splits_the_writes():
    sink = BatchSink()
    with Collector(two_lengths(), count_up(), frames_per_batch=8, total_frames=16, trajs_per_batch=3,
                   trajs_per_write=2, replay_buffer=sink) as collector:
        list(collector)
    assert [b[IDS].tolist() for b in sink.batches] == [[0, 0, 1, 1, 1], [2, 2], [3, 3, 3, 4, 4], [5, 5]]


def test_extend_buffer_false_still_writes_whole_trajectories():
    sink, whole = BatchSink(), BatchSink()  # TorchRL: extend_buffer is about raw steps only
    for buffer, extend in ((sink, False), (whole, True)):
        with Collector(_counting_2, count_up(), frames_per_batch=4, total_frames=8, trajs_per_batch=1,
                       replay_buffer=buffer, extend_buffer=extend) as collector:
            assert list(collector) == [None, None]
    assert [b[IDS].tolist() for b in sink.batches] == [b[IDS].tolist() for b in whole.batches] != []


# ---- Collector: resets ----------------------------------------------------------------------------------
def test_reset_drops_the_trajectories_under_way_and_those_not_handed_out():
    with Collector(two_lengths(), count_up(), frames_per_batch=8, trajs_per_batch=2,
                   traj_format="cat") as collector:
        batches = iter(collector)
        assert next(batches)[IDS].tolist() == [0, 0, 1, 1, 1]
        partial, complete = collector._traj_assembly  # TorchRL's name
        # trajectory 2 ended (env 0), 3 is under way (env 1), and 4 (env 0) has no step yet
        assert [c[IDS][0].item() for c in complete] == [2] and sorted(partial) == [3]
        collector.reset()
        assert not partial and not complete
        # trajectories 3 and 4 were cut short: the next batch starts on new ones (5 and 6)
        assert next(batches)[IDS].tolist() == [5, 5, 6, 6, 6]


def test_a_partial_reset_drops_only_the_reset_envs_trajectories():
    with Collector(two_lengths(), count_up(), frames_per_batch=6, trajs_per_batch=1,
                   traj_format="cat") as collector:
        batches = iter(collector)
        next(batches)
        partial, _ = collector._traj_assembly
        assert sorted(partial) == [2]  # env 0 is on trajectory 2; env 1 just ended 1, is on 3 (no step yet)
        collector.reset(index=1)
        assert sorted(partial) == [2]
        collector.reset(index=0)
        assert partial == {}


def test_reset_at_each_iter_drops_the_episodes_it_cuts():
    with Collector(_counting_3, count_up(), frames_per_batch=4, total_frames=12, trajs_per_batch=1,
                   traj_format="cat", reset_at_each_iter=True) as collector:
        batches = list(collector)
    # each batch: one whole trajectory (3 steps), then one step of a trajectory the reset ends
    assert [b[IDS].tolist() for b in batches] == [[0, 0, 0], [2, 2, 2], [4, 4, 4]]


def test_set_truncated_ends_the_trajectories_at_each_batch_end():
    with Collector(_counting_3, count_up(), frames_per_batch=4, total_frames=8, trajs_per_batch=2,
                   traj_format="cat", set_truncated=True) as collector:
        batches = list(collector)
    # as TorchRL: trajectory 1, truncated at the end of the first batch, is handed out; its
    # episode goes on in the next batch (same id), and ends there as a trajectory of its own
    assert [b[IDS].tolist() for b in batches] == [[0, 0, 0, 1], [1, 1, 2, 2]]
    assert [values(b, ("next", "truncated")) for b in batches] == [[False, False, False, True],
                                                                   [False, False, False, True]]


# ---- arguments -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"trajs_per_batch": 2, "traj_format": "flat"}, "traj_format must be 'padded' or 'cat', got 'flat'"),
    ({"traj_format": "cat"}, "traj_format='cat' has no effect without trajs_per_batch; pass trajs_per_batch=N"),
    ({"trajs_per_batch": 0}, "trajs_per_batch must be a positive int or None, got 0"),
    ({"trajs_per_batch": 2.0}, "trajs_per_batch must be a positive int or None, got 2.0"),
    ({"trajs_per_batch": 2, "traj_format": "cat", "trajs_per_write": 1},
     "trajs_per_write=1 sets how many trajectories each replay_buffer.extend.. gets, and there is no replay_buffer"),
    ({"trajs_per_write": 2, "replay_buffer": BatchSink()}, "trajs_per_write=2 has no effect without trajs_per_batch"),
    ({"trajs_per_batch": 2, "traj_format": "cat", "trajs_per_write": 0, "replay_buffer": BatchSink()},
     "trajs_per_write must be a positive int or None, got 0"),
    ({"trajs_per_batch": 2, "traj_format": "cat", "split_trajs": True}, "split_trajs=True and trajs_per_batch=2"),
    ({"trajs_per_batch": 2, "traj_format": "cat", "track_traj_ids": False},
     "trajs_per_batch cuts batches by \\('collector', 'traj_ids'\\), which track_traj_ids=False turns off; "
     "leave track_traj_ids=True"),
])
def test_bad_values_fail_at_construction_naming_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=f"^Collector: {message}"):
        Collector(_counting_2, count_up(), frames_per_batch=4, **kwargs)


def test_traj_format_left_unset_warns_only_when_padded_batches_are_yielded():
    with pytest.warns(FutureWarning, match="will change to 'cat' in torchrl v0.16") as caught:
        Collector(_counting_2, count_up(), frames_per_batch=4, trajs_per_batch=2).shutdown()
    assert caught[0].filename == __file__  # points at the caller
    for kwargs in ({"traj_format": "padded"}, {"traj_format": "cat"}, {"replay_buffer": BatchSink()}):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            collector = Collector(_counting_2, count_up(), frames_per_batch=4, trajs_per_batch=2, **kwargs)
        assert collector.traj_format == kwargs.get("traj_format", "padded")
        collector.shutdown()


def test_a_batch_without_traj_ids_is_a_clear_error():
    batch = TensorDict({("next", "done"): torch.ones(2, 1, dtype=torch.bool)}, batch_size=[2])
    with pytest.raises(KeyError, match="no \\('collector', 'traj_ids'\\)"):
        TrajectoryBatches(1).ingest(batch)


# ---- multi-worker collectors: the shared driver, workers in this process -------------------------------
class InProcessMulti(MultiWorkerCollector):
    """``MultiWorkerCollector`` (TorchRL's multi-collector arguments on the shared driver) whose
    workers answer in this process, in request order."""

    def _scheme(self, weight_sync_schemes, policy_devices, owner):
        return WeightSyncScheme()

    def _start_transport(self):
        self._workers, self._answers = [None] * self.num_workers, []

    def _launch_worker(self, idx):
        self._workers[idx] = build_worker(**self._worker_spec(idx))

    def _await_worker(self, idx):
        return self._workers[idx].ready_info()

    def _send_collect(self, idx, weights, version, prefetch):
        self._answers.append((idx, self._workers[idx].serve_collect(weights, version, prefetch=prefetch)))

    def _receive(self, timeout):
        return self._answers.pop(0) if self._answers else None

    def _call(self, idx, method, args):
        return getattr(self._workers[idx], method)(*args)

    def _kill_worker(self, idx):
        self._workers[idx].close()

    def _close_workers(self, timeout):
        for worker in self._workers:
            worker.close()


class InProcessSync(InProcessMulti):
    _sync = True


class InProcessAsync(InProcessMulti):
    _sync = False


def _worker_ids(batch):
    """The ids of a padded or flat batch's trajectories, in order, as (worker, id within the
    worker's block)."""
    from reap.collectors.worker import TRAJ_ID_BLOCK

    ids = batch[IDS][:, 0] if batch.batch_dims == 2 else torch.unique_consecutive(batch[IDS])
    return [divmod(i, TRAJ_ID_BLOCK) for i in ids.tolist()]


def test_a_sync_multi_collector_regroups_its_stacked_batches():
    with InProcessSync([_counting_2, _counting_3], count_up(), frames_per_batch=8, total_frames=24,
                       trajs_per_batch=2, traj_format="padded") as collector:
        batches = list(collector)
    # a sync batch: 4 steps of each worker; worker 0 ends 2 trajectories in each, worker 1 ends
    # one in each but the last (12 steps: 4 of 3 steps), 10 in all; worker 0's ids come first
    assert [_worker_ids(b) for b in batches] == [[(0, 0), (0, 1)], [(1, 0), (0, 2)], [(0, 3), (1, 1)],
                                                 [(0, 4), (0, 5)], [(1, 2), (1, 3)]]
    assert batches[1][MASK].tolist() == [[True, True, True], [True, True, False]]
    assert values(batches[1], "observation") == [[0, 1, 2], [0, 1, 0]]


def test_an_async_multi_collector_regroups_each_workers_batch():
    with InProcessAsync([_counting_2, _counting_3], count_up(), frames_per_batch=6, total_frames=24,
                        trajs_per_batch=2, traj_format="cat") as collector:
        assert collector.trajs_per_batch == 2 and collector.traj_format == "cat"
        batches = list(collector)
    assert all(int(b["next", "done"].sum()) == 2 for b in batches)
    # batches of 6 frames from worker 0 (ends 3 trajectories), 1 (ends 2), 0, 1; in that order
    assert [_worker_ids(b) for b in batches] == [
        [(0, 0), (0, 1)], [(0, 2), (1, 0)], [(1, 1), (0, 3)], [(0, 4), (0, 5)], [(1, 2), (1, 3)]]


def test_a_multi_collector_writes_whole_trajectories_to_the_replay_buffer():
    sink = BatchSink()
    with InProcessSync([_counting_2, _counting_3], count_up(), frames_per_batch=8, total_frames=16,
                       trajs_per_batch=2, trajs_per_write=1, replay_buffer=sink) as collector:
        assert list(collector) == [None, None]
        collector.reset()  # flushes the driver's assembly
        assert collector._traj_assembly == ({}, [])
    # one trajectory a write (trajs_per_write=1), worker 0's ids first in each sync batch
    assert [_worker_ids(b) for b in sink.batches] == [[(0, 0)], [(0, 1)], [(1, 0)], [(0, 2)], [(0, 3)],
                                                           [(1, 1)]]
    assert [len(b) for b in sink.batches] == [2, 2, 3, 2, 2, 3]


@pytest.mark.parametrize("argument", ["trajs_per_batch", "traj_format"])
def test_a_multi_collector_checks_the_arguments_before_starting_workers(argument):
    kwargs = {"trajs_per_batch": 2, "traj_format": "flat"} if argument == "traj_format" else {"trajs_per_batch": -1}
    with pytest.raises(ValueError, match=f"^InProcessSync: {argument} must be"):
        InProcessSync([_counting_2], count_up(), frames_per_batch=4, **kwargs)


def test_other_collectors_still_refuse_it_naming_those_that_take_it():
    from reap.collectors.arguments import check_torchrl_kwargs

    with pytest.raises(NotImplementedError, match="^RayCollector: trajs_per_batch=4 is not supported by reap; .*"
                                                  "Collector, MultiSyncCollector and MultiAsyncCollector take it"):
        check_torchrl_kwargs({"trajs_per_batch": 4}, "RayCollector")


# ---- reap-collectors-mp: the same, across processes --------------------------------------------------
@pytest.mark.slow  # starts two processes
def test_mp_collector_yields_whole_trajectories_as_in_process():
    pytest.importorskip("reap_mp")
    from reap import MultiSyncCollector

    envs = [functools.partial(CountingEnv, limit=2.0), functools.partial(CountingEnv, limit=3.0)]  # importable
    with MultiSyncCollector(envs, count_up(), frames_per_batch=8, total_frames=24,
                            trajs_per_batch=2, traj_format="padded") as collector:
        batches = [_worker_ids(b) for b in collector]
    assert batches == [[(0, 0), (0, 1)], [(1, 0), (0, 2)], [(0, 3), (1, 1)], [(0, 4), (0, 5)], [(1, 2), (1, 3)]]


# ---- side by side with TorchRL -------------------------------------------------------------------------------
def _counting_class(base, composite, unbounded, bounded):
    """The two-lengths counting env, written the TorchRL way on ``base`` (reap's or TorchRL's EnvBase)."""

    class Counting(base):
        def __init__(self, limit):
            super().__init__()
            self.limit = limit
            self.observation_spec = composite(observation=unbounded(shape=(1,)))
            self.action_spec = bounded(0.0, 2.0, shape=(1,))
            self.reward_spec = unbounded(shape=(1,))

        def _reset(self, tensordict=None, **kwargs):
            self.count = torch.zeros(1)
            return TensorDict(observation=self.count.clone(), done=torch.zeros(1, dtype=torch.bool),
                              terminated=torch.zeros(1, dtype=torch.bool))

        def _step(self, tensordict):
            self.count = self.count + tensordict["action"]
            done = self.count >= self.limit
            return TensorDict(observation=self.count.clone(), reward=tensordict["action"].clone(), done=done,
                              terminated=done.clone())

        def _set_seed(self, seed):
            return seed

    return Counting


@pytest.mark.parametrize("traj_format", ["padded", "cat"])
def test_batches_match_torchrl(traj_format):
    pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.data import Bounded as TBounded
    from torchrl.data import Composite as TComposite
    from torchrl.data import Unbounded as TUnbounded
    from torchrl.envs import EnvBase as TEnvBase
    from torchrl.envs import SerialEnv as TSerialEnv

    from reap import EnvBase, SerialEnv
    from reap.specs import Bounded, Composite, Unbounded

    ours_cls = _counting_class(EnvBase, Composite, Unbounded, Bounded)
    theirs_cls = _counting_class(TEnvBase, TComposite, TUnbounded, TBounded)
    kwargs = {"frames_per_batch": 8, "total_frames": 32, "trajs_per_batch": 3, "traj_format": traj_format}
    ours = Collector(SerialEnv(2, [lambda: ours_cls(2.0), lambda: ours_cls(3.0)]), count_up(), **kwargs)
    theirs = TorchRLCollector(TSerialEnv(2, [lambda: theirs_cls(2.0), lambda: theirs_cls(3.0)]), count_up(),
                              auto_register_policy_transforms=False, **kwargs)
    try:
        a, b = list(ours), list(theirs)
    finally:
        ours.shutdown()
        theirs.shutdown()
    assert len(a) == len(b) == 4
    for x, y in zip(a, b):
        assert x.batch_size == y.batch_size
        # reap's envs carry "truncated" whether or not the env writes it
        assert set(x.keys(True, True)) - set(y.keys(True, True)) == {"truncated", ("next", "truncated")}
        for key in y.keys(True, True):
            assert x[key].dtype == y[key].dtype and torch.equal(x[key], y[key]), key


def test_replay_buffer_writes_match_torchrl():
    pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.data import Bounded as TBounded
    from torchrl.data import Composite as TComposite
    from torchrl.data import Unbounded as TUnbounded
    from torchrl.envs import EnvBase as TEnvBase
    from torchrl.envs import SerialEnv as TSerialEnv

    from reap import EnvBase, SerialEnv
    from reap.specs import Bounded, Composite, Unbounded

    ours_cls = _counting_class(EnvBase, Composite, Unbounded, Bounded)
    theirs_cls = _counting_class(TEnvBase, TComposite, TUnbounded, TBounded)
    sinks = BatchSink(), BatchSink()
    kwargs = {"frames_per_batch": 8, "total_frames": 24, "trajs_per_batch": 3, "trajs_per_write": 2}
    ours = Collector(SerialEnv(2, [lambda: ours_cls(2.0), lambda: ours_cls(3.0)]), count_up(),
                     replay_buffer=sinks[0], **kwargs)
    theirs = TorchRLCollector(TSerialEnv(2, [lambda: theirs_cls(2.0), lambda: theirs_cls(3.0)]), count_up(),
                              replay_buffer=sinks[1], auto_register_policy_transforms=False, **kwargs)
    try:
        assert list(ours) == list(theirs) == [None] * 3
    finally:
        ours.shutdown()
        theirs.shutdown()
    assert len(sinks[0].batches) == len(sinks[1].batches) == 6
    for x, y in zip(*(s.batches for s in sinks)):
        assert x.batch_size == y.batch_size
        for key in y.keys(True, True):
            assert torch.equal(x[key], y[key]), key


def test_a_worker_collector_refuses_it():
    # workers hand their driver raw batches: collector_kwargs={"trajs_per_batch": ...} (Ray, RPC)
    # would be ignored there, so it is refused
    from reap.collectors.worker import CollectorWorker

    with pytest.raises(ValueError, match="^collector worker 0: trajs_per_batch regroups what a collector yields"):
        CollectorWorker.build(0, Collector, {"create_env_fn": _counting_2, "policy": count_up(), "frames_per_batch": 4,
                                             "trajs_per_batch": 1, "traj_format": "cat"})
