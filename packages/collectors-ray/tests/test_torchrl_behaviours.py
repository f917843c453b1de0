"""A user-held ``VanillaWeightUpdater`` is refused by ``RayCollector`` (it could not reach the
actors), before any Ray is started."""

import pytest
import ray

from reap import GymEnv, VanillaWeightUpdater
from reap_ray import RayCollector


def test_vanilla_weight_updater_is_refused_before_ray_starts():
    was_running = ray.is_initialized()
    with pytest.raises(TypeError, match="weight_updater must be a RayWeightUpdater, got VanillaWeightUpdater"):
        RayCollector([lambda: GymEnv("CartPole-v1")], None, frames_per_batch=8,
                     weight_updater=VanillaWeightUpdater())
    assert ray.is_initialized() == was_running
