"""RayCollector: TorchRL's layout in sync and async mode, weights, seeds, replay buffer, backends."""

import asyncio
import doctest
import importlib
import json
import time

import pytest
import torch

from reap import Collector, MultiCollector
from reap.collectors.worker import TRAJ_ID_BLOCK
from reap_ray import RayCollector, RayReplayBuffer, RayWeightUpdater
from reap_ray.testing import actor_pids, reap_actors_alive
from reap_replay import LazyTensorStorage
from reap_testing import ConstantPolicy, env_fn, shm_mapped_by, shm_segments

VERSION = ("collector", "policy_version")
WORKER = ("collector", "worker_id")
TRAJ = ("collector", "traj_ids")


def _weight(batch):
    """The constant action of every frame of ``batch`` (its policy's single weight)."""
    return batch["action"].flatten().unique().tolist()


def test_sync_layout_weights_seeds_state_add_collectors_and_actors_kept_after_iteration():
    policy = ConstantPolicy(1.0)
    collector = RayCollector(env_fn(batch=2, episode_len=4), policy.as_module(), num_collectors=2,
                             worker_tags=True, frames_per_batch=16, total_frames=48, sync=True)
    with collector:
        seen = []
        ids: list[set] = [set(), set()]
        for i, batch in enumerate(collector):
            # [num_collectors, n_envs, frames_per_batch // num_collectors // n_envs]
            assert batch.batch_size == torch.Size([2, 2, 4])
            assert batch[WORKER][:, 0, 0].tolist() == [0, 1]
            for a in (0, 1):
                ids[a] |= set(batch[TRAJ][a].flatten().tolist())
            seen.append((_weight(batch), batch[VERSION].unique().tolist()))
            policy.weight.data.fill_(10.0 + i)
            collector.update_policy_weights_(policy)
        assert seen == [([1.0], [0]), ([10.0], [1]), ([11.0], [2])]
        # trajectory ids: each actor has its own block, so none repeats across actors
        assert ids[0] == set(range(len(ids[0]))) and len(ids[0]) > 2  # episodes of 4 steps, 2 envs
        assert ids[1] == {TRAJ_ID_BLOCK + i for i in range(len(ids[1]))}
        assert collector.frames == 48
        assert len(reap_actors_alive()) == 2  # finishing the iteration keeps the actors
        # a second iteration reuses them; worker_ids reaches only actor 1
        collector.total_frames = 64
        collector.update_policy_weights_({"module.weight": torch.tensor([5.0])}, worker_ids=[1])
        batch = next(iter(collector))
        assert _weight(batch[0]) == [12.0] and _weight(batch[1]) == [5.0]
        with pytest.raises(ValueError, match=r"worker_ids must be worker indices in \[0, 2\)"):
            collector.update_policy_weights_(policy, worker_ids=[3])
        state = collector.state_dict()
        assert len(state) == 2 and state[0]["frames"] == 32  # each actor's own count (4 batches of 8)
        collector.load_state_dict(state)
        assert isinstance(collector.weight_updater, RayWeightUpdater)
        # an added actor collects the same share as the others (8 frames, set at construction)
        # and has its own block of trajectory ids
        collector.add_collectors(env_fn(batch=2, episode_len=4))
        assert collector.num_collectors == 3 and len(collector.node_ids) == 3
        collector.total_frames = collector.frames + 24
        batch = next(iter(collector))
        assert batch.batch_size == torch.Size([3, 2, 4])
        assert batch[WORKER][:, 0, 0].tolist() == [0, 1, 2]
        assert batch[TRAJ][2].min().item() >= 2 * TRAJ_ID_BLOCK
        # it runs the central policy as it is now (12.0), not as it was at construction (1.0)
        assert _weight(batch[2]) == [12.0] and batch[VERSION][2].unique().tolist() == [collector.policy_version]
        asyncio.run(collector.async_shutdown())
        assert collector._closed and not reap_actors_alive()
    assert collector.remote_collectors and collector._closed


