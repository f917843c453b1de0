"""``InitTracker`` and ``StepCounter`` on envs whose done flags live in nested groups (multi-agent
envs), side by side with TorchRL's: an entry per done group, beside its flags.

``TeamsEnv`` (written once, built for reap and for TorchRL): two envs, each with a team ``"red"``
of 2 agents and ``"blue"`` of 3, each team with its own done flags (done when its count reaches
its limit, reset alone); with ``root_done`` a top-level ``"done"`` too, set when both teams are
done, the teams' flags then with it (their groups are inside the root's and get no entries of
their own, as in TorchRL). ``LazyEnv``: two envs of two
agents whose observations differ in shape (a lazy-stacked, heterogeneous group).
"""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from reap.envs import EnvBase
from reap.envs.transforms import Compose, InitTracker, StepCounter, TransformedEnv
from reap.envs.utils import check_env_specs
from reap.specs import Categorical, Composite, Unbounded

TEAMS = {"red": 2, "blue": 3}
LIMITS = {"red": 2, "blue": 3}


def teams_env_class(base, composite, unbounded, categorical):
    """``TeamsEnv`` on the given library's ``EnvBase`` and specs."""

    class TeamsEnv(base):
        def __init__(self, root_done: bool = False):
            super().__init__(batch_size=(2,))
            self.root_done = root_done
            obs, act, rew, done = {}, {}, {}, {}
            for team, n in TEAMS.items():
                shape = (2, n)
                flag = categorical(2, shape=(*shape, 1), dtype=torch.bool)
                obs[team] = composite(obs=unbounded(shape=(*shape, 1)), shape=shape)
                act[team] = composite(action=categorical(2, shape=shape), shape=shape)
                rew[team] = composite(reward=unbounded(shape=(*shape, 1)), shape=shape)
                done[team] = composite(done=flag, terminated=flag.clone(), shape=shape)
            if root_done:
                flag = categorical(2, shape=(2, 1), dtype=torch.bool)
                done.update(done=flag, terminated=flag.clone())
            self.observation_spec = composite(obs, shape=(2,))
            self.action_spec = composite(act, shape=(2,))
            self.reward_spec = composite(rew, shape=(2,))
            self.done_spec = composite(done, shape=(2,))
            self.counts = {team: torch.zeros(2, 1) for team in TEAMS}

        def _reset(self, tensordict):
            out = self.full_done_spec.zero()
            root = None if tensordict is None else tensordict.get("_reset", None)
            for team, n in TEAMS.items():
                reset = None if tensordict is None else tensordict.get((team, "_reset"), root)
                if reset is None:
                    self.counts[team].zero_()
                else:
                    self.counts[team][reset.reshape(2, -1).any(-1)] = 0
                out.set((team, "obs"), self.counts[team].unsqueeze(1).expand(2, n, 1).clone())
            return out

        def _step(self, tensordict):
            out = self.full_done_spec.zero()
            finished = []
            for team, n in TEAMS.items():
                count = self.counts[team]
                count += tensordict.get((team, "action")).any(-1, keepdim=True).float()
                done = (count >= LIMITS[team]).unsqueeze(1).expand(2, n, 1).clone()
                out.set((team, "obs"), count.unsqueeze(1).expand(2, n, 1).clone())
                out.set((team, "reward"), torch.ones(2, n, 1))
                out.set((team, "done"), done)
                out.set((team, "terminated"), done.clone())
                finished.append(done.any(1))
            if self.root_done:
                both = finished[0] & finished[1]
                for name in ("done", "terminated"):
                    out.set(name, both.clone())
                    for team, n in TEAMS.items():
                        out.set((team, name), both.unsqueeze(1).expand(2, n, 1).clone())
            return out

        def _set_seed(self, seed):
            return seed

    return TeamsEnv


