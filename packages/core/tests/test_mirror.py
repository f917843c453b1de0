"""TorchRL's module paths under ``reap`` (``reap.mirror``) and the install-hint table."""

import importlib
import importlib.metadata
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pluggy
import pytest

import reap
from reap import hookspecs
from reap.export_hints import EXPORT_HINTS
from reap.mirror import core_exports, plugin_exports
from reap.plugins import KNOWN_PROVIDERS, PluginInfo, Registries, get_registries

ROOT = Path(__file__).resolve().parents[3]

# The TorchRL modules a TorchRL user imports from (issue 12), plus where GymEnv and transforms live.
TORCHRL_MODULES = [
    "torchrl.collectors", "torchrl.collectors.distributed", "torchrl.collectors.utils", "torchrl.envs",
    "torchrl.envs.utils", "torchrl.envs.transforms", "torchrl.envs.libs.gym", "torchrl.data",
    "torchrl.data.replay_buffers", "torchrl.data.replay_buffers.storages",
    "torchrl.data.replay_buffers.samplers", "torchrl.data.replay_buffers.writers",
    "torchrl.objectives.value", "torchrl.objectives.value.functional",
    "torchrl.objectives.value.advantages", "torchrl.modules", "torchrl.modules.tensordict_module.rnn",
    "torchrl.weight_update", "torchrl._utils",
]


def _plugin_packages() -> dict[str, str]:
    """``{distribution: top-level import name}`` of reap's own packages (``packages/*``) that
    are installed here, core aside (third-party plugins under ``plugins/`` are not in the table)."""
    ours = set()
    for pyproject in ROOT.glob("packages/*/pyproject.toml"):
        ours.add(tomllib.loads(pyproject.read_text())["project"]["name"])
    out = {}
    for ep in importlib.metadata.entry_points(group="reap"):
        dist = ep.dist.name if ep.dist else None
        if dist in ours and dist != "reap-core":
            out[dist] = ep.value.split(".")[0]
    return out


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_every_public_name_of_every_package_is_in_the_hint_table():
    packages = _plugin_packages()
    assert {"reap-replay", "reap-value", "reap-rnn-kernels", "reap-collectors-mp"} <= set(packages)
    registered = plugin_exports()
    for dist, top in packages.items():
        public = set(importlib.import_module(top).__all__)
        assert public <= set(registered[dist]), (dist, sorted(public - set(registered[dist])))
        table = {name: modules for name, (d, modules) in EXPORT_HINTS.items() if d == dist}
        assert table == registered[dist], (
            f"reap/export_hints.py is out of date for {dist}: run `uv run python tools/update_export_hints.py`")
        assert all(KNOWN_PROVIDERS[name] == dist for name in public)


def test_every_registered_path_gives_the_package_object():
    for module, names in {**get_registries().export_modules}.items():
        mirrored = importlib.import_module(module)
        for name, target in names.items():
            module_name, _, attribute = target.partition(":")
            assert getattr(mirrored, name) is getattr(importlib.import_module(module_name), attribute), (module, name)
    from reap.data.replay_buffers.samplers import SamplerWithoutReplacement
    from reap.modules.tensordict_module.rnn import LSTMModule
    from reap.objectives.value.functional import vec_td_lambda_advantage_estimate

    assert SamplerWithoutReplacement.__module__ == "reap_replay.samplers"
    assert LSTMModule.__module__ == "reap_rnn.modules"
    assert vec_td_lambda_advantage_estimate.__module__ == "reap_value.functional"


def test_the_imports_of_torchrl_users():
    """The TorchRL imports of the collector docs, tutorials and performance guide, rewritten."""
    for line in [
        "from reap.collectors import Collector, MultiSyncCollector, MultiAsyncCollector, MultiCollector",
        "from reap.collectors import VanillaWeightUpdater, WeightUpdaterBase, ProfileConfig",
        "from reap.collectors.distributed import RayCollector, RPCCollector, DistributedCollector",
        "from reap.envs import GymEnv, ParallelEnv, SerialEnv, TransformedEnv, StepCounter, ExplorationType",
        "from reap.envs.utils import ExplorationType, set_exploration_type",
        "from reap.data import ReplayBuffer, LazyTensorStorage, LazyMemmapStorage, SliceSampler",
        "from reap.data.replay_buffers import TensorDictReplayBuffer, PrioritizedReplayBuffer",
        "from reap.data.replay_buffers.storages import LazyTensorStorage",
        "from reap.data.replay_buffers.samplers import SamplerWithoutReplacement, PrioritizedSampler",
        "from reap.data.replay_buffers.writers import RoundRobinWriter",
        "from reap.objectives.value import GAE, TDLambdaEstimator",
        "from reap.objectives.value.functional import generalized_advantage_estimate, vec_td1_return_estimate",
        "from reap.objectives.value.advantages import MultiAgentGAE",
        "from reap.modules import LSTMModule, GRUModule",
        "from reap.modules.tensordict_module.rnn import LSTMModule, set_recurrent_mode",
        "from reap.weight_update import SharedMemWeightSyncScheme, WeightSyncScheme",
        "from reap._utils import compile_with_warmup",
    ]:
        exec(line, {})


