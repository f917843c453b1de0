"""reap: reinforcement-learning experience collection, fast and at any scale.

Public names of installed reap packages are importable from here too: ``from reap import
MultiSyncCollector`` works once reap-collectors-mp is installed, and otherwise raises an
ImportError naming the package to install.
"""

from tensordict.nn import InteractionType as ExplorationType
from tensordict.nn import set_interaction_type as set_exploration_type

from reap import mirror as _mirror
from reap.collectors import (
    BaseCollector,
    Collector,
    DataCollectorBase,
    MultiCollector,
    SyncDataCollector,
    split_trajectories,
)
from reap.compile import compile_with_warmup
from reap.envs import EnvBase, GymEnv, SerialEnv
from reap.envs.transforms import (
    ClipTransform,
    Compose,
    DoubleToFloat,
    InitTracker,
    ObservationNorm,
    RewardSum,
    StepCounter,
    TensorDictPrimer,
    Transform,
    TransformedEnv,
    VecNorm,
)
from reap.plugins import PluginNotInstalledError, hookimpl
from reap.weight_update import VanillaWeightUpdater, WeightUpdaterBase

__version__ = "0.1.0"

_mirror.install()  # TorchRL's module paths: ``from reap.data import SliceSampler`` (reap.mirror)

__all__ = [
    "BaseCollector",
    "ClipTransform",
    "Collector",
    "Compose",
    "DataCollectorBase",
    "DoubleToFloat",
    "EnvBase",
    "ExplorationType",
    "GymEnv",
    "InitTracker",
    "MultiCollector",
    "ObservationNorm",
    "PluginNotInstalledError",
    "RewardSum",
    "SerialEnv",
    "StepCounter",
    "SyncDataCollector",
    "TensorDictPrimer",
    "Transform",
    "TransformedEnv",
    "VanillaWeightUpdater",
    "VecNorm",
    "WeightUpdaterBase",
    "compile_with_warmup",
    "hookimpl",
    "set_exploration_type",
    "split_trajectories",
]


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    from reap.plugins import resolve_export

    return resolve_export(name)
