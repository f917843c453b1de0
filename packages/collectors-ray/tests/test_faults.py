"""Faults in Ray actors: an actor that exits, is killed inside a prefetched rollout or dies past
max_restarts, and a restarted actor's seed (errors naming the actor, restarts with the latest
weights and hangs, as on every backend, are reap_testing's contract: test_contract.py)."""

import functools
import time

import pytest
import torch

from reap import Collector, GymEnv
from reap_ray import RayCollector, RayCollectorError
from reap_ray.collector import actor_seed
from reap_ray.testing import ExitingEnv, HoldingEnv, kill_actor, reap_actors_alive
from reap_testing import ConstantPolicy, env_fn

VERSION = ("collector", "policy_version")
pytestmark = pytest.mark.slow  # each test starts Ray actors (torch imports): seconds each


def _weight(batch):
    return batch["action"].flatten().unique().tolist()


def test_restarted_actor_is_reseeded_with_a_seed_of_its_own():
    def first_observation(seed: int):
        with Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=2) as local:
            local.set_seed(seed)
            return next(iter(local))["observation"][0]

    # sync: no request is in flight between batches, and kill_actor waits until the actor is dead
    with RayCollector(functools.partial(GymEnv, "Pendulum-v1"), None, num_collectors=1, frames_per_batch=2,
                      total_frames=-1, sync=True, on_worker_failure="restart") as collector:
        collector.set_seed(7)
        batches = iter(collector)
        first = next(batches)["observation"].reshape(-1, 3)[0]
        assert torch.equal(first, first_observation(actor_seed(7, 0)))
        kill_actor(collector.remote_collectors[0])
        with pytest.warns(RuntimeWarning, match="collector actor 0 failed .*died"):
            redone = next(batches)["observation"].reshape(-1, 3)[0]  # the new actor's first batch, from its reset
        assert collector.worker_restarts == [1]
        assert actor_seed(7, 0, 1) != actor_seed(7, 0)
        assert torch.equal(redone, first_observation(actor_seed(7, 0, 1))) and not torch.equal(redone, first)


def test_actor_exiting_mid_batch_is_restarted_and_the_lost_batch_redone(tmp_path):
    # it exits in its first rollout: before any batch is handed back (and any rollout prefetched)
    make_env = functools.partial(ExitingEnv, exit_at=2, once_file=str(tmp_path / "exited"))
    policy = ConstantPolicy(1.0)
    with RayCollector(make_env, policy.as_module(), num_collectors=1, worker_tags=True, frames_per_batch=4,
                      total_frames=12, on_worker_failure="restart") as collector:
        policy.weight.data.fill_(9.0)
        collector.update_policy_weights_(policy)  # sent with the first request
        with pytest.warns(RuntimeWarning, match="collector actor 0 failed .*died"):
            batches = list(collector)
        assert (tmp_path / "exited").exists()
        assert collector.worker_restarts == [1]
        assert len(batches) == 3 and collector.frames == 12
        # batch 1 died with the actor; its redo, by an actor built with weights 1, ran the latest
        assert [_weight(b) for b in batches] == [[9.0]] * 3
        assert [b[VERSION].unique().tolist() for b in batches] == [[1]] * 3


def _wait_for(path, timeout: float = 30.0) -> str:
    """The text of file ``path`` once it is there and not empty (at most ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} was not written within {timeout} s"
        time.sleep(0.02)
    return path.read_text()


def test_actor_killed_inside_a_prefetched_rollout_is_restarted_on_the_latest_weights(tmp_path):
    # async: the actor hands back its first batch (steps 1-4) and at once starts its next rollout
    # in the background, while the driver's request for it waits; that rollout holds at its first
    # step (5), where the actor is killed. One actor, so no other delivers the lost batch.
    held = tmp_path / "held"
    make_env = functools.partial(HoldingEnv, hold_at=5, once_file=str(held))
    policy = ConstantPolicy(1.0)
    with RayCollector(make_env, policy.as_module(), num_collectors=1, worker_tags=True, frames_per_batch=4, total_frames=12,
                      sync=False, max_restarts=1, on_worker_failure="restart") as collector:
        batches = []
        with pytest.warns(RuntimeWarning, match="collector actor 0 failed .*died"):
            for batch in collector:
                batches.append(batch)
                if len(batches) == 1:
                    policy.weight.data.fill_(5.0)
                    collector.update_policy_weights_(policy)  # version 1, for the rollout after the prefetched one
                    thread = _wait_for(held)  # the prefetched rollout is under way
                    kill_actor(collector.remote_collectors[0])
        assert [b.batch_size for b in batches] == [torch.Size([4])] * 3  # nothing lost or doubled
        assert collector.frames == 12
        assert collector.worker_restarts == [1]
        # the lost batch is redone by the new actor, which starts on the latest weights
        assert [b[VERSION].unique().tolist() for b in batches] == [[0], [1], [1]]
        assert [_weight(b) for b in batches] == [[1.0], [5.0], [5.0]]
        assert batches[1]["observation"][0, 0] == 0  # from the new actor's reset, not the held rollout
        assert thread != "MainThread"  # the held rollout ran in the background: it was prefetched
    assert not reap_actors_alive()


def test_actor_dying_past_max_restarts_is_an_error_naming_it():
    make_env = functools.partial(ExitingEnv, exit_at=2)
    with RayCollector([env_fn(), make_env], ConstantPolicy(1.0).as_module(), frames_per_batch=4,
                      total_frames=40, sync=True, max_restarts=1, on_worker_failure="restart") as collector:
        with pytest.warns(RuntimeWarning), pytest.raises(RayCollectorError) as info:
            list(collector)
        assert info.value.worker_idx == 1
        assert "collector actor 1 died" in str(info.value)
        assert "gave up after 1 restarts of this worker" in str(info.value)