def test_async_update_after_each_batch_and_max_weight_update_interval():
    """No actor collects with weights more than k batches old (k=0: update_after_each_batch).

    With k=2 the actors prefetch: the rollout under way when weights are sent counts too."""
    policy = ConstantPolicy(0.0)
    with RayCollector([env_fn(), env_fn()], policy.as_module(), worker_tags=True, frames_per_batch=3, total_frames=3 * 16,
                      max_weight_update_interval=2) as collector:
        for k in (2, 0):
            runs: dict[int, list[tuple[int, float]]] = {0: [], 1: []}
            for batch in collector:
                assert batch.batch_size == torch.Size([3])
                runs[batch[WORKER][0].item()].append((batch[VERSION][0].item(), _weight(batch)[0]))
                policy.weight.data += 1.0  # the trainer moves on; no explicit update
            assert len({v for got in runs.values() for v, _ in got}) >= 3, runs  # weights did move
            for got in runs.values():
                versions = [v for v, _ in got]
                streak = longest = 1
                for a, b in zip(versions, versions[1:]):
                    streak = streak + 1 if a == b else 1
                    longest = max(longest, streak)
                assert longest <= k + 1, runs  # never more than k batches on the same weights
                assert [w for _, w in got] == sorted(w for _, w in got)
            collector.update_after_each_batch = True
            collector.max_weight_update_interval = 0
            collector.total_frames += 3 * 12


def test_policy_factory_defers_weight_sync_until_weights_are_given_collector_backend_ray():
    collector = Collector(env_fn(), policy_factory=lambda: ConstantPolicy(3.0).as_module(), backend="ray",
                          sync=True, worker_tags=True, frames_per_batch=4, total_frames=8, max_weight_update_interval=0)
    with collector:
        assert isinstance(collector, RayCollector) and collector._sync
        first = next(iter(collector))
        assert first.batch_size == torch.Size([1, 4])
        assert _weight(first) == [3.0] and first[VERSION].unique().tolist() == [0]
        with pytest.raises(ValueError, match="no weights given and the collector has no policy to read them from"):
            collector.update_policy_weights_()  # no central policy to read
        with pytest.raises(ValueError, match=r"'module.weight' has shape \(1, 1\) but the policy's has shape \(1,\)"):
            collector.update_policy_weights_({"module.weight": torch.ones(1, 1)})
        with pytest.raises(ValueError, match="module.weight"):
            collector.update_policy_weights_({"module.weight": torch.tensor([0.1], dtype=torch.float64)})
        # exact casts are accepted (int64 7 -> float32 7.0)
        collector.update_policy_weights_(weights_dict={"policy": {"module.weight": torch.tensor([7])}})
        assert _weight(next(iter(collector))) == [7.0]


def test_bad_arguments_fail_before_any_actor_starts():
    with pytest.raises(ValueError, match="sync=True splits frames_per_batch=9 evenly across 2 collectors"):
        RayCollector(env_fn(), None, num_collectors=2, frames_per_batch=9, sync=True)
    with pytest.raises(ValueError, match="create_env_fn has 2 entries but there are 3 collectors"):
        RayCollector([env_fn(), env_fn()], None, num_collectors=3, frames_per_batch=9)
    with pytest.raises(ValueError, match="max_weight_update_interval must be -1"):
        RayCollector(env_fn(), None, frames_per_batch=9, max_weight_update_interval=-2)
    with pytest.raises(TypeError, match="replay_buffer must be a RayReplayBuffer"):
        RayCollector(env_fn(), None, frames_per_batch=9, replay_buffer=[])
    with pytest.raises(ValueError, match="collector_class must be a collector class or one of"):
        RayCollector(env_fn(), None, frames_per_batch=9, collector_class="parallel")
    with pytest.warns(DeprecationWarning, match="actor_timeout is deprecated; pass worker_timeout=0"), \
            pytest.raises(ValueError, match="worker_timeout must be a positive number of seconds"):
        RayCollector(env_fn(), None, frames_per_batch=9, actor_timeout=0)
    with pytest.raises(TypeError, match="RayCollector: unexpected keyword argument 'split_traj'"):  # a typo
        RayCollector(env_fn(), None, frames_per_batch=9, split_traj=True)
    with pytest.raises(NotImplementedError, match="RayCollector: compile_policy=True is not supported by reap"):
        RayCollector(env_fn(), None, frames_per_batch=9, collector_kwargs={"compile_policy": True})


