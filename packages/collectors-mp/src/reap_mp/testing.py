"""Small envs and policies for tests and benchmarks of multi-process collection.

They live in the package (not in a test folder) so that worker processes started with
``spawn`` or ``forkserver`` can import them by name.

* :class:`CountingEnv`: a deterministic, seedable env on reap's array API. Its observation is
  ``[steps into the episode, a seeded random number]`` and its reward is the action, so a batch
  reveals which policy produced it. ``fail_at``, ``die_at`` and ``hang_at`` make it raise,
  kill its own process, or sleep at a given step (to test fault handling).
* :class:`BusyEnv`: like CountingEnv, but each step burns ``step_cost`` seconds of CPU.
* :class:`ConstantPolicy`: outputs its single parameter (the "weight") for every env.
* :class:`FaultyEnv` and :class:`FaultyPolicy`: raise, kill their process or hang
  (:func:`inject_fault`) in one chosen place, for fault-injection tests.

Examples:
    >>> from reap_mp.testing import ConstantPolicy, CountingEnv
    >>> env = CountingEnv(batch=3, episode_len=4)
    >>> rollout = env.rollout(4, ConstantPolicy(2.0).as_module(), break_when_any_done=False)
    >>> rollout["next", "reward"][0, :, 0].tolist()
    [2.0, 2.0, 2.0, 2.0]
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import time

import numpy as np
import torch
from tensordict.nn import TensorDictModule

from reap.envs.base import EnvBase
from reap.specs import Composite, Unbounded


class CountingEnv(EnvBase):
    """Deterministic test env; see the module docstring."""

    def __init__(self, batch: int | None = None, *, episode_len: int = 5, fail_at: int | None = None,
                 die_at: int | None = None, hang_at: int | None = None):
        shape = () if batch is None else (batch,)
        super().__init__(batch_size=shape)
        self.observation_spec = Composite(observation=Unbounded(shape=(*shape, 2)), shape=shape)
        self.action_spec = Unbounded(shape=(*shape, 1))
        self.episode_len = episode_len
        self.fail_at, self.die_at, self.hang_at = fail_at, die_at, hang_at
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
        if self.fail_at is not None and self.steps == self.fail_at:
            raise ValueError(f"CountingEnv exploded at step {self.steps}")
        if self.die_at is not None and self.steps == self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if self.hang_at is not None and self.steps == self.hang_at:
            time.sleep(3600)
        self._count += 1
        obs = nxt["observation"][t]
        obs[..., 0] = self._count
        obs[..., 1] = self._rng.random(self.batch_size)
        nxt["reward"][t] = action
        done = (self._count >= self.episode_len)[..., None]
        nxt["done"][t] = done
        nxt["terminated"][t] = done
        nxt["truncated"][t] = False


class BusyEnv(CountingEnv):
    """A CountingEnv whose step burns ``step_cost`` seconds of CPU time per sub-env."""

    def __init__(self, batch: int | None = None, *, step_cost: float = 1e-3, episode_len: int = 200):
        super().__init__(batch, episode_len=episode_len)
        self.step_cost = step_cost

    def _step_into(self, action, t, root, nxt):
        end = time.thread_time() + self.step_cost * max(1, self.numel)
        while time.thread_time() < end:
            pass
        super()._step_into(action, t, root, nxt)


class ConstantPolicy(torch.nn.Module):
    """``action = weight`` for every env (a float parameter), whatever the observation."""

    def __init__(self, weight: float = 0.0):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([float(weight)]))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return (observation[..., :1] * 0 + self.weight).detach()

    def as_module(self) -> TensorDictModule:
        return TensorDictModule(self, in_keys=["observation"], out_keys=["action"])


#: What :func:`inject_fault` can do.
FAULTS = ("raise", "kill", "hang")


def inject_fault(how: str, where: str) -> None:
    """``raise`` a RuntimeError naming ``where``, ``kill`` this process (SIGKILL), or ``hang`` (an hour).

    ``how="eof"`` raises an EOFError instead: what a library reading a truncated file or a
    closed pipe raises, which a worker must report like any other error.
    """
    if how == "raise":
        raise RuntimeError(f"injected fault in {where}")
    if how == "eof":
        raise EOFError(f"injected EOFError in {where}")
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "hang":
        time.sleep(3600)
    raise ValueError(f"inject_fault: how must be one of {FAULTS}, got {how!r}")


class FaultyEnv(CountingEnv):
    """A CountingEnv with a fault (:func:`inject_fault` ``how``) in one place.

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


class FaultyPolicy(ConstantPolicy):
    """A ConstantPolicy with a fault (:func:`inject_fault` ``how``) at its ``at``-th call.

    A collector worker calls its policy once while starting (to learn its outputs), so
    ``at=1`` faults during start-up and a larger ``at`` mid-rollout.
    """

    def __init__(self, weight: float = 0.0, *, how: str, at: int = 1):
        super().__init__(weight)
        self.how, self.at, self.calls = how, at, 0

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.at:
            inject_fault(self.how, f"policy call {self.at}")
        return super().forward(observation)


def hold_lock_and_die(lock) -> None:
    """Take ``lock`` and die holding it (SIGKILL), as a worker killed mid-copy would."""
    lock.acquire()
    os.kill(os.getpid(), signal.SIGKILL)


class RaisingPolicy:
    """A policy that raises ``KeyError(message)`` when called."""

    def __init__(self, message: str = "policy blew up"):
        self.message = message

    def __call__(self, observation):
        raise KeyError(self.message)


def env_fn(**kwargs):
    """A picklable constructor of ``CountingEnv(**kwargs)``."""
    return functools.partial(CountingEnv, **kwargs)


def constant_policy(weight: float = 0.0) -> TensorDictModule:
    return ConstantPolicy(weight).as_module()


def start_forkserver() -> None:
    """Start the forkserver that ``mp_start_method="forkserver"`` collectors use, with reap's
    preload, so that a test can note its processes before it creates collectors (a forkserver
    started by ``multiprocessing.forkserver.ensure_running()`` alone would preload nothing).
    It is held for the rest of the process: collectors that shut down do not stop it."""
    from multiprocessing import forkserver

    from reap.collectors.lifetime import ForkserverUse
    from reap_mp._procs import get_context

    get_context("forkserver", "start_forkserver")
    _PINNED.append(ForkserverUse())
    forkserver.ensure_running()


_PINNED: list = []  # the uses start_forkserver() holds


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def shm_segments() -> set[str]:
    """Names in ``/dev/shm`` after a garbage collection."""
    gc.collect()
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
__all__ = ["FAULTS", "BusyEnv", "ConstantPolicy", "CountingEnv", "FaultyEnv", "FaultyPolicy", "RaisingPolicy",
           "constant_policy", "env_fn", "hold_lock_and_die", "inject_fault", "pid_alive", "shm_segments"]
