"""Small deterministic environments for tests and benchmarks.

They live in an installed package (not a test folder) so that workers started with ``spawn``
or ``forkserver``, Ray actors and torch.distributed ranks import them by name.

* :class:`CountingEnv`: a custom env written the TorchRL way (``_reset``/``_step``).
* :class:`AgentsEnv`: a custom env written the TorchRL way with nested keys: two envs of three
  agents under ``"agents"``, the agents' own done flags beside the root's, and with
  ``root_action=True`` a second action at the root (no single action key).
* :class:`UnequalAgentsEnv`: a custom env with a heterogeneous group: two agents whose
  observations have 2 and 3 entries (a lazy stack of their specs and values).
* :class:`GrowingEnv`: a custom env whose observation grows by a row each step (a -1 dim).
* :class:`BusyEnv`: each step burns ``step_seconds`` of CPU (scaling benchmarks).
* :class:`EchoEnv`: a deterministic, seedable env on reap's array API whose reward echoes the
  action, so a batch reveals which policy (which weights) made it. Its observation is ``[steps
  into the episode, a seeded random number]``. ``fail_at``, ``die_at`` and ``hang_at`` make it
  raise, kill its own process (SIGKILL) or sleep (``hang_for`` s) at a given step; with
  ``once_file`` only the first env to get there does (it creates the file), so a restarted
  worker runs on. ``step_sleep`` makes every step sleep that long (a slow worker).
* :class:`BusyEchoEnv`: an EchoEnv whose step burns CPU per sub-env.
* :class:`FaultyEnv`: an EchoEnv with a fault (:func:`~reap_testing.faults.inject_fault`) in
  one chosen place. :func:`env_fn`: a picklable ``EchoEnv`` constructor.

Examples:
    >>> from reap_testing import EchoEnv, constant_policy
    >>> env = EchoEnv(batch=3, episode_len=4)
    >>> rollout = env.rollout(4, constant_policy(2.0), break_when_any_done=False)
    >>> rollout["next", "reward"][0, :, 0].tolist()
    [2.0, 2.0, 2.0, 2.0]
"""

from __future__ import annotations

import functools
import os
import signal
import time

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from reap import EnvBase
from reap.specs import Bounded, Categorical, Composite, Unbounded
from reap_testing.faults import FAULTS, inject_fault


class CountingEnv(EnvBase):
    """A custom env written the TorchRL way (``_reset``/``_step``).

    The observation counts up by the action; the episode terminates when it reaches ``limit``;
    the reward is the action. ``group="agent"`` puts the done flags in that nested group
    (``("agent", "done")``, no root flag).

    Examples:
        >>> import torch
        >>> from reap_testing import CountingEnv
        >>> env = CountingEnv(limit=2.0)
        >>> env.rollout(5, policy=lambda td: td.set("action", torch.ones(1)))["next", "done"].flatten().tolist()
        [False, True]
    """

    def __init__(self, limit: float = 5.0, dtype=torch.float32, group: str | None = None):
        super().__init__()
        self.limit, self.group = limit, group
        self.observation_spec = Composite(observation=Unbounded(shape=(1,), dtype=dtype))
        self.action_spec = Bounded(0.0, 2.0, shape=(1,))
        if group is not None:
            flag = Categorical(2, shape=(1,), dtype=torch.bool)
            self.done_spec = Composite({group: Composite(done=flag, terminated=flag.clone())})

    def _flags(self, done: torch.Tensor) -> dict:
        flags = {"done": done, "terminated": done.clone()}
        return flags if self.group is None else {self.group: TensorDict(flags)}

    def scaled_count(self, factor: float = 1.0) -> float:
        """The count times ``factor`` (a method of the sub-env a batched env forwards)."""
        if not factor:
            raise ValueError("factor must not be zero")
        return float(self.count) * factor

    def _reset(self, td):
        self.count = torch.zeros(1, dtype=self.observation_spec["observation"].dtype)
        return TensorDict(observation=self.count.clone())

    def _step(self, td):
        self.count = self.count + td["action"].to(self.count.dtype)
        return TensorDict(observation=self.count.clone(), reward=td["action"].clone(),
                          **self._flags(self.count >= self.limit))