def test_replay_buffer_gets_every_frame_exactly_once_from_two_actors():
    rb = RayReplayBuffer(storage=LazyTensorStorage(1000), batch_size=8)
    with rb, RayCollector([env_fn(batch=2), env_fn(batch=2)], ConstantPolicy(1.0).as_module(),
                          worker_tags=True, frames_per_batch=20, total_frames=200, replay_buffer=rb) as collector:
        it = iter(collector)
        assert [next(it) for _ in range(3)] == [None] * 3
        with collector.pause():  # requests in flight drained, writes flushed: nothing moves
            paused = len(rb)
            time.sleep(0.5)
            assert len(rb) == paused and paused % 20 == 0 and paused >= 60
        assert all(batch is None for batch in it)  # the drained batches count, once
        assert collector.frames == 200 and len(rb) == 200
        everything = rb[:]
        keys = torch.stack([everything[WORKER], everything["collector", "traj_ids"],
                            everything["observation"][:, 0].long()], -1)
        per_actor = everything[WORKER].bincount().tolist()
        assert sum(per_actor) == 200 and all(n > 0 and n % 20 == 0 for n in per_actor), per_actor
        assert len({tuple(row) for row in keys.tolist()}) == 200  # no frame twice


def test_multicollector_backend_ray_async_with_envs_per_collector_prefetches_the_next_rollout():
    multi = MultiCollector([env_fn()], ConstantPolicy(2.0).as_module(), sync=False, backend="ray",
                           worker_tags=True, frames_per_batch=8, total_frames=16, num_workers_per_collector=2)
    with multi:
        assert isinstance(multi, RayCollector) and not multi._sync
        batches = list(multi)
        assert [b.batch_size for b in batches] == [torch.Size([2, 4])] * 2  # 2 envs per actor
        assert [_weight(b) for b in batches] == [[2.0]] * 2
        # the actor starts its next rollout as it hands a batch back
        multi.total_frames = -1
        multi.set_seed(7)
        it = iter(multi)
        seeded = next(it)["observation"]
        seen = []
        for i in range(4):
            batch = next(it)
            seen.append((_weight(batch)[0], batch[VERSION].unique().tolist()))
            if i == 0:
                multi.update_policy_weights_({"module.weight": torch.tensor([5.0])})
        # pushed after batch 1: batch 2 was already requested (as without prefetching) and batch 3
        # under way when the weights arrived; batch 4 is the first on them; versions stay exact
        assert seen == [(2.0, [0]), (2.0, [0]), (2.0, [0]), (5.0, [1])]
        multi.set_seed(7)  # the batch requested and the rollout prefetched predate the seed: dropped
        assert torch.equal(next(it)["observation"], seeded)


