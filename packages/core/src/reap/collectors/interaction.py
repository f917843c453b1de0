"""The exploration type a rollout runs under, safe for collectors that run in threads.

tensordict keeps the interaction type in one module-level variable, and its
``set_interaction_type`` context restores on exit whatever it found on entry. Two threads that
enter and leave it out of order (reap-threads' workers, or the in-process workers of the shared
driver) leave the other's value behind: after the collector shut down, the trainer's own
``ProbabilisticActor`` went on sampling at random. :func:`rollout_interaction` enters tensordict's
context once for all the rollouts running at the same time and leaves it with the last of them.

Examples:
    >>> from tensordict.nn import InteractionType
    >>> from tensordict.nn.probabilistic import interaction_type
    >>> with rollout_interaction(InteractionType.RANDOM):
    ...     interaction_type()
    <InteractionType.RANDOM: 'random'>
    >>> interaction_type() is None
    True
"""

from __future__ import annotations

import contextlib
import threading

from tensordict.nn import InteractionType, set_interaction_type

_lock = threading.Lock()
_holders = 0
_entered: set_interaction_type | None = None


@contextlib.contextmanager
def rollout_interaction(mode: InteractionType):
    """Run the block under ``mode``; concurrent blocks share one entry of tensordict's context.

    Rollouts that overlap in time run under the mode of the first of them: collectors running
    at the same time in one process must use the same ``exploration_type``.
    """
    global _holders, _entered
    with _lock:
        if _holders == 0:
            _entered = set_interaction_type(mode)
            _entered.__enter__()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                entered, _entered = _entered, None
                entered.__exit__(None, None, None)


__all__ = ["rollout_interaction"]
