"""``TeamsEnv``: a custom env of two teams with nested action, observation, reward and done
entries, written once on either library's ``EnvBase`` (``teams_env_class``), and its
deterministic policy. It lives here (not in a test file) so that worker processes import it.

``TeamsEnv`` has two envs, each with a team ``"red"`` of 2 agents and ``"blue"`` of 3; a team is
done when its agents' counts sum to its limit (``LIMITS``), and only that team is reset.
``teams_policy()``: each agent plays ``count % 2 + 1``.

Examples:
    >>> from reap import Collector
    >>> with Collector(TeamsEnv(), teams_policy(), frames_per_batch=4, total_frames=4) as c:
    ...     batch = next(iter(c))
    >>> batch["red", "action"].shape, c.path
    (torch.Size([2, 2, 2]), 'tensordict')
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule

from reap.envs import EnvBase
from reap.specs import Categorical, Composite, Unbounded

TEAMS = {"red": 2, "blue": 3}
LIMITS = {"red": 3, "blue": 10}


def teams_env_class(base, composite, unbounded, categorical):
    """``TeamsEnv`` on the given library's ``EnvBase`` and specs."""

    class TeamsEnv(base):
        def __init__(self):
            super().__init__(batch_size=(2,))
            obs, act, rew, done = {}, {}, {}, {}
            for team, n in TEAMS.items():
                shape = (2, n)
                flag = categorical(2, shape=(*shape, 1), dtype=torch.bool)
                obs[team] = composite(obs=unbounded(shape=(*shape, 1)), shape=shape)
                act[team] = composite(action=categorical(3, shape=shape), shape=shape)
                rew[team] = composite(reward=unbounded(shape=(*shape, 1)), shape=shape)
                done[team] = composite(done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=shape)
            self.observation_spec = composite(obs, shape=(2,))
            self.action_spec = composite(act, shape=(2,))
            self.reward_spec = composite(rew, shape=(2,))
            self.done_spec = composite(done, shape=(2,))
            self.counts = {team: torch.zeros(2, n, 1) for team, n in TEAMS.items()}

        def _reset(self, tensordict):
            out = self.full_done_spec.zero()
            for team in TEAMS:
                reset = None if tensordict is None else tensordict.get((team, "_reset"), None)
                if reset is None:
                    self.counts[team].zero_()
                else:
                    self.counts[team][reset.reshape(2, -1).any(-1)] = 0
                out.set((team, "obs"), self.counts[team].clone())
            return out

        def _step(self, tensordict):
            out = self.full_done_spec.zero()
            for team in TEAMS:
                count = self.counts[team]
                count += tensordict.get((team, "action")).unsqueeze(-1).float()
                done = (count.sum(-2, keepdim=True) >= LIMITS[team]).expand_as(count).clone()
                out.set((team, "obs"), count.clone())
                out.set((team, "reward"), count.clone())
                out.set((team, "done"), done)
                out.set((team, "terminated"), done.clone())
            return out

        def _set_seed(self, seed):
            torch.manual_seed(seed)

    return TeamsEnv


TeamsEnv = teams_env_class(EnvBase, Composite, Unbounded, Categorical)


class TeamsActor(torch.nn.Module):
    """Each agent plays ``count % 2 + 1``."""

    def forward(self, red, blue):
        return red.squeeze(-1).long() % 2 + 1, blue.squeeze(-1).long() % 2 + 1


def teams_policy():
    return TensorDictModule(TeamsActor(), in_keys=[("red", "obs"), ("blue", "obs")],
                            out_keys=[("red", "action"), ("blue", "action")])


__all__ = ["LIMITS", "TEAMS", "TeamsActor", "TeamsEnv", "teams_env_class", "teams_policy"]
