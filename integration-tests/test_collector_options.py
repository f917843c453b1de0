"""Every option value reap's ``Collector`` refuses is refused, with the same message, by the
collectors that run it in workers (MultiSync/MultiAsync processes, Ray actors, RPC and
torch.distributed ranks) at construction: before a worker process or Ray is started. And
``init_random_frames`` takes what TorchRL's collectors take."""

import warnings

import pytest
import ray
import torch
from tensordict.nn import TensorDictModule

from reap import Collector
from reap_mp import MultiAsyncCollector, MultiSyncCollector
from reap_ray import RayCollector
from reap_rpc import DistributedCollector, RPCCollector
from reap_testing import child_pids, constant_policy, env_fn

REFUSED = [
    ({"max_frames_per_traj": 0}, ValueError, "max_frames_per_traj must be a positive int or None, got 0"),
    ({"init_random_frames": 2.5}, ValueError, r"init_random_frames must be a whole number of frames \(None or a "
                                              r"negative one: none\), got 2.5"),
    ({"init_random_frames": "64"}, ValueError, "init_random_frames must be a whole number of frames"),
    ({"exploration_type": "greedy"}, ValueError, "exploration_type must be an ExplorationType or one of 'mode', "),
    ({"postproc": 3}, TypeError, "postproc must be callable, got 3"),
    ({"env_device": "cuda"}, ValueError, "env_device='cuda': reap envs step on the CPU; leave env_device unset"),
    ({"storing_device": "bogus"}, ValueError, r"storing_device='bogus' is not a device \(.*\); give e.g. 'cpu'"),
    ({"policy_device": "bogus"}, ValueError, "policy_device='bogus' is not a device"),
    ({"policy_factory": 3}, TypeError, "policy_factory must be callable, got 3"),
    ({"frames_per_batch": 0}, ValueError, "frames_per_batch must be a positive int, got 0"),
    ({"total_frames": -5}, ValueError, r"total_frames must be a positive int, or -1 to collect forever, got -5"),
    ({"split_traj": True}, TypeError, "unexpected keyword argument 'split_traj'"),
    ({"compile_policy": True}, NotImplementedError, r"compile_policy=True is not supported by reap; leave it at None"),
]
WORKER_COLLECTORS = [MultiSyncCollector, MultiAsyncCollector, RayCollector, RPCCollector, DistributedCollector]


@pytest.mark.parametrize("kwargs,error,message", REFUSED, ids=[next(iter(k)) + "=" + repr(next(iter(k.values())))
                                                               for k, _, _ in REFUSED])
def test_what_collector_refuses_every_worker_collector_refuses_before_a_worker_starts(kwargs, error, message):
    args = {"frames_per_batch": 8, "total_frames": 16, **kwargs}
    policy = None if "policy_factory" in kwargs else constant_policy()
    with pytest.raises(error, match=f"^Collector: {message}"):
        Collector(env_fn()(), policy, **args)
    assert not ray.is_initialized()
    before = child_pids()
    try:
        for cls in WORKER_COLLECTORS:
            with pytest.raises(error, match=f"^{cls.__name__}: {message}"):
                cls([env_fn(), env_fn()], policy, **args)
            assert child_pids() == before, f"{cls.__name__} started a process before refusing {kwargs}"
            assert not ray.is_initialized(), f"{cls.__name__} started Ray before refusing {kwargs}"
    finally:
        ray.shutdown()  # only if the test failed: none was started


def _random_batches(collector) -> list[bool]:
    """For each batch: were its actions random (the policy always answers 0)?"""
    try:
        return [bool((batch["action"] != 0).any()) for batch in collector]
    finally:
        collector.shutdown()  # TorchRL's Collector is no context manager


@pytest.mark.parametrize("value", [None, -1, -5, 0, 8, 20, 16.0])
def test_init_random_frames_as_torchrl_takes_it(value):
    torchrl_collectors = pytest.importorskip("torchrl.collectors")
    from torchrl.envs import GymEnv as TorchRLGymEnv

    from reap import GymEnv

    policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    torch.nn.init.zeros_(policy.module.weight)
    torch.nn.init.zeros_(policy.module.bias)
    kwargs = {"frames_per_batch": 8, "total_frames": 40, "init_random_frames": value}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both warn that 20 is not a whole number of batches
        theirs = _random_batches(torchrl_collectors.Collector(TorchRLGymEnv("Pendulum-v1"), policy, **kwargs))
        ours = _random_batches(Collector(GymEnv("Pendulum-v1"), policy, **kwargs))
    assert ours == theirs
    assert sum(ours) == {8: 1, 20: 3, 16.0: 2}.get(value, 0)
