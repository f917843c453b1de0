"""Transforms: ``TransformedEnv`` and TorchRL's transforms, one file per concept.

reap's transforms act on the collector's preallocated step arrays in place (see
``transformed_env`` and ``layout``); each also has TorchRL's TensorDict hooks (``t(td)``,
``_call``, ``_step``, ``_reset``, ``inv``, the spec hooks), and a user's ``Transform`` subclass
written for TorchRL runs through those (``torchrl_hooks``).

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import Compose, RewardSum, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(), RewardSum()))
    >>> td = env.rollout(4)
    >>> td["next", "step_count"].flatten().tolist()
    [1, 2, 3, 4]
"""

from reap.envs.transforms.action_discretizer import ActionDiscretizer
from reap.envs.transforms.action_mask import ActionMask
from reap.envs.transforms.action_projection import DiscreteActionProjection
from reap.envs.transforms.auto_reset import AutoResetEnv, AutoResetTransform
from reap.envs.transforms.burn_in import BurnInTransform
from reap.envs.transforms.catframes import CatFrames
from reap.envs.transforms.checks import FiniteTensorDictCheck
from reap.envs.transforms.compose import Compose
from reap.envs.transforms.end_of_life import EndOfLifeTransform
from reap.envs.transforms.image import CenterCrop, Crop, GrayScale, Resize, ToTensorImage
from reap.envs.transforms.keys import (
    ExcludeTransform,
    RemoveEmptySpecs,
    RenameTransform,
    SelectTransform,
)
from reap.envs.transforms.multistep import MultiStepTransform
from reap.envs.transforms.normalization import ObservationNorm, VecNorm
from reap.envs.transforms.pooling import TimeMaxPool
from reap.envs.transforms.primer import TensorDictPrimer
from reap.envs.transforms.random_crop import RandomCropTensorDict
from reap.envs.transforms.returns import Reward2GoTransform, TargetReturn
from reap.envs.transforms.reward import (
    BinarizeReward,
    LineariseRewards,
    RewardClipping,
    RewardScaling,
    RewardSum,
    SignTransform,
)
from reap.envs.transforms.stepping import ConditionalSkip, FrameSkipTransform, NoopResetEnv
from reap.envs.transforms.steps import InitTracker, StepCounter, TrajCounter
from reap.envs.transforms.tensors import (
    CatTensors,
    ExpandAs,
    FlattenObservation,
    PermuteTransform,
    SqueezeTransform,
    Stack,
    UnsqueezeTransform,
)
from reap.envs.transforms.transform import ObservationTransform, Transform
from reap.envs.transforms.transformed_env import TransformedEnv
from reap.envs.transforms.unary import Hash, UnaryTransform
from reap.envs.transforms.values import ClipTransform, DoubleToFloat, DTypeCastTransform
from reap.envs.transforms.vecnorm import VecNormV2
from reap.mirror import module_getattr

__all__ = [
    "ActionDiscretizer",
    "ActionMask",
    "AutoResetEnv",
    "AutoResetTransform",
    "BinarizeReward",
    "BurnInTransform",
    "CatFrames",
    "CatTensors",
    "CenterCrop",
    "ClipTransform",
    "Compose",
    "ConditionalSkip",
    "Crop",
    "DTypeCastTransform",
    "DiscreteActionProjection",
    "DoubleToFloat",
    "EndOfLifeTransform",
    "ExcludeTransform",
    "ExpandAs",
    "FiniteTensorDictCheck",
    "FlattenObservation",
    "FrameSkipTransform",
    "GrayScale",
    "Hash",
    "InitTracker",
    "LineariseRewards",
    "MultiStepTransform",
    "NoopResetEnv",
    "ObservationNorm",
    "ObservationTransform",
    "PermuteTransform",
    "RandomCropTensorDict",
    "RemoveEmptySpecs",
    "RenameTransform",
    "Resize",
    "Reward2GoTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SelectTransform",
    "SignTransform",
    "SqueezeTransform",
    "Stack",
    "StepCounter",
    "TargetReturn",
    "TensorDictPrimer",
    "TimeMaxPool",
    "ToTensorImage",
    "TrajCounter",
    "Transform",
    "TransformedEnv",
    "UnaryTransform",
    "UnsqueezeTransform",
    "VecNorm",
    "VecNormV2",
]

#: TorchRL's other names at this path say where they are (``reap.mirror``).
__getattr__ = module_getattr(__name__)
