"""Registers reap-replay with reap's plugin manager: ``from reap import ReplayBuffer`` works.

Examples:
    >>> names = []
    >>> reap_register_exports(lambda name, target: names.append(name))
    >>> "TensorDictPrioritizedReplayBuffer" in names
    True
"""

import reap_replay
from reap.plugins import hookimpl


@hookimpl
def reap_register_exports(register):
    """Registers every public class of reap_replay under its own name."""
    for name in reap_replay.__all__:
        register(name, f"reap_replay:{name}")
