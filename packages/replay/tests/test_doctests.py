"""Every public docstring's ``Examples:`` block runs and passes."""

import doctest
import importlib
import pkgutil

import pytest

import reap_replay

#: Every public module of reap_replay (``_warn`` and the like are private).
MODULES = ["reap_replay"] + sorted(
    m.name for m in pkgutil.walk_packages(reap_replay.__path__, "reap_replay.")
    if not m.name.rpartition(".")[2].startswith("_")
)
NO_EXAMPLES = {"reap_replay.torchrl_checkpoint"}


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name not in NO_EXAMPLES:
        assert result.attempted > 0, f"{name} has no examples"
