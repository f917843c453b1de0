"""TorchRL's module paths under ``reap`` (``reap.mirror``) and the install-hint table."""

import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pluggy
import pytest

import reap
from reap import hookspecs
from reap.export_hints import EXPORT_HINTS, TORCHRL_ONLY, TORCHRL_VERSION
from reap.mirror import NotInReapError, core_exports, plugin_exports, torchrl_names
from reap.plugins import (
    KNOWN_PROVIDERS,
    PACKAGES,
    PluginInfo,
    PluginNotInstalledError,
    Registries,
    get_registries,
    install_command,
    repository,
)

ROOT = Path(__file__).resolve().parents[3]

# The TorchRL modules reap mirrors: where collectors, envs, transforms, replay, value estimation,
# recurrent modules and weight sync live in TorchRL.
TORCHRL_MODULES = ["torchrl" + module.removeprefix("reap") for module in TORCHRL_ONLY]

# TorchRL names reap deliberately leaves to TorchRL, in the modules short enough to list: each
# raises NotInReapError naming TorchRL's import (the long modules, envs, data, modules, are
# checked by the same rule without a list).
NOT_IN_REAP = {
    "reap.collectors": ["AsyncBatchedCollector", "RemoteModuleWeightUpdater"],
    "reap.collectors.distributed": ["DEFAULT_SLURM_CONF", "submitit_delayed_launcher"],
    # multi-agent groups: reap's specs have flat keys, no agent groups
    "reap.envs.utils": ["MarlGroupMapType", "check_marl_grouping"],
    "reap.data.replay_buffers.writers": ["ImmutableDatasetWriter", "WriterEnsemble"],
    "reap.data.replay_buffers.storages": ["CompressedListStorage", "StorageEnsemble",
                                          "StoreStorage"],
    "reap.weight_update": ["DistributedTransport", "InitialSyncTransport", "MPTransport", "RPCTransport",
                           "RayModuleTransformScheme", "RayTransport", "SharedMemTransport", "TransportBackend",
                           "WeightSyncBackend"],
}


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

    assert SamplerWithoutReplacement.__module__.startswith("reap_replay.samplers")
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
        "failed to load: run `reap plugins`); reinstall it with `uv pip install --no-sources --reinstall-package "
        f"reap-replay {ROOT / 'packages' / 'replay'}`.")


def test_name_of_an_uninstalled_package_names_it():
    absent = [(name, dist) for name, (dist, modules) in EXPORT_HINTS.items() if modules
              and dist not in _plugin_packages()]
    if not absent:
        pytest.skip("every package of the hint table is installed")
    name, dist = absent[0]
    module = importlib.import_module(EXPORT_HINTS[name][1][0])
    with pytest.raises(ImportError, match=re.escape(f"{name} is provided by {dist}, which is not installed; "
                                                    f"install it with {install_command(dist)}.")):
        getattr(module, name)


def test_install_commands_name_the_folders_of_this_clone():
    """reap-core is installed from this checkout (editable), so hints name its folders; the
    table of folders and reap dependencies is the packages' own pyproject.toml files."""
    assert repository() == ROOT
    declared = {}
    for pyproject in [*ROOT.glob("packages/*/pyproject.toml"), *ROOT.glob("plugins/*/pyproject.toml")]:
        project = tomllib.loads(pyproject.read_text())["project"]
        needs = tuple(d for d in project["dependencies"] if d.startswith("reap-") and d != "reap-core")
        declared[project["name"]] = (str(pyproject.parent.relative_to(ROOT)), needs)
    del declared["reap-testing"]  # internal test helpers: no plugin, nothing to hint at
    assert PACKAGES == declared
    assert install_command("reap-collectors-ray") == f"`uv pip install --no-sources {ROOT}/packages/collectors-ray`"
    assert install_command("reap-threads", reinstall=True) == (
        f"`uv pip install --no-sources --reinstall-package reap-threads {ROOT}/plugins/reap-threads`")
    assert install_command("someone-elses-plugin") == "`uv pip install someone-elses-plugin`"


