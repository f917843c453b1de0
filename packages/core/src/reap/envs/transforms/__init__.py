"""Transforms: ``TransformedEnv`` and the transforms TorchRL users reach for, one file per concept.

They act on the collector's preallocated step arrays in place (see ``transformed_env``).

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import Compose, RewardSum, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(), RewardSum()))
    >>> td = env.rollout(4)
    >>> td["next", "step_count"].flatten().tolist()
    [1, 2, 3, 4]
"""

from reap.envs.transforms.keys import ExcludeTransform, RenameTransform, SelectTransform
from reap.envs.transforms.normalization import ObservationNorm, VecNorm
from reap.envs.transforms.primer import TensorDictPrimer
from reap.envs.transforms.reward import RewardClipping, RewardScaling, RewardSum
from reap.envs.transforms.stepping import FrameSkipTransform, NoopResetEnv
from reap.envs.transforms.steps import InitTracker, StepCounter
from reap.envs.transforms.tensors import CatFrames, CatTensors, UnsqueezeTransform
from reap.envs.transforms.transformed_env import Compose, Transform, TransformedEnv
from reap.envs.transforms.values import ClipTransform, DoubleToFloat
from reap.mirror import module_getattr

__all__ = [
    "CatFrames",
    "CatTensors",
    "ClipTransform",
    "Compose",
    "DoubleToFloat",
    "ExcludeTransform",
    "FrameSkipTransform",
    "InitTracker",
    "NoopResetEnv",
    "ObservationNorm",
    "RenameTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SelectTransform",
    "StepCounter",
    "TensorDictPrimer",
    "Transform",
    "TransformedEnv",
    "UnsqueezeTransform",
    "VecNorm",
]

#: TorchRL's other names at this path say where they are (``reap.mirror``).
__getattr__ = module_getattr(__name__)