def lazy_env_class(base, composite, unbounded, categorical):
    """``LazyEnv`` on the given library's ``EnvBase`` and specs: agent 0 sees 2 numbers, agent 1
    sees 3; both see the env's count, which each step adds whether any agent acted to; done at 3."""

    class LazyEnv(base):
        def __init__(self):
            super().__init__(batch_size=(2,))
            agents = torch.stack([composite(obs=unbounded(shape=(2,))), composite(obs=unbounded(shape=(3,)))], 0)
            self.observation_spec_unbatched = composite(agents=agents)
            self.action_spec_unbatched = composite(
                agents=composite(action=categorical(2, shape=(2, 1)), shape=(2,)))
            self.reward_spec_unbatched = composite(agents=composite(reward=unbounded(shape=(2, 1)), shape=(2,)))
            self.done_spec_unbatched = composite(
                agents=composite(done=categorical(2, shape=(2, 1), dtype=torch.bool), shape=(2,)))
            self.count = torch.zeros(2)

        def _observe(self, done):
            agents = LazyStackedTensorDict(
                TensorDict(obs=self.count[:, None].expand(2, 2).clone(), batch_size=(2,)),
                TensorDict(obs=self.count[:, None].expand(2, 3).clone(), batch_size=(2,)), stack_dim=1)
            agents.set("done", done)
            return TensorDict(agents=agents, batch_size=(2,))

        def _reset(self, tensordict):
            reset = None if tensordict is None else tensordict.get(("agents", "_reset"), None)
            if reset is None:
                self.count.zero_()
            else:
                self.count[reset.reshape(2, -1).any(-1)] = 0
            return self._observe(torch.zeros(2, 2, 1, dtype=torch.bool))

        def _step(self, tensordict):
            self.count += tensordict.get(("agents", "action")).reshape(2, -1).any(-1).float()
            out = self._observe((self.count >= 3)[:, None, None].expand(2, 2, 1).clone())
            out.set(("agents", "reward"), torch.ones(2, 2, 1))
            return out

        def _set_seed(self, seed):
            return seed

    return LazyEnv


def policy_of(env):
    """All agents act, but env 1 idles every third call: the envs' episodes drift apart."""
    calls = [0]

    def policy(td):
        calls[0] += 1
        actions = env.full_action_spec.one()
        if calls[0] % 3 == 0:
            actions = torch.stack([actions[0], env.full_action_spec.zero()[1]], 0)
        return td.update(actions)

    return policy


def flags(rollout, env) -> dict:
    """The done flags and the transforms' entries of a rollout, root and ``"next"``, as lists."""
    keys = set(env.full_done_spec.keys(True, True))
    keys |= {k for k in env.observation_spec.keys(True, True)
             if (k if isinstance(k, str) else k[-1]) in ("is_init", "step_count")}
    out = {}
    for key in keys:
        key = (key,) if isinstance(key, str) else key
        for path in (key, ("next", *key)):
            value = rollout.get(path)
            out[path] = (tuple(value.shape), value.dtype, value.long().flatten().tolist())
    return out


TRANSFORMS = {
    "init": lambda m: m.InitTracker(),
    "count": lambda m: m.StepCounter(),
    "count_max": lambda m: m.StepCounter(max_steps=2),
    "both": lambda m: m.Compose(m.InitTracker(), m.StepCounter(max_steps=2)),
}


def _reap_module():
    import reap.envs.transforms as m

    return m


def _rollout(env_cls, transform, **kwargs):
    env = TransformedEnv(env_cls(**kwargs), transform)
    return env, env.rollout(7, policy_of(env), break_when_any_done=False)


def _teams_side_by_side(make_transform, root_done):
    """``(env, rollout)`` of TeamsEnv under ``make_transform(module)`` on reap, then on TorchRL."""
    torchrl_envs = pytest.importorskip("torchrl.envs")
    from torchrl.data import Categorical as TCategorical
    from torchrl.data import Composite as TComposite
    from torchrl.data import Unbounded as TUnbounded

    ours_cls = teams_env_class(EnvBase, Composite, Unbounded, Categorical)
    theirs_cls = teams_env_class(torchrl_envs.EnvBase, TComposite, TUnbounded, TCategorical)
    env, ours = _rollout(ours_cls, make_transform(_reap_module()), root_done=root_done)
    ref_env = torchrl_envs.TransformedEnv(theirs_cls(root_done=root_done), make_transform(torchrl_envs))
    return env, ours, ref_env, ref_env.rollout(7, policy_of(ref_env), break_when_any_done=False)


