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
from reap.envs.env_creator import EnvCreator
from reap.envs.transforms import (
    CatFrames,
    CatTensors,
    ClipTransform,
    Compose,
    DoubleToFloat,
    ExcludeTransform,
    FrameSkipTransform,
    InitTracker,
    NoopResetEnv,
    ObservationNorm,
    RenameTransform,
    RewardClipping,
    RewardScaling,
    RewardSum,
    SelectTransform,
    StepCounter,
    TensorDictPrimer,
    Transform,
    TransformedEnv,
    UnsqueezeTransform,
    VecNorm,
)
from reap.envs.utils import RandomPolicy, check_env_specs, exploration_type, step_mdp
from reap.errors import WorkerError
from reap.plugins import PluginNotInstalledError, hookimpl
from reap.postprocs import MultiStep
from reap.specs import Binary, Bounded, Categorical, Composite, OneHot, Unbounded
from reap.specs_torchrl import install as _install_torchrl_specs
from reap.weight_update import (
    NoWeightSyncScheme,
    VanillaWeightUpdater,
    WeightSyncScheme,
    WeightUpdaterBase,
)

__version__ = "0.1.0"

_mirror.install()  # TorchRL's module paths: ``from reap.data import SliceSampler`` (reap.mirror)
_install_torchrl_specs()  # TorchRL's modules take reap's specs, once TorchRL is imported

__all__ = [
    "BaseCollector",
    "Binary",
    "Bounded",
    "CatFrames",
    "CatTensors",
    "Categorical",
    "ClipTransform",
    "Collector",
    "Compose",
    "Composite",
    "DataCollectorBase",
    "DoubleToFloat",
    "EnvBase",
    "EnvCreator",
    "ExcludeTransform",
    "ExplorationType",
    "FrameSkipTransform",
    "GymEnv",
    "InitTracker",
    "MultiCollector",
    "MultiStep",
    "NoWeightSyncScheme",
    "NoopResetEnv",
    "ObservationNorm",
    "OneHot",
    "PluginNotInstalledError",
    "RandomPolicy",
    "RenameTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SelectTransform",
    "SerialEnv",
    "StepCounter",
    "SyncDataCollector",
    "TensorDictPrimer",
    "Transform",
    "TransformedEnv",
    "Unbounded",
    "UnsqueezeTransform",
    "VanillaWeightUpdater",
    "VecNorm",
    "WeightSyncScheme",
    "WeightUpdaterBase",
    "WorkerError",
    "check_env_specs",
    "compile_with_warmup",
    "exploration_type",
    "hookimpl",
    "set_exploration_type",
    "split_trajectories",
    "step_mdp",
]


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    from reap.plugins import resolve_export

    return resolve_export(name)
