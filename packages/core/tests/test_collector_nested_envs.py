"""Collectors on envs of several action keys and nested done groups: the TensorDict path.

``TeamsEnv`` (written once, built for reap and for TorchRL): two envs, each with a team
``"red"`` of 2 agents and ``"blue"`` of 3, each team with its own action, observation, reward
and done flags; a team is done when its agents' counts sum to its limit, and only that team is
reset. The policy is deterministic, so batches are known exactly.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from reap import Collector
from reap_testing.teams import TEAMS, TeamsEnv, teams_env_class, teams_policy


def _flat(td):
    return {k: td.get(k) for k in td.keys(True, True)}


def test_path_is_said():
    with Collector(TeamsEnv(), teams_policy(), frames_per_batch=8, total_frames=8) as collector:
        assert collector.path == "tensordict"
        assert "action keys" in collector.path_reason
        assert "path='tensordict'" in repr(collector)
    from reap_testing.envs import AgentsEnv

    with Collector(AgentsEnv(), None, frames_per_batch=4, total_frames=4) as collector:
        assert collector.path == "tensordict" and "('agents', 'action')" in collector.path_reason
    from reap import GymEnv

    with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=4) as collector:
        assert collector.path == "arrays" and collector.path_reason is None
        assert "path=" not in repr(collector)


def test_exact_batches():
    with Collector(TeamsEnv(), teams_policy(), frames_per_batch=8, total_frames=16) as collector:
        first, second = (b.clone() for b in collector)
    leaves = {k: (tuple(v.shape), v.dtype) for k, v in _flat(first).items()}
    expected = {("collector", "traj_ids"): ((2, 4), torch.int64)}
    for team, n in TEAMS.items():
        for side in ((), ("next",)):
            expected[(*side, team, "obs")] = ((2, 4, n, 1), torch.float32)
            for flag in ("done", "terminated", "truncated"):
                expected[(*side, team, flag)] = ((2, 4, n, 1), torch.bool)
        expected[(team, "action")] = ((2, 4, n), torch.int64)
        expected[("next", team, "reward")] = ((2, 4, n, 1), torch.float32)
    assert leaves == expected
    assert first.names == [None, "time"]
    # red: counts 0 -> 1 -> 3 (sum 6 >= 3, done, reset); blue: 0 -> 1 -> 3 -> 5 (sum 15 >= 10)
    for env in range(2):
        assert first["red", "obs"][env, :, 0, 0].tolist() == [0, 1, 0, 1]
        assert first["next", "red", "obs"][env, :, 0, 0].tolist() == [1, 3, 1, 3]
        assert first["next", "red", "done"][env, :, 0, 0].tolist() == [False, True, False, True]
        assert first["blue", "obs"][env, :, 0, 0].tolist() == [0, 1, 3, 0]
        assert first["next", "blue", "done"][env, :, 0, 0].tolist() == [False, False, True, False]
        assert first["blue", "action"][env, :, 0].tolist() == [1, 2, 2, 1]
        assert not first["red", "done"].any() and not first["blue", "done"].any()
        # the next root: blue goes on from its last "next", red (done) was reset
        assert second["blue", "obs"][env, 0, 0, 0] == first["next", "blue", "obs"][env, -1, 0, 0] == 1
        assert second["red", "obs"][env, 0, 0, 0] == 0
    # a new trajectory for each env after any team is done (steps 1, 2 and 3)
    assert first["collector", "traj_ids"].tolist() == [[0, 0, 2, 4], [1, 1, 3, 5]]
    assert second["collector", "traj_ids"].tolist() == [[6, 6, 8, 8], [7, 7, 9, 9]]


def test_random_policy_fills_every_action():
    def collect(seed):
        with Collector(TeamsEnv(), None, frames_per_batch=8, total_frames=16) as collector:
            collector.set_seed(seed)
            return [b.clone() for b in collector]

    first, again, other = collect(3), collect(3), collect(4)
    for team, n in TEAMS.items():
        action = first[0][team, "action"]
        assert action.shape == (2, 4, n) and action.min() >= 0 and action.max() <= 2
    assert all((a == b).all() for a, b in zip(first, again))
    assert not all((a == b).all() for a, b in zip(first, other))


def test_init_random_frames_then_policy():
    with Collector(TeamsEnv(), teams_policy(), frames_per_batch=8, total_frames=24, init_random_frames=8) as c:
        c.set_seed(0)
        batches = [b.clone() for b in c]
    # after the random batch the policy plays count % 2 + 1
    for batch in batches[1:]:
        for team in TEAMS:
            obs = batch[team, "obs"].squeeze(-1).long()
            assert (batch[team, "action"] == obs % 2 + 1).all()


def test_reset_index_set_truncated_and_split():
    with Collector(TeamsEnv(), teams_policy(), frames_per_batch=10, total_frames=20, set_truncated=True,
                   split_trajs=False) as collector:
        it = iter(collector)
        first = next(it)
        for team in TEAMS:
            assert first["next", team, "truncated"][:, -1].all() and first["next", team, "done"][:, -1].all()
            assert not first["next", team, "truncated"][:, :-1].any()
        collector.reset(1)
        second = next(it)
    ids = first["collector", "traj_ids"]
    assert second["red", "obs"][1, 0].eq(0).all() and second["blue", "obs"][1, 0].eq(0).all()
    assert second["collector", "traj_ids"][1, 0] > ids.max()
    assert second["collector", "traj_ids"][0, 0] == ids[0, -1]  # env 0 goes on


def test_serial_env_of_nested_envs():
    with Collector([TeamsEnv, TeamsEnv], teams_policy(), frames_per_batch=16, total_frames=16) as collector:
        batch = next(iter(collector))
    assert batch.batch_size == (2, 2, 4)
    assert batch["red", "obs"][:, :, :, 0, 0].tolist() == [[[0, 1, 0, 1]] * 2] * 2


@pytest.mark.parametrize("sync", [True, False])
def test_multi_process(sync):
    from reap import MultiAsyncCollector, MultiSyncCollector

    with Collector(TeamsEnv(), teams_policy(), frames_per_batch=8, total_frames=8, set_truncated=True) as collector:
        local = next(iter(collector))
    cls = MultiSyncCollector if sync else MultiAsyncCollector
    kwargs = {"cat_results": "stack", "set_truncated": True} if sync else {"set_truncated": True}
    envs = [TeamsEnv, TeamsEnv] if sync else [TeamsEnv]  # worker processes start slowly: as few as needed
    with cls(envs, teams_policy(), frames_per_batch=16 if sync else 8, total_frames=32, **kwargs) as collector:
        batch = next(iter(collector))
    if sync:
        assert batch.batch_size == (2, 2, 4)
        parts = batch.unbind(0)
    else:
        assert batch.batch_size == (2, 4)
        parts = [batch]
    for part in parts:
        for key, value in _flat(local).items():
            if key != ("collector", "traj_ids"):
                assert torch.equal(part.get(key), value), key
    ids = batch["collector", "traj_ids"]
    assert ids.unique().numel() == (12 if sync else 6)  # distinct across workers
    assert batch["next", "red", "truncated"][..., -1, :, :].all()  # set_truncated, in the worker's locked slot


def test_side_by_side_with_torchrl():
    pytest.importorskip("torchrl")
    from torchrl.collectors import Collector as TorchRLCollector
    from torchrl.data import Categorical as TCategorical
    from torchrl.data import Composite as TComposite
    from torchrl.data import Unbounded as TUnbounded
    from torchrl.envs import EnvBase as TEnvBase

    TorchRLTeams = teams_env_class(TEnvBase, TComposite, TUnbounded, TCategorical)
    with Collector(TeamsEnv(), teams_policy(), frames_per_batch=10, total_frames=30) as collector:
        ours = [b.clone() for b in collector]
    collector = TorchRLCollector(TorchRLTeams(), teams_policy(), frames_per_batch=10, total_frames=30)
    try:
        theirs = [b.clone() for b in collector]
    finally:
        collector.shutdown()
    for a, b in zip(ours, theirs, strict=True):
        assert a.batch_size == b.batch_size and a.names == b.names
        fa, fb = _flat(a), _flat(b)
        assert fa.keys() == fb.keys()
        for key in fb:
            assert fa[key].dtype == fb[key].dtype and torch.equal(fa[key], fb[key]), key
    # the random policy: every action key, the same layout
    with Collector(TeamsEnv(), None, frames_per_batch=4, total_frames=4) as collector:
        ours = next(iter(collector))
    collector = TorchRLCollector(TorchRLTeams(), None, frames_per_batch=4, total_frames=4)
    try:
        theirs = next(iter(collector))
    finally:
        collector.shutdown()
    assert {k: (v.shape, v.dtype) for k, v in _flat(ours).items()} == {
        k: (v.shape, v.dtype) for k, v in _flat(theirs).items()}


def test_empty_batch_layout_matches():
    with Collector(TeamsEnv(), teams_policy(), frames_per_batch=8, total_frames=8) as collector:
        empty = collector.empty_batch()
        batch = next(iter(collector))
    assert isinstance(empty, TensorDict)
    assert {k: (v.shape, v.dtype) for k, v in _flat(empty).items()} == {
        k: (v.shape, v.dtype) for k, v in _flat(batch).items()}
    assert not any(v.any() for v in _flat(empty).values())