@pytest.mark.parametrize("root_done", [False, True])
@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_teams_env_matches_torchrl(name, root_done):
    env, ours, ref_env, theirs = _teams_side_by_side(TRANSFORMS[name], root_done)
    assert sorted(map(str, env.observation_spec.keys(True, True))) == sorted(
        map(str, ref_env.observation_spec.keys(True, True)))
    assert sorted(map(str, env.full_done_spec.keys(True, True))) == sorted(
        map(str, ref_env.full_done_spec.keys(True, True)))
    assert sorted(map(str, env.full_state_spec.keys(True, True))) == sorted(
        map(str, ref_env.full_state_spec.keys(True, True)))
    assert flags(ours, env) == flags(theirs, ref_env)


def test_lazy_stacked_env_matches_torchrl():
    torchrl_envs = pytest.importorskip("torchrl.envs")
    from torchrl.data import Categorical as TCategorical
    from torchrl.data import Composite as TComposite
    from torchrl.data import Unbounded as TUnbounded

    ours_cls = lazy_env_class(EnvBase, Composite, Unbounded, Categorical)
    theirs_cls = lazy_env_class(torchrl_envs.EnvBase, TComposite, TUnbounded, TCategorical)
    env, ours = _rollout(ours_cls, TRANSFORMS["both"](_reap_module()))
    ref_env = torchrl_envs.TransformedEnv(theirs_cls(), TRANSFORMS["both"](torchrl_envs))
    theirs = ref_env.rollout(7, policy_of(ref_env), break_when_any_done=False)
    assert flags(ours, env) == flags(theirs, ref_env)
    # max_steps=2 ends every episode before the env does (at a count of 3), in both envs
    assert flags(ours, env)[("next", "agents", "step_count")][2] == ([1, 1, 2, 2] * 3 + [1, 1]) * 2
    assert env.full_state_spec["agents"].shape == env.full_done_spec["agents"].shape == (2, 2)  # the count's group
    check_env_specs(env)


def test_each_team_gets_its_own_entries():
    env, rollout = _rollout(teams_env_class(EnvBase, Composite, Unbounded, Categorical),
                            Compose(InitTracker(), StepCounter(max_steps=3)))
    assert {k for k in env.observation_spec.keys(True, True) if k[-1] in ("is_init", "step_count")} == {
        ("red", "is_init"), ("blue", "is_init"), ("red", "step_count"), ("blue", "step_count")}
    assert env.full_done_spec["red", "truncated"].shape == (2, 2, 1)
    # env 0 acts every step: red ends every 2 steps, blue every 3 (where max_steps truncates it too)
    assert rollout["red", "is_init"][0, :, 0, 0].tolist() == [True, False, True, False, True, False, True]
    assert rollout["blue", "is_init"][0, :, 0, 0].tolist() == [True, False, False, True, False, False, True]
    assert rollout["next", "blue", "step_count"][0, :, 2, 0].tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert rollout["next", "blue", "truncated"][0, :, 0, 0].tolist() == [False, False, True] * 2 + [False]
    # env 1 idles at the third step: red ends at steps 2 and 5
    assert rollout["next", "red", "step_count"][1, :, 0, 0].tolist() == [1, 2, 1, 2, 3, 1, 2]
    assert not rollout["next", "red", "is_init"].any()


def test_a_root_done_stands_for_the_teams():
    env, rollout = _rollout(teams_env_class(EnvBase, Composite, Unbounded, Categorical),
                            Compose(InitTracker(), StepCounter(max_steps=2)), root_done=True)
    added = {k for k in env.observation_spec.keys(True, True) if (k if isinstance(k, str) else k[-1]) in (
        "is_init", "step_count")}
    assert added == {"is_init", "step_count"}
    # the root's truncation reaches the teams' done flags (TorchRL propagates it), not their truncated
    assert rollout["next", "done"][0, :, 0].tolist() == [False, True] * 3 + [False]
    assert rollout["next", "blue", "done"][0, :, :, 0].all(-1).tolist() == [False, True] * 3 + [False]
    assert ("blue", "truncated") not in env.full_done_spec.keys(True, True)


# ---- RewardSum per done group (TorchRL's: each sum cleared by its own group's reset) -------------
REWARD_SUMS = {
    "default": lambda m: m.RewardSum(),
    "reset_keys": lambda m: m.RewardSum(in_keys=[("red", "reward"), ("blue", "reward")],
                                        reset_keys=[("red", "_reset"), ("blue", "_reset")]),
    "reward_spec": lambda m: m.RewardSum(reward_spec=True),
}


