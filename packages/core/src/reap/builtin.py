"""reap-core's own plugin: registers the in-process ``local`` backend like any other plugin,
and core's public names under TorchRL's module paths (``from reap.envs.utils import ...``)."""

from reap.plugins import hookimpl
from reap.registry import CollectorBackend, WeightSyncSchemeEntry

#: Transforms importable from ``reap.envs.transforms`` (and, through the registry, from ``reap``).
_NEW_TRANSFORMS = (
    "ActionDiscretizer", "ActionMask", "AutoResetEnv", "AutoResetTransform", "BinarizeReward", "BurnInTransform",
    "CenterCrop",
    "ConditionalSkip", "Crop", "DTypeCastTransform", "DiscreteActionProjection", "EndOfLifeTransform",
    "ExpandAs", "FiniteTensorDictCheck",
    "FlattenObservation", "GrayScale", "Hash", "MultiStepTransform", "ObservationTransform", "RandomCropTensorDict",
    "Resize", "TimeMaxPool", "TrajCounter",
    "LineariseRewards", "PermuteTransform", "RemoveEmptySpecs",
    "Reward2GoTransform", "SignTransform", "SqueezeTransform", "Stack", "TargetReturn", "ToTensorImage",
    "UnaryTransform", "VecNormV2",
)
_TRANSFORMS = (
    "CatFrames", "CatTensors", "ExcludeTransform", "FrameSkipTransform", "NoopResetEnv",
    "RenameTransform", "RewardClipping", "RewardScaling", "SelectTransform", "UnsqueezeTransform",
    *_NEW_TRANSFORMS,
)
_SPECS = ("Binary", "Bounded", "Categorical", "Composite", "OneHot", "Unbounded")
#: Names importable from their own module, not from ``reap`` itself.
_SPEC_CLASSES = (
    "BoundedContinuous", "Choice", "MultiCategorical", "MultiOneHot", "NonTensor", "Stacked", "StackedComposite",
    "TensorSpec",
    "UnboundedContinuous", "UnboundedDiscrete",
)
_SPEC_BOXES = ("BinaryBox", "BoundedDiscrete", "Box", "BoxList", "CategoricalBox", "ContinuousBox", "DiscreteBox")
_ENV_HELPERS = ("make_composite_from_td", "terminated_or_truncated")
_MODULE_HELPERS = ("get_env_transforms_from_module", "get_primers_from_module")
_UNWRAP = ("auto_unwrap_transformed_env", "set_auto_unwrap_transformed_env")
_GYM_BACKEND = ("gym_backend", "set_gym_backend")
_HOMES = {**{n: "reap.specs" for n in (*_SPEC_CLASSES, *_SPEC_BOXES)}, **{n: "reap.envs.utils" for n in _ENV_HELPERS},
          **{n: "reap.envs.gymnasium_backend" for n in _GYM_BACKEND},
          **{n: "reap.envs.transforms" for n in _NEW_TRANSFORMS}, "DensifyReward": "reap.postprocs",
          "seed_generator": "reap.envs.seeding", **{n: "reap.collectors.policy_transforms" for n in _MODULE_HELPERS},
          **{n: "reap.envs.transforms.unwrap" for n in _UNWRAP}, "GymWrapper": "reap.envs.gym",
          **{n: "reap.envs.gym_info" for n in ("BaseInfoDictReader", "default_info_dict_reader")},
          "Evaluator": "reap.collectors.evaluator", "WeightStrategy": "reap.weight_update"}

#: Core's public names (all importable from ``reap``) by the TorchRL module paths they mirror.
MODULES = {
    "reap.collectors": (
        "BaseCollector", "Collector", "DataCollectorBase", "Evaluator", "MultiCollector", "RandomPolicy",
        "SyncDataCollector", "VanillaWeightUpdater", "WeightUpdaterBase",
    ),
    "reap.collectors.utils": ("split_trajectories",),
    "reap.envs": (
        "ClipTransform", "Compose", "DoubleToFloat", "EnvBase", "ExplorationType", "GymEnv", "GymWrapper",
        "default_info_dict_reader",
        "InitTracker", "ObservationNorm", "RewardSum", "SerialEnv", "StepCounter",
        "TensorDictPrimer", "Transform", "TransformedEnv", "VecNorm", "set_exploration_type",
        *_TRANSFORMS, "EnvCreator", "check_env_specs", "exploration_type", "step_mdp", *_ENV_HELPERS,
        *_GYM_BACKEND,
    ),
    "reap.envs.transforms": (
        "ClipTransform", "Compose", "DoubleToFloat", "InitTracker", "ObservationNorm", "RewardSum",
        "StepCounter", "TensorDictPrimer", "Transform", "TransformedEnv", "VecNorm", *_TRANSFORMS,
    ),
    "reap.envs.transforms.transforms": (
        "ClipTransform", "Compose", "DoubleToFloat", "InitTracker", "ObservationNorm", "RewardSum",
        "StepCounter", "TensorDictPrimer", "Transform", "TransformedEnv", "VecNorm", *_TRANSFORMS,
    ),
    "reap.envs.utils": (
        "ExplorationType", "RandomPolicy", "check_env_specs", "exploration_type", "set_exploration_type",
        "step_mdp", *_ENV_HELPERS,
    ),
    "reap.data": (*_SPECS, *_SPEC_CLASSES, "DensifyReward", "MultiStep"),
    "reap.data.tensor_specs": (*_SPECS, *_SPEC_CLASSES, *_SPEC_BOXES),
    "reap.data.postprocs": ("DensifyReward", "MultiStep"),
    "reap.envs.batched_envs": ("SerialEnv",),
    "reap.envs.common": ("EnvBase",),
    "reap.envs.libs.gym": ("GymEnv", "GymWrapper", "default_info_dict_reader", *_GYM_BACKEND),
    "reap.envs.gym_like": ("BaseInfoDictReader", "default_info_dict_reader"),
    "reap.weight_update": ("NoWeightSyncScheme", "VanillaWeightUpdater", "WeightStrategy", "WeightSyncScheme",
                           "WeightUpdaterBase"),
    "reap._utils": ("compile_with_warmup", "seed_generator", *_UNWRAP),
    "reap.modules": ("RandomPolicy", *_MODULE_HELPERS),
    "reap.modules.utils": _MODULE_HELPERS,
    "reap.modules.tensordict_module": ("RandomPolicy",),
}


def _local_factory(**kwargs):
    from reap.collectors.collector import Collector

    kwargs.pop("sync", None)
    return Collector(**kwargs)


@hookimpl
def reap_register_collector_backends(register):
    register(CollectorBackend("local", _local_factory, "single-process Collector (this process)"))


@hookimpl
def reap_register_weight_sync_schemes(register):
    from reap.weight_update import NoWeightSyncScheme

    register(WeightSyncSchemeEntry("none", NoWeightSyncScheme, "no synchronisation: workers keep their policy"))


@hookimpl
def reap_register_exports(register):
    """Core's names under the TorchRL paths of :data:`MODULES` (importable from ``reap``, or from their
    module for those of :data:`_HOMES`)."""
    names = sorted({name for names in MODULES.values() for name in names})
    for name in names:
        target = f"{_HOMES.get(name, 'reap')}:{name}"
        register(name, target, modules=tuple(m for m, ns in MODULES.items() if name in ns))
    # TorchRL's private spec-hook decorators, which its custom-env tutorial imports
    for name in ("apply_to_composite", "apply_to_composite_inv"):
        register(f"_{name}", f"reap.envs.transforms.transform:{name}", modules=("reap.envs.transforms.transforms",))
