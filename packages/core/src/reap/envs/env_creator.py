"""``EnvCreator``: an env constructor that travels to worker processes (TorchRL's ``EnvCreator``).

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.env_creator import EnvCreator
    >>> make = EnvCreator(lambda: GymEnv("Pendulum-v1"))
    >>> make.action_spec.shape
    torch.Size([1])
    >>> env = make()
    >>> env.rollout(2)["next", "observation"].shape
    torch.Size([2, 3])
"""

from __future__ import annotations

from collections.abc import Callable

from reap.envs.base import EnvBase


class EnvCreator:
    """Wrap ``create_env_fn`` (and its ``create_env_kwargs``) as a callable returning the env.

    Pass it wherever a constructor is expected (``ParallelEnv(4, EnvCreator(make_env))``,
    ``MultiSyncCollector([EnvCreator(make_env)] * 2, ...)``); the env's specs are read from one
    instance built on first access (``observation_spec``, ``action_spec``, ...), then closed.
    """

    def __init__(self, create_env_fn: Callable[..., EnvBase], create_env_kwargs: dict | None = None):
        if isinstance(create_env_fn, EnvBase) or not callable(create_env_fn):
            raise TypeError(
                f"EnvCreator: create_env_fn must be a callable returning an env, got {create_env_fn!r}"
            )
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = dict(create_env_kwargs or {})
        self._specs: dict | None = None

    def __call__(self, **kwargs) -> EnvBase:
        env = self.create_env_fn(**{**self.create_env_kwargs, **kwargs})
        if not isinstance(env, EnvBase):
            raise TypeError(f"EnvCreator: create_env_fn returned {type(env).__name__}, expected a reap EnvBase")
        return env

    def _spec(self, name: str):
        if self._specs is None:
            env = self()
            try:
                self._specs = {n: getattr(env, n) for n in (
                    "observation_spec", "action_spec", "reward_spec", "done_spec", "batch_size")}
            finally:
                env.close()
        return self._specs[name]

    observation_spec = property(lambda self: self._spec("observation_spec"))
    action_spec = property(lambda self: self._spec("action_spec"))
    reward_spec = property(lambda self: self._spec("reward_spec"))
    done_spec = property(lambda self: self._spec("done_spec"))
    batch_size = property(lambda self: self._spec("batch_size"))

    def __getstate__(self):
        return {"create_env_fn": self.create_env_fn, "create_env_kwargs": self.create_env_kwargs,
                "_specs": None}

    def __repr__(self) -> str:
        return f"EnvCreator({self.create_env_fn!r}, create_env_kwargs={self.create_env_kwargs})"