def _sums(rollout) -> dict:
    return {(*p, team, "episode_reward"): rollout[(*p, team, "episode_reward")]
            for team in TEAMS for p in ((), ("next",))}


@pytest.mark.parametrize("root_done", [False, True])
@pytest.mark.parametrize("name", list(REWARD_SUMS))
def test_reward_sum_per_team_matches_torchrl(name, root_done):
    env, ours, ref_env, theirs = _teams_side_by_side(REWARD_SUMS[name], root_done)
    assert env.transform.reset_keys == ref_env.transform.reset_keys
    for spec in ("observation_spec", "full_reward_spec", "full_state_spec"):
        assert sorted(map(str, getattr(env, spec).keys(True, True))) == sorted(
            map(str, getattr(ref_env, spec).keys(True, True))), spec
    assert sorted(map(str, ours.keys(True, True))) == sorted(map(str, theirs.keys(True, True)))
    for key, value in _sums(theirs).items():
        assert torch.equal(ours[key], value), key
    red, blue = ours["next", "red", "episode_reward"], ours["next", "blue", "episode_reward"]
    if root_done:  # both teams reset when both are done: every 3 steps (4 in env 1, idle at step 3)
        assert red[:, :, 0, 0].tolist() == [[1, 2, 3, 1, 2, 3, 1], [1, 2, 3, 4, 1, 2, 3]]
        assert torch.equal(red[..., :1, :], blue[..., :1, :])
    else:  # red ends every 2 steps, blue every 3, each reset alone
        assert red[:, :, 0, 0].tolist() == [[1, 2, 1, 2, 1, 2, 1], [1, 2, 1, 2, 3, 1, 2]]
        assert blue[:, :, 0, 0].tolist() == [[1, 2, 3, 1, 2, 3, 1], [1, 2, 3, 4, 1, 2, 3]]


@pytest.mark.parametrize("root_done", [False, True])
def test_reward_sum_reset_clears_only_its_group(root_done):
    env = TransformedEnv(teams_env_class(EnvBase, Composite, Unbounded, Categorical)(root_done=root_done),
                         _reap_module().RewardSum())
    td = env.reset().update({("red", "episode_reward"): torch.full((2, 2, 1), 5.0),
                             ("blue", "episode_reward"): torch.full((2, 3, 1), 7.0)})
    td["red", "_reset"] = torch.tensor([True, False]).view(2, 1, 1).expand(2, 2, 1).clone()
    td["blue", "_reset"] = torch.tensor([False, True]).view(2, 1, 1).expand(2, 3, 1).clone()
    if root_done:  # the root's flags stand for both teams (TorchRL's _filtered_reset_keys)
        td["_reset"] = torch.tensor([[False], [True]])
    out = env.transform._reset(td, td.empty())
    red, blue = out["red", "episode_reward"][..., 0, 0].tolist(), out["blue", "episode_reward"][..., 0, 0].tolist()
    assert (red, blue) == (([5.0, 0.0], [7.0, 0.0]) if root_done else ([0.0, 5.0], [7.0, 0.0]))


def test_reward_sum_reset_keys_follow_each_in_key_s_group():
    m, cls = _reap_module(), teams_env_class(EnvBase, Composite, Unbounded, Categorical)
    rsum = m.RewardSum(in_keys=[("red", "reward"), ("blue", "reward")])
    TransformedEnv(cls(), rsum)  # TorchRL raises here (its in_keys and env reset keys differ in order)
    assert rsum.reset_keys == [("red", "_reset"), ("blue", "_reset")]
    rsum = m.RewardSum(in_keys=[("blue", "reward")])
    TransformedEnv(cls(root_done=True), rsum)
    assert rsum.reset_keys == ["_reset"]
    with pytest.raises(ValueError, match="one per in_key"):
        TransformedEnv(cls(), m.RewardSum(in_keys=[("red", "reward"), ("blue", "reward")],
                                          reset_keys=[("red", "_reset")] * 3))
    with pytest.raises(ValueError, match="not reset keys of the env"):
        TransformedEnv(cls(), m.RewardSum(in_keys=[("red", "reward")], reset_keys=[("green", "_reset")]))
