"""Environments: the protocol, gymnasium wrappers, batched envs and transforms."""

from reap.envs.base import EnvBase
from reap.envs.gym import GymEnv
from reap.envs.serial import SerialEnv
from reap.mirror import module_getattr

__all__ = ["EnvBase", "GymEnv", "SerialEnv"]

#: Names of other packages under TorchRL's path (``from reap.envs import ParallelEnv``).
__getattr__ = module_getattr(__name__)