class AgentsEnv(EnvBase):
    """Two envs of three agents; each agent adds its action (0, 1 or 2) to its count, which is its
    observation and reward, and is done at ``limit``; an env is done when all its agents are.

    With ``root_action=True`` the env also takes a root ``"action"`` (two choices, ignored).
    """

    def __init__(self, limit: int = 3, root_action: bool = False):
        super().__init__(batch_size=(2,))
        self.limit = limit
        group = (2, 3)
        self.observation_spec = Composite(
            agents=Composite(obs=Unbounded(shape=(*group, 1)), shape=group), shape=(2,))
        self.action_spec = Composite(agents=Composite(action=Categorical(3, shape=group), shape=group), shape=(2,))
        if root_action:
            self.full_action_spec["action"] = Categorical(2, shape=(2, 1))
        self.reward_spec = Composite(agents=Composite(reward=Unbounded(shape=(*group, 1)), shape=group), shape=(2,))
        self.done_spec = Composite(
            done=Categorical(2, shape=(2, 1), dtype=torch.bool),
            agents=Composite(done=Categorical(2, shape=(*group, 1), dtype=torch.bool), shape=group), shape=(2,))
        self.register_buffer("count", torch.zeros(*group, 1))

    def _reset(self, tensordict):
        reset = torch.ones(2, dtype=torch.bool) if tensordict is None else tensordict.get("_reset").reshape(2)
        self.count[reset] = 0
        return TensorDict({"agents": TensorDict(obs=self.count.clone(), batch_size=(2, 3))}, batch_size=(2,))

    def _step(self, tensordict):
        self.count += tensordict["agents", "action"].unsqueeze(-1)
        done = self.count >= self.limit
        agents = TensorDict(obs=self.count.clone(), reward=self.count.clone(), done=done, batch_size=(2, 3))
        return TensorDict(agents=agents, done=done.all(1), batch_size=(2,))

    def _set_seed(self, seed):
        torch.manual_seed(seed)


class UnequalAgentsEnv(EnvBase):
    """Two agents under ``"agents"`` whose ``"obs"`` have 2 and 3 entries (a heterogeneous group,
    lazy-stacked), each filled with the step count; done after ``limit`` steps.

    Examples:
        >>> from reap_testing import UnequalAgentsEnv
        >>> td = UnequalAgentsEnv(limit=2).rollout(5)
        >>> [td["next", "agents"][1][i]["obs"].tolist() for i in range(2)]
        [[2.0, 2.0], [2.0, 2.0, 2.0]]
    """

    def __init__(self, limit: int = 3):
        super().__init__()
        self.limit, self.count = limit, 0
        self.observation_spec = Composite(
            agents=torch.stack([Composite(obs=Unbounded((2,))), Composite(obs=Unbounded((3,)))], 0))
        self.action_spec = Bounded(0.0, 1.0, shape=(1,))

    def _agents(self) -> LazyStackedTensorDict:
        return LazyStackedTensorDict.lazy_stack(
            [TensorDict(obs=torch.full((2,), float(self.count))), TensorDict(obs=torch.full((3,), float(self.count)))])

    def _reset(self, td):
        self.count = 0
        return TensorDict(agents=self._agents())

    def _step(self, td):
        self.count += 1
        done = torch.tensor([self.count >= self.limit])
        return TensorDict(agents=self._agents(), reward=td["action"].clone(), done=done, terminated=done.clone())


class GrowingEnv(EnvBase):
    """A custom env written the TorchRL way whose observation grows: ``count + 1`` rows of 2, all
    ``count`` (its spec's dim of unknown size is -1); done after ``max_count`` steps."""

    def __init__(self, max_count: int = 5):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(shape=(-1, 2)))
        self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
        self.max_count = max_count
        self.count = 0

    def _observation(self) -> torch.Tensor:
        return torch.full((self.count + 1, 2), float(self.count))

    def _reset(self, tensordict):
        self.count = 0
        return TensorDict(observation=self._observation())

    def _step(self, tensordict):
        self.count += 1
        done = torch.tensor([self.count >= self.max_count])
        return TensorDict(observation=self._observation(), reward=torch.ones(1), done=done, terminated=done.clone())

    def _set_seed(self, seed):
        torch.manual_seed(seed)


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


