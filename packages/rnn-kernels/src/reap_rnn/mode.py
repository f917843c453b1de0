"""Recurrent mode: whether recurrent modules read ``[B, T]`` sequences or single steps.

Examples:
    >>> from reap_rnn import recurrent_mode, set_recurrent_mode
    >>> recurrent_mode() is None
    True
    >>> with set_recurrent_mode(True):
    ...     recurrent_mode()
    True
"""

from __future__ import annotations

import functools
import threading

_state = threading.local()


def recurrent_mode() -> bool | None:
    """The mode set by the innermost ``set_recurrent_mode`` (None outside any).

    Examples:
        >>> from reap_rnn import recurrent_mode, set_recurrent_mode
        >>> with set_recurrent_mode("sequential"):
        ...     recurrent_mode()
        False
    """
    return getattr(_state, "mode", None)


class set_recurrent_mode:
    """Context manager (and decorator) setting the recurrent mode of every LSTM/GRU module.

    Args:
        mode: ``True`` or ``"recurrent"`` for ``[B, T]`` sequences, ``False`` or
            ``"sequential"`` for single steps (either case), ``None`` for each module's default.

    Examples:
        >>> from reap_rnn import set_recurrent_mode
        >>> @set_recurrent_mode("recurrent")
        ... def train_step():
        ...     from reap_rnn import recurrent_mode
        ...     return recurrent_mode()
        >>> train_step()
        True
    """

    def __init__(self, mode: bool | str | None = True):
        if isinstance(mode, str):
            if mode.lower() not in ("recurrent", "sequential"):
                raise ValueError(
                    f"set_recurrent_mode: mode must be a bool, 'recurrent' or 'sequential', got {mode!r}"
                )
            mode = mode.lower() == "recurrent"
        if mode is not None and not isinstance(mode, bool):
            raise TypeError(f"set_recurrent_mode: mode must be a bool, a string or None, got {mode!r}")
        self.mode = mode
        self._saved: list = []

    def clone(self) -> set_recurrent_mode:
        """A new context manager with the same mode (TorchRL's)."""
        return type(self)(self.mode)

    def __enter__(self):
        self._saved.append(recurrent_mode())
        _state.mode = self.mode
        return self

    def __exit__(self, *exc):
        _state.mode = self._saved.pop()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with set_recurrent_mode(self.mode):
                return fn(*args, **kwargs)

        return wrapped
