"""Small deterministic environments for tests and benchmarks."""

from __future__ import annotations

import time

import torch
from tensordict import TensorDict

from reap import EnvBase
from reap.specs import Bounded, Composite, Unbounded


class CountingEnv(EnvBase):
    """A custom env written the TorchRL way (``_reset``/``_step``).

    The observation counts up by the action; the episode terminates when it reaches ``limit``;
    the reward is the action.

    Examples:
        >>> import torch
        >>> from reap_testing import CountingEnv
        >>> env = CountingEnv(limit=2.0)
        >>> env.rollout(5, policy=lambda td: td.set("action", torch.ones(1)))["next", "done"].flatten().tolist()
        [False, True]
    """

    def __init__(self, limit: float = 5.0, dtype=torch.float32):
        super().__init__()
        self.limit = limit
        self.observation_spec = Composite(observation=Unbounded(shape=(1,), dtype=dtype))
        self.action_spec = Bounded(0.0, 2.0, shape=(1,))

    def _reset(self, td):
        self.count = torch.zeros(1, dtype=self.observation_spec["observation"].dtype)
        return TensorDict(observation=self.count.clone())

    def _step(self, td):
        self.count = self.count + td["action"].to(self.count.dtype)
        done = self.count >= self.limit
        return TensorDict(
            observation=self.count.clone(), reward=td["action"].clone(), done=done, terminated=done.clone()
        )


class BusyEnv(EnvBase):
    """An env whose step burns ``step_seconds`` of CPU (a busy loop), for scaling benchmarks.

    Written on the array API, like a fast env would be.
    """

    def __init__(self, step_seconds: float = 1e-3, episode_len: int = 100):
        super().__init__()
        self.step_seconds = step_seconds
        self.episode_len = episode_len
        self.observation_spec = Composite(observation=Unbounded(shape=(4,)))
        self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
        self.t = 0

    def _reset_into(self, root, t, mask):
        self.t = 0
        root["observation"][t] = 0.0

    def _step_into(self, action, t, root, nxt):
        end = time.perf_counter() + self.step_seconds
        while time.perf_counter() < end:
            pass
        self.t += 1
        nxt["observation"][t] = root["observation"][t] + action[0]
        nxt["reward"][t] = 1.0
        nxt["terminated"][t] = False
        nxt["truncated"][t] = self.t >= self.episode_len
        nxt["done"][t] = self.t >= self.episode_len