def test_core_paths_resolve_to_core_objects():
    for module, names in core_exports().items():
        mirrored = importlib.import_module(module)
        for name in names:
            assert getattr(mirrored, name) is getattr(reap, name), (module, name)


def test_star_import_and_submodule_attributes():
    namespace: dict = {}
    exec("from reap.data.replay_buffers.writers import *", namespace)
    assert {"RoundRobinWriter", "TensorDictMaxValueWriter", "Writer"} <= set(namespace)
    import reap.data

    assert reap.data.replay_buffers.samplers.SliceSampler is reap.SliceSampler
    with pytest.raises(ImportError, match="cannot import name 'Nope' from 'reap.data'"):
        exec("from reap.data import Nope", {})
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("reap.nonexistent_module")


@pytest.fixture(scope="module")
def fresh_import():
    """One fresh interpreter, with the replay and value plugins disabled: first what importing reap
    and core paths loads, then what the mirrored paths of the disabled plugins say."""
    out = _run("""
import sys
import reap
from reap.envs.utils import ExplorationType
from reap._utils import compile_with_warmup
from reap.envs import StepCounter
loaded = sorted(m for m in sys.modules if m.startswith("reap_"))
print(loaded, reap.plugins.get_registries.cache_info().currsize)
print("----", flush=True)
try:
    reap.MultiAgentGAE
except ImportError as exc:
    print(exc)
from reap.data.replay_buffers.samplers import SamplerWithoutReplacement
""", REAP_DISABLE_PLUGINS="replay,value")
    before, _, after = out.stdout.partition("----\n")
    return out, before, after


def test_import_reap_and_core_paths_load_no_plugin(fresh_import):
    out, before, _ = fresh_import
    assert before.strip() == "[] 0", out.stderr


def test_mirrored_path_of_a_disabled_plugin_names_the_package(fresh_import):
    out, _, after = fresh_import
    assert out.returncode == 1
    assert after.startswith("MultiAgentGAE is provided by reap-value, which is installed but its reap plugin")
    assert out.stderr.strip().splitlines()[-1] == (
        "reap.plugins.PluginNotInstalledError: SamplerWithoutReplacement is provided by reap-replay, which is "
        "installed but its reap plugin is not loaded (REAP_DISABLE_PLUGINS / REAP_DISABLE_PLUGIN_AUTOLOAD, or it "
        "failed to load: run `reap plugins`); reinstall it with `uv pip install --reinstall reap-replay`.")


def test_name_of_an_uninstalled_package_names_it():
    absent = [(name, dist) for name, (dist, modules) in EXPORT_HINTS.items() if modules
              and dist not in _plugin_packages()]
    if not absent:
        pytest.skip("every package of the hint table is installed")
    name, dist = absent[0]
    module = importlib.import_module(EXPORT_HINTS[name][1][0])
    with pytest.raises(ImportError, match=f"{name} is provided by {dist}, which is not installed; "
                                          f"install it with `uv pip install {dist}`"):
        getattr(module, name)


def test_register_rejects_bad_modules():
    class Plugin:
        def __init__(self, modules):
            self.modules = modules

        @reap.hookimpl
        def reap_register_exports(self, register):
            register("Thing", "builtins:object", modules=self.modules)

    for modules, error, match in [("reap.data", TypeError, r"pass modules=\('reap.data',\)"),
                                  (("torchrl.data",), ValueError, "'torchrl.data' is not under 'reap.'")]:
        pm = pluggy.PluginManager("reap")
        pm.add_hookspecs(hookspecs)
        pm.register(Plugin(modules), name="bad")
        with pytest.raises(error, match=match):
            Registries(pm, [PluginInfo("bad", "bad-dist", "0")])


def _exports(module, name: str) -> bool:
    """Whether TorchRL's ``module`` offers ``name``: in its ``__all__``, or, without one, defined
    in it or below it (not a name it merely imports, such as the spec classes in ``libs.gym``)."""
    if hasattr(module, "__all__"):
        return name in module.__all__
    obj = vars(module).get(name)
    return obj is not None and getattr(obj, "__module__", "").startswith(module.__name__)


def test_torchrl_paths_are_mirrored():
    """Every reap name TorchRL has in one of its user-facing modules is at reap's same path."""
    pytest.importorskip("torchrl")
    names = set(reap.__all__) | {n for names in plugin_exports().values() for n in names}
    missing = []
    for torchrl_module in TORCHRL_MODULES:
        theirs = importlib.import_module(torchrl_module)
        ours = importlib.import_module(torchrl_module.replace("torchrl", "reap", 1))
        for name in sorted(names):
            if _exports(theirs, name):
                try:
                    getattr(ours, name)
                except AttributeError:
                    missing.append(f"{ours.__name__}.{name}")
    assert not missing