@pytest.mark.slow
def test_collector_class_sync_runs_worker_processes_inside_each_actor(tmp_path):
    with RayCollector(env_fn(), ConstantPolicy(1.0).as_module(), collector_class="sync", num_collectors=1,
                      num_workers_per_collector=2, worker_tags=True, frames_per_batch=8, total_frames=16, sync=True) as collector:
        # the actor's two worker processes trace to distinct files
        collector.enable_profile(workers=[0], num_rollouts=2, save_path=str(tmp_path / "t_{worker_idx}.json"))
        batches = list(collector)
        collector.disable_profile()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["t_0.0.json", "t_0.1.json"]
        assert [t.worker for t in collector.timings()] == ["0.0", "0.1"]
        # [1 actor, 2 worker processes, 4 steps]; the inner workers' ids stay in the batch
        assert [b.batch_size for b in batches] == [torch.Size([1, 2, 4])] * 2
        assert batches[0][WORKER][0, :, 0].tolist() == [0, 1]
        collector.update_policy_weights_({"module.weight": torch.tensor([4.0])})
        collector.total_frames = 24
        assert _weight(next(iter(collector))) == [4.0]
        # the worker processes' locks are named semaphores: shutdown releases them before ray.kill
        # (which ends the actor's resource tracker too)
        semaphores = {n for n in shm_mapped_by(actor_pids(collector.remote_collectors)) if n.startswith("sem.mp-")}
        assert semaphores
    assert not semaphores & shm_segments()


def test_profiling_traces_only_the_chosen_actors_and_times_each(tmp_path):
    with RayCollector([env_fn(), env_fn()], ConstantPolicy(1.0).as_module(), frames_per_batch=4,
                      total_frames=24) as collector:
        collector.enable_profile(workers=[1], num_rollouts=2, save_path=str(tmp_path / "t_{worker_idx}.json"))
        assert len(list(collector)) == 6
        timings = collector.timings()
        assert [t.worker for t in timings] == ["0", "1"]
        assert sum(t.frames for t in timings) >= 24 and all(t.rollouts >= 1 for t in timings)
        collector.disable_profile()  # writes what was recorded
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t_1.json"]
    trace = json.loads((tmp_path / "t_1.json").read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"reap::env_step", "reap::policy"} <= names
    # rollout 0 is the warm-up (warmup_rollouts=1), rollout 1 is recorded, none after num_rollouts=2
    assert {n for n in names if n.startswith("reap::rollout ")} == {"reap::rollout 1"}


def test_reap_collect_cli_batch_the_backend_cannot_split_is_a_clean_error(capsys):
    from reap.cli import main

    with pytest.raises(SystemExit) as info:
        main(["collect", "--env", "CartPole-v1", "--frames", "80", "--backend", "ray", "--workers", "2",
              "--frames-per-batch", "41", "--no-progress"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("reap: error: --backend 'ray' with --workers 2, --frames-per-batch 41: ")
    assert "splits frames_per_batch=41 evenly across 2 collectors; pass a multiple of 2" in err
    assert "Traceback" not in err


def test_reap_collect_cli_backend_ray(capsys):
    from reap.cli import main

    main(["collect", "--env", "CartPole-v1", "--frames", "80", "--backend", "ray", "--workers", "2",
          "--num-envs", "2", "--frames-per-batch", "40", "--no-progress", "--seed", "1"])
    assert "collected 80 frames" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["reap_ray", "reap_ray.collector", "reap_ray.replay_buffer", "reap_ray.batches",
                                  "reap_ray.weight_sync", "reap_ray.plugin", "reap_ray.testing",
                                  "reap_ray.eval_worker"])
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and (result.attempted > 0 or name == "reap_ray.testing")


def test_public_classes_have_examples():
    import reap

    for name in ("RayCollector", "RayReplayBuffer", "RayWeightUpdater", "RayWeightSyncScheme", "RayEvalWorker"):
        assert ">>>" in getattr(reap, name).__doc__, name


def test_start_writes_every_frame_into_the_buffer_in_the_background():
    import asyncio

    from reap_testing import wait_until

    rb = RayReplayBuffer(storage=LazyTensorStorage(1000), batch_size=8)
    with rb:
        collector = RayCollector([env_fn(batch=2)], ConstantPolicy(1.0).as_module(), frames_per_batch=20,
                                 total_frames=100, replay_buffer=rb)
        collector.start()
        wait_until(lambda: not collector.is_running(), timeout=120, what="the end of the background collection")
        assert len(rb) == 100 and collector.frames == 100
        asyncio.run(collector.async_shutdown(timeout=30))  # a coroutine, as TorchRL's
        assert collector._closed and not collector.is_running()
