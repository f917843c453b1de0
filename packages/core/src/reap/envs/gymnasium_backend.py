"""TorchRL's ``set_gym_backend`` / ``gym_backend`` for reap, whose gym envs run on gymnasium only.

``set_gym_backend("gymnasium")`` (or the ``gymnasium`` module, or a callable returning it) is a
context manager and a decorator that changes nothing, so that TorchRL code selecting gymnasium
runs as it is; any other backend (``"gym"``, ``gym``) is a ValueError that says so.

Examples:
    >>> import gymnasium
    >>> from reap.envs.libs.gym import GymEnv, gym_backend, set_gym_backend
    >>> with set_gym_backend("gymnasium"):
    ...     env = GymEnv("CartPole-v1")
    >>> gym_backend() is gymnasium, gym_backend("wrappers") is gymnasium.wrappers
    (True, True)
    >>> set_gym_backend("gym")
    Traceback (most recent call last):
    ...
    ValueError: set_gym_backend: reap's gym envs run on gymnasium only, got backend='gym'; use set_gym_backend("gymnasium") or leave it out
"""

from __future__ import annotations

import contextlib
import importlib
import types

import gymnasium


def _module_of(backend):
    if callable(backend) and not isinstance(backend, (str, types.ModuleType)):
        backend = backend()
    if isinstance(backend, types.ModuleType):
        return backend.__name__
    return backend


class set_gym_backend(contextlib.ContextDecorator):  # noqa: N801 - TorchRL's name
    """Select the gym backend: ``"gymnasium"``, the ``gymnasium`` module or a callable returning it
    (the only one reap runs; see the module docstring)."""

    def __init__(self, backend):
        if _module_of(backend) != "gymnasium":
            raise ValueError(f"set_gym_backend: reap's gym envs run on gymnasium only, got backend={backend!r}; use "
                             'set_gym_backend("gymnasium") or leave it out')
        self.backend = gymnasium

    def set(self) -> None:
        """Make it the default (it is: gymnasium is reap's only backend)."""

    def clone(self) -> set_gym_backend:
        return type(self)(self.backend)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def gym_backend(submodule: str | None = None):
    """The gym backend (``gymnasium``), or its ``submodule`` (``gym_backend("wrappers")``)."""
    if submodule is None:
        return gymnasium
    return importlib.import_module(f"gymnasium.{submodule}")
