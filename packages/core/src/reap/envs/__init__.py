"""Environments: the protocol, gymnasium wrappers, batched envs and transforms."""

from reap.envs.base import EnvBase
from reap.envs.gym import GymEnv
from reap.envs.serial import SerialEnv

__all__ = ["EnvBase", "GymEnv", "SerialEnv"]
