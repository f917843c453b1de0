"""Every public docstring's ``Examples:`` block runs and passes."""

import doctest
import importlib

import pytest

MODULES = [
    "reap_replay",
    "reap_replay.buffers",
    "reap_replay.checkpoint",
    "reap_replay.plugin",
    "reap_replay.samplers",
    "reap_replay.storages",
    "reap_replay.trees",
    "reap_replay.writers",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0, f"{name} has no examples"
