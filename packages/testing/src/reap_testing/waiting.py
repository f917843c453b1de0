"""Waiting in tests for something another thread or process does, with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], timeout: float = 60.0, what: str = "the condition") -> None:
    """Poll ``condition`` every 10 ms until it is true; fail the test after ``timeout`` s.

    Examples:
        >>> wait_until(lambda: True)
        >>> wait_until(lambda: False, timeout=0.02, what="the batch")
        Traceback (most recent call last):
        ...
        AssertionError: the batch did not happen within 0.02 s
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.01)
