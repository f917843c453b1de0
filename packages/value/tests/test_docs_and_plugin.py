"""Every docstring example runs; the plugin makes every public name importable from reap."""

from __future__ import annotations

import doctest
import importlib

import pytest

import reap_value

MODULES = [
    "reap_value",
    "reap_value._checks",
    "reap_value._scan",
    "reap_value._standardize",
    "reap_value.functional",
    "reap_value.estimators",
    "reap_value.multiagent",
    "reap_value.vtrace",
    "reap_value.plugin",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0


def test_every_public_object_has_an_example():
    for name in reap_value.__all__:
        doc = getattr(reap_value, name).__doc__ or ""
        assert "Examples:" in doc and ">>>" in doc, name


def test_exports_through_reap():
    plugins = pytest.importorskip("reap.plugins")
    exports = plugins.get_registries().exports
    import reap

    for name in reap_value.__all__:
        assert exports[name] == f"reap_value:{name}"
        assert getattr(reap, name) is getattr(reap_value, name)
    from reap import GAE

    assert GAE is reap_value.GAE
