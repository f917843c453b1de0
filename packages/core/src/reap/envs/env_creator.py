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
    >>> EnvCreator(GymEnv, env_name="CartPole-v1").make_variant(num_envs=2)().batch_size
    torch.Size([2])
"""

from __future__ import annotations

from collections.abc import Callable

from reap.envs.base import EnvBase, checked_env, refuse_torchrl_env


class EnvCreator:
    """Wrap ``create_env_fn`` and its keyword arguments as a callable returning the env.

    The arguments are TorchRL's: ``create_env_kwargs`` and further ``**kwargs`` are the env's
    keyword arguments (they win over those a call passes, as in TorchRL), ``make_variant(**kw)``
    gives a creator with more of them. Pass it wherever a constructor is expected
    (``ParallelEnv(4, EnvCreator(make_env))``, ``MultiSyncCollector([EnvCreator(make_env)] * 2,
    ...)``); the env's specs are read from one instance built on first access (``observation_spec``,
    ``action_spec``, ...; ``init_()`` builds it now), then closed. TorchRL's creator also shares
    the transforms' statistics with the envs it makes; reap's does not (``share_memory`` is
    taken for the signature; call ``VecNorm.share_memory()`` to share them).
    """

    def __init__(self, create_env_fn: Callable[..., EnvBase], create_env_kwargs: dict | None = None,
                 share_memory: bool = True, **kwargs):
        refuse_torchrl_env(create_env_fn, "EnvCreator")
        if isinstance(create_env_fn, EnvBase) or not callable(create_env_fn):
            raise TypeError(
                f"EnvCreator: create_env_fn must be a callable returning an env, got {create_env_fn!r}"
            )
        if create_env_kwargs is not None and not isinstance(create_env_kwargs, dict):
            raise TypeError(f"EnvCreator: create_env_kwargs must be a dict of keyword arguments, got "
                            f"{create_env_kwargs!r}")
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = {**kwargs, **(create_env_kwargs or {})}
        self._share_memory = share_memory
        self._specs: dict | None = None

    def __call__(self, **kwargs) -> EnvBase:
        return checked_env(self.create_env_fn(**{**kwargs, **self.create_env_kwargs}), "EnvCreator")

    def make_variant(self, **kwargs) -> EnvCreator:
        """A creator of the same env with these keyword arguments added (or replaced)."""
        return EnvCreator(self.create_env_fn, {**self.create_env_kwargs, **kwargs}, self._share_memory)

    def init_(self) -> EnvCreator:
        """Build one env now to read its specs (done on first access otherwise); returns self."""
        if self._specs is None:
            env = self()
            try:
                self._specs = {n: getattr(env, n) for n in (
                    "observation_spec", "action_spec", "reward_spec", "done_spec", "state_spec", "full_action_spec",
                    "full_observation_spec", "full_reward_spec", "full_done_spec", "batch_size")}
            finally:
                env.close()
        return self

    @property
    def initialized(self) -> bool:
        return self._specs is not None

    def _spec(self, name: str):
        return self.init_()._specs[name]

    observation_spec = property(lambda self: self._spec("observation_spec"))
    action_spec = property(lambda self: self._spec("action_spec"))
    reward_spec = property(lambda self: self._spec("reward_spec"))
    done_spec = property(lambda self: self._spec("done_spec"))
    state_spec = property(lambda self: self._spec("state_spec"))
    full_action_spec = property(lambda self: self._spec("full_action_spec"))
    full_observation_spec = property(lambda self: self._spec("full_observation_spec"))
    full_reward_spec = property(lambda self: self._spec("full_reward_spec"))
    full_done_spec = property(lambda self: self._spec("full_done_spec"))
    batch_size = property(lambda self: self._spec("batch_size"))

    def __getstate__(self):
        return {"create_env_fn": self.create_env_fn, "create_env_kwargs": self.create_env_kwargs,
                "_share_memory": self._share_memory, "_specs": None}

    def __repr__(self) -> str:
        return f"EnvCreator({self.create_env_fn!r}, create_env_kwargs={self.create_env_kwargs})"