class EchoEnv(EnvBase):
    """Deterministic test env whose reward is the action; see the module docstring."""

    def __init__(self, batch: int | None = None, *, episode_len: int = 5, fail_at: int | None = None,
                 die_at: int | None = None, hang_at: int | None = None, hang_for: float = 3600.0,
                 once_file: str | None = None, step_sleep: float = 0.0):
        shape = () if batch is None else (batch,)
        super().__init__(batch_size=shape)
        self.observation_spec = Composite(observation=Unbounded(shape=(*shape, 2)), shape=shape)
        self.action_spec = Unbounded(shape=(*shape, 1))
        self.episode_len = episode_len
        self.fail_at, self.die_at, self.hang_at = fail_at, die_at, hang_at
        self.hang_for, self.once_file, self.step_sleep = hang_for, once_file, step_sleep
        self.steps = 0
        self._rng = np.random.default_rng(0)
        self._count = np.zeros(shape, dtype=np.int64)

    def _set_seed(self, seed):
        self._rng = np.random.default_rng(seed)

    def _reset_into(self, root, t, mask):
        obs = root["observation"][t]
        if mask is None or not self.batch_size:
            self._count[...] = 0
            obs[..., 0] = 0
            obs[..., 1] = self._rng.random(self.batch_size)
        else:
            self._count[mask] = 0
            obs[mask, 0] = 0
            obs[mask, 1] = self._rng.random(int(mask.sum()))

    def _step_into(self, action, t, root, nxt):
        self.steps += 1
        if self.steps in (self.fail_at, self.die_at, self.hang_at) and self._first_here():
            if self.steps == self.fail_at:
                raise ValueError(f"EchoEnv exploded at step {self.steps}")
            if self.steps == self.die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(self.hang_for)
        if self.step_sleep:
            time.sleep(self.step_sleep)
        self._count += 1
        obs = nxt["observation"][t]
        obs[..., 0] = self._count
        obs[..., 1] = self._rng.random(self.batch_size)
        nxt["reward"][t] = action
        done = (self._count >= self.episode_len)[..., None]
        nxt["done"][t] = done
        nxt["terminated"][t] = done
        nxt["truncated"][t] = False


    def _first_here(self) -> bool:
        """True unless ``once_file`` exists already (else it is created: the next env runs on)."""
        if self.once_file is None:
            return True
        try:
            with open(self.once_file, "x"):
                return True
        except FileExistsError:
            return False


class BusyEchoEnv(EchoEnv):
    """An EchoEnv whose step burns ``step_cost`` seconds of CPU time per sub-env."""

    def __init__(self, batch: int | None = None, *, step_cost: float = 1e-3, episode_len: int = 200):
        super().__init__(batch, episode_len=episode_len)
        self.step_cost = step_cost

    def _step_into(self, action, t, root, nxt):
        end = time.thread_time() + self.step_cost * max(1, self.numel)
        while time.thread_time() < end:
            pass
        super()._step_into(action, t, root, nxt)


class FaultyEnv(EchoEnv):
    """An EchoEnv with a fault (:func:`~reap_testing.faults.inject_fault` ``how``) in one place.

    ``where``: ``"init"`` (the constructor, so the worker fails while starting), ``"step"`` (its
    ``at``-th step), ``"seed"`` (``set_seed``) or ``"state_dict"``.
    """

    PLACES = ("init", "step", "seed", "state_dict")

    def __init__(self, batch: int | None = None, *, where: str, how: str, at: int = 1, episode_len: int = 5):
        if where not in self.PLACES or how not in (*FAULTS, "eof"):
            raise ValueError(f"FaultyEnv: where must be one of {self.PLACES} and how one of {FAULTS}")
        super().__init__(batch, episode_len=episode_len)
        self.where, self.how, self.at = where, how, at
        if where == "init":
            inject_fault(how, "the env constructor")

    def _step_into(self, action, t, root, nxt):
        if self.where == "step" and self.steps + 1 == self.at:
            inject_fault(self.how, f"env step {self.at}")
        super()._step_into(action, t, root, nxt)

    def _set_seed(self, seed):
        if self.where == "seed":
            inject_fault(self.how, "env set_seed")
        super()._set_seed(seed)

    def state_dict(self) -> dict:
        if self.where == "state_dict":
            inject_fault(self.how, "env state_dict")
        return super().state_dict()


def env_fn(**kwargs):
    """A picklable constructor of ``EchoEnv(**kwargs)``."""
    return functools.partial(EchoEnv, **kwargs)


def transformed_env_fn(transform, **kwargs):
    """A picklable constructor of ``TransformedEnv(EchoEnv(**kwargs), transform)`` (a clone of
    ``transform`` for each env)."""
    return functools.partial(_transformed_echo, transform, kwargs)


def _transformed_echo(transform, kwargs):
    from reap.envs.transforms import TransformedEnv

    return TransformedEnv(EchoEnv(**kwargs), transform.clone())
