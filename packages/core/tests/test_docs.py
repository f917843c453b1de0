"""Every public docstring example in reap-core runs and gives what it says."""

import doctest
import importlib
import pkgutil

import pytest

import reap

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(reap.__path__, prefix="reap.") if info.name != "reap.cli"
)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_public_classes_have_examples():
    for name in ("Collector", "GymEnv", "SerialEnv", "EnvBase", "TransformedEnv", "compile_with_warmup",
                 "VanillaWeightUpdater", "CatFrames", "CatTensors", "UnsqueezeTransform", "RenameTransform",
                 "ExcludeTransform", "SelectTransform", "RewardScaling", "RewardClipping", "FrameSkipTransform",
                 "NoopResetEnv", "InitTracker", "TensorDictPrimer", "EnvCreator", "MultiStep", "Bounded",
                 "check_env_specs", "step_mdp"):
        obj = getattr(reap, name)
        module = importlib.import_module(obj.__module__)
        assert ">>>" in (obj.__doc__ or "") + (module.__doc__ or ""), name
