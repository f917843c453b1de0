"""Whether ``TransformedEnv(TransformedEnv(env, a), b)`` unwraps the inner env (TorchRL's setting).

Unset, nested ``TransformedEnv``s are unwrapped (``TransformedEnv(env, Compose(a, b))``), as TorchRL's
default. ``set_auto_unwrap_transformed_env(False)`` keeps them nested, as a context manager, a
decorator or for the rest of the process (``.set()``); the ``AUTO_UNWRAP_TRANSFORMED_ENV``
environment variable sets it too (``.set()`` writes it, so that worker processes started later
agree). A ``TransformedEnv(..., auto_unwrap=...)`` keyword wins over both.

Examples:
    >>> from reap.envs import GymEnv, StepCounter, TransformedEnv
    >>> from reap._utils import set_auto_unwrap_transformed_env
    >>> with set_auto_unwrap_transformed_env(False):
    ...     env = TransformedEnv(TransformedEnv(GymEnv("Pendulum-v1"), StepCounter()))
    >>> type(env.base_env).__name__
    'TransformedEnv'
    >>> type(TransformedEnv(TransformedEnv(GymEnv("Pendulum-v1"), StepCounter())).base_env).__name__
    'GymEnv'
"""

from __future__ import annotations

import contextlib
import os

_ENV_VAR = "AUTO_UNWRAP_TRANSFORMED_ENV"
_TRUE, _FALSE = ("1", "true", "yes", "on", "y", "t"), ("0", "false", "no", "off", "n", "f")
#: The mode set by ``set_auto_unwrap_transformed_env`` (None: unset, the environment variable decides).
_mode: bool | None = None


def _from_environment() -> bool | None:
    value = os.environ.get(_ENV_VAR)
    if value is None or value.strip().lower() == "none":
        return None
    value = value.strip().lower()
    if value not in _TRUE + _FALSE:
        raise ValueError(f"{_ENV_VAR}={os.environ[_ENV_VAR]!r} is not a boolean; use True or False")
    return value in _TRUE


def auto_unwrap_transformed_env(allow_none: bool = False) -> bool | None:
    """Whether nested ``TransformedEnv``s are unwrapped now (True unless set; None if unset and
    ``allow_none``)."""
    mode = _from_environment() if _mode is None else _mode
    if mode is None and not allow_none:
        return True
    return mode


class set_auto_unwrap_transformed_env(contextlib.ContextDecorator):  # noqa: N801 (TorchRL's name)
    """Set whether nested ``TransformedEnv``s are unwrapped: within a ``with`` block, a decorated
    function, or from ``.set()`` on."""

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"set_auto_unwrap_transformed_env: mode must be a bool, got {mode!r}")
        self.mode = mode
        self._before: list = []

    def set(self) -> None:
        """Set the mode for the rest of the process (and for processes started from it)."""
        global _mode
        _mode = self.mode
        os.environ[_ENV_VAR] = str(self.mode)

    def __enter__(self) -> None:
        self._before.append((_mode, os.environ.get(_ENV_VAR)))
        self.set()

    def __exit__(self, *exc) -> None:
        global _mode
        _mode, variable = self._before.pop()
        if variable is None:
            os.environ.pop(_ENV_VAR, None)
        else:
            os.environ[_ENV_VAR] = variable
