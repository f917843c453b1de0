"""A user-held ``VanillaWeightUpdater`` is refused by the RPC and distributed collectors (it could
not reach the workers), at construction, before any worker process starts."""

import pytest

from reap import GymEnv, VanillaWeightUpdater
from reap_rpc import DistributedCollector, RPCCollector
from reap_testing.leaks import child_pids


@pytest.mark.parametrize("cls", [RPCCollector, DistributedCollector])
def test_vanilla_weight_updater_is_refused_before_workers_start(cls):
    before = child_pids()
    with pytest.raises(TypeError, match="weight_updater must be a RemoteWeightUpdater .*got VanillaWeightUpdater"):
        cls([lambda: GymEnv("CartPole-v1")], None, frames_per_batch=8, weight_updater=VanillaWeightUpdater())
    assert child_pids() == before
