"""Registers reap-value with reap's plugin manager, so that ``from reap import GAE`` works.

Examples:
    >>> from reap_value.plugin import reap_register_exports
    >>> names = {}
    >>> reap_register_exports(lambda name, target: names.__setitem__(name, target))
    >>> names["GAE"]
    'reap_value:GAE'
"""

from __future__ import annotations

import reap_value
from reap.plugins import hookimpl


@hookimpl
def reap_register_exports(register):
    """Export every public name of :mod:`reap_value` from :mod:`reap`."""
    for name in reap_value.__all__:
        register(name, f"reap_value:{name}")