def test_every_torchrl_name_resolves_or_names_torchrl():
    """Each of TorchRL's public names at a path reap mirrors is reap's object there, or raises an
    ImportError saying where it is (reap's package to install, or TorchRL's import): never a bare
    AttributeError. The names left to TorchRL are exactly the generated table's."""
    torchrl = pytest.importorskip("torchrl")
    if torchrl.__version__ != TORCHRL_VERSION:
        pytest.skip(f"TORCHRL_ONLY lists TorchRL {TORCHRL_VERSION}'s names, this is {torchrl.__version__}")
    assert {"reap.collectors", "reap.collectors.distributed", "reap.envs", "reap.envs.utils",
            "reap.envs.transforms", "reap.data", "reap.data.replay_buffers.samplers", "reap.objectives.value",
            "reap.objectives.value.advantages", "reap.modules.tensordict_module.rnn", "reap.weight_update",
            "reap._utils"} <= set(TORCHRL_ONLY)
    for theirs in TORCHRL_MODULES:
        module = importlib.import_module("reap" + theirs.removeprefix("torchrl"))
        left_to_torchrl = []
        for name in sorted(torchrl_names(importlib.import_module(theirs))):
            try:
                getattr(module, name)
            except NotInReapError as exc:
                assert str(exc) == (f"{name} is TorchRL's ({theirs}); reap does not provide it: "
                                    f"use `from {theirs} import {name}`.")
                left_to_torchrl.append(name)
            except PluginNotInstalledError as exc:
                assert f"{name} is provided by reap-" in str(exc)
        assert tuple(left_to_torchrl) == TORCHRL_ONLY[module.__name__], (
            f"{module.__name__}: reap/export_hints.py is out of date: run "
            "`uv run --group bench python tools/update_export_hints.py`")
        assert left_to_torchrl == NOT_IN_REAP.get(module.__name__, left_to_torchrl), module.__name__
    with pytest.raises(ImportError, match=re.escape("MLP is TorchRL's (torchrl.modules); reap does not provide "
                                                    "it: use `from torchrl.modules import MLP`.")):
        exec("from reap.modules import MLP, LSTMModule", {})


SCRIPT = """\
from torchrl.collectors import Collector
from torchrl.envs import GymEnv, StepCounter
from torchrl.envs.utils import ExplorationType, RandomPolicy, set_exploration_type
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE
from torchrl.modules import LSTMModule
    from torchrl.modules import GRUModule, set_recurrent_mode  # indented, with a comment
from torchrl.modules import MLP, ProbabilisticActor
from torchrl.modules import LSTMModule as TorchRLLSTM, MLP
from torchrl.modules.tensordict_module.rnn import GRUModule as RNNGRU
"""

REWRITTEN = """\
from reap.collectors import Collector
from reap.envs import GymEnv, StepCounter
from reap.envs.utils import ExplorationType, RandomPolicy, set_exploration_type
from reap.data import LazyTensorStorage, ReplayBuffer
from torchrl.objectives import ClipPPOLoss
from reap.objectives.value import GAE
from reap.modules import LSTMModule
    from reap.modules import GRUModule, set_recurrent_mode  # indented, with a comment
from torchrl.modules import MLP, ProbabilisticActor
from torchrl.modules import LSTMModule as TorchRLLSTM, MLP
from reap.modules.tensordict_module.rnn import GRUModule as RNNGRU
"""


def test_the_readme_sed_rewrites_what_reap_provides_and_leaves_the_rest(tmp_path):
    """The README's sed, run for real on a script: reap's names move to reap, TorchRL's models
    and losses (and lines mixing them with reap's) stay TorchRL's, and the result imports."""
    if shutil.which("sed") is None or shutil.which("bash") is None:
        pytest.skip("needs GNU sed and bash")
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(names=.*?sed -i -E .*?)```", readme, re.S).group(1)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    subprocess.run(["bash", "-c", block.replace("train.py", str(script))], check=True, timeout=60)
    assert script.read_text() == REWRITTEN
    pytest.importorskip("torchrl")
    namespace: dict = {}
    exec(REWRITTEN.replace("    from", "from"), namespace)
    names = ["Collector", "GymEnv", "RandomPolicy", "ReplayBuffer", "GAE", "LSTMModule", "GRUModule",
             "set_recurrent_mode", "RNNGRU", "MLP", "TorchRLLSTM", "ClipPPOLoss"]
    assert [namespace[name].__module__.split(".")[0] for name in names] == (
        ["reap"] * 3 + ["reap_replay", "reap_value"] + ["reap_rnn"] * 4 + ["torchrl"] * 3)


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


def test_torchrl_paths_are_mirrored():
    """Every reap name TorchRL has in one of its user-facing modules is at reap's same path."""
    pytest.importorskip("torchrl")
    names = set(reap.__all__) | {n for names in plugin_exports().values() for n in names}
    missing = []
    for torchrl_module in TORCHRL_MODULES:
        theirs = importlib.import_module(torchrl_module)
        ours = importlib.import_module(torchrl_module.replace("torchrl", "reap", 1))
        for name in sorted(names):
            if name in torchrl_names(theirs):
                try:
                    getattr(ours, name)
                except (AttributeError, NotInReapError):
                    missing.append(f"{ours.__name__}.{name}")
    assert not missing


def test_torchrl_env_module_paths_added_for_its_tests_import():
    from reap.envs.batched_envs import ParallelEnv, SerialEnv
    from reap.envs.common import EnvBase
    from reap.envs.libs.gym import gym_backend, set_gym_backend

    assert (SerialEnv, ParallelEnv, EnvBase) == (reap.SerialEnv, reap.ParallelEnv, reap.EnvBase)
    assert set_gym_backend is reap.envs.set_gym_backend and gym_backend is reap.envs.gym_backend
