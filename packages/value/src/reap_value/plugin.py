"""Registers reap-value with reap's plugin manager, so that ``from reap import GAE`` works.

Examples:
    >>> from reap_value.plugin import reap_register_exports
    >>> names = {}
    >>> reap_register_exports(lambda name, target, modules: names.__setitem__(name, (target, modules)))
    >>> names["GAE"]
    ('reap_value:GAE', ('reap.objectives.value', 'reap.objectives.value.advantages'))
"""

from __future__ import annotations

import reap_value
from reap.plugins import hookimpl

_VALUE = "reap.objectives.value"


def _modules(name: str) -> tuple[str, ...]:
    """TorchRL's paths: estimators in ``value`` and ``value.advantages``, functions in
    ``value.functional`` (and ``value.advantages``, which imports several of them)."""
    if name[0].isupper():
        return (_VALUE, f"{_VALUE}.advantages")
    return (f"{_VALUE}.functional", f"{_VALUE}.advantages")


#: TorchRL's former names of the estimators, which its ``torchrl.objectives.value`` still exports.
_FORMER_NAMES = {"TD0Estimate": "TD0Estimator", "TD1Estimate": "TD1Estimator",
                 "TDLambdaEstimate": "TDLambdaEstimator"}


@hookimpl
def reap_register_exports(register):
    """Export every public name of :mod:`reap_value` from :mod:`reap` and TorchRL's paths."""
    for name in reap_value.__all__:
        register(name, f"reap_value:{name}", modules=_modules(name))
    for former, name in _FORMER_NAMES.items():
        register(former, f"reap_value:{name}", modules=_modules(name))
