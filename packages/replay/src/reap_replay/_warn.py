"""One warning per reason and process, for requests that cannot be honoured as asked."""

from __future__ import annotations

import threading
import warnings

_WARNED: set[str] = set()
_LOCK = threading.Lock()


def _warn_once(key: str, message: str) -> None:
    """Warns ``message`` (a RuntimeWarning) the first time ``key`` is seen."""
    with _LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)
