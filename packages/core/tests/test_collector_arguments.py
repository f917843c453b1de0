"""reap.collectors.arguments: the multi-worker arguments every backend checks the same way, the
TorchRL arguments reap takes without implementing them, and reap.collectors.worker.worker_seed."""

import re

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from reap import Collector, GymEnv
from reap.collectors.arguments import (
    check_int,
    check_postproc_and_buffer,
    check_torchrl_kwargs,
    checked_cat_results,
    checked_total_frames,
    checked_worker_ids,
    checked_worker_timeout,
    env_constructors,
    frames_per_worker,
    per_worker,
    policy_factories,
)
from reap.collectors.worker import worker_seed
from reap.weight_update import NoWeightSyncScheme, WeightSyncScheme


def make_env():
    return GymEnv("CartPole-v1")


def test_env_constructors():
    assert env_constructors(make_env, None, "C") == [make_env]
    assert env_constructors([make_env, make_env], 2, "C") == [make_env, make_env]
    for args, error, message in [
        ((make_env(), None), TypeError, "C: create_env_fn must be callables that build the env in the worker, not an "
                                        "env instance (pass the constructor, e.g. lambda: GymEnv(...))"),
        (([], None), ValueError, "C: create_env_fn is an empty list; pass one env constructor per worker"),
        (([make_env], 2), ValueError, "C: num_workers=2 but create_env_fn has 1 constructors"),
        ((make_env, 0), ValueError, "C: num_workers must be a positive int or None, got 0"),
        (("CartPole-v1", None), TypeError, "C: create_env_fn must be a list of env constructors (callables), got str"),
        (([make_env, 3], None), TypeError, "C: every create_env_fn entry must be a callable returning an env, got 3"),
    ]:
        with pytest.raises(error) as info:
            env_constructors(*args, "C")
        assert str(info.value) == message


def test_per_worker_and_policy_factories():
    assert per_worker(None, 3, "create_env_kwargs", "C") == [None, None, None]
    assert per_worker(({"a": 1}, {"a": 2}), 2, "create_env_kwargs", "C") == [{"a": 1}, {"a": 2}]
    with pytest.raises(ValueError, match=r"^C: storing_device has 3 entries but there are 2 workers$"):
        per_worker(["cpu"] * 3, 2, "storing_device", "C")
    assert policy_factories(None, make_env, 2, "C") == [make_env, make_env]
    with pytest.raises(ValueError, match=r"^C: pass policy or policy_factory, not both$"):
        policy_factories(object(), make_env, 1, "C")
    with pytest.raises(TypeError, match=r"^C: policy_factory must be callable, got 5$"):
        policy_factories(None, [make_env, 5], 2, "C")


def test_frames_per_worker_and_total_frames():
    assert frames_per_worker(10, 4, "C", sync=True) == [3, 3, 3, 3]
    assert frames_per_worker(10, 4, "C", sync=False) == [10, 10, 10, 10]
    assert frames_per_worker((4, 6), 2, "C", sync=True) == [4, 6]
    with pytest.raises(ValueError, match=r"^C: frames_per_batch has 1 entries but there are 2 workers; pass one per "
                                         r"worker or an int for the total$"):
        frames_per_worker([4], 2, "C", sync=True)
    for bad in (0, True, 2.0, [4, 0]):
        with pytest.raises(ValueError, match=r"^C: frames_per_batch must be a positive int, got "):
            frames_per_worker(bad, 2, "C", sync=True)
    assert checked_total_frames(None, "C") == -1 and checked_total_frames(-1, "C") == -1
    assert checked_total_frames(50, "C") == 50
    for bad in (0, -2, True, 1.5):
        with pytest.raises(ValueError, match=r"^C: total_frames must be a positive int, or -1 to collect forever"):
            checked_total_frames(bad, "C")


def test_cat_results_worker_timeout_and_the_rest():
    assert [checked_cat_results(v, "C") for v in (None, "stack", "cat", -1)] == ["stack", "stack", 0, -1]
    assert checked_cat_results(None, "A", sync_name="S") == "stack"
    with pytest.raises(ValueError, match=r"^C: cat_results must be 'stack', 'cat' or an int dim to concatenate along, "
                                         r"got 'glue'$"):
        checked_cat_results("glue", "C")
    with pytest.raises(ValueError, match=r"^A: cat_results=-1 only applies to S$"):
        checked_cat_results(-1, "A", sync_name="S")
    assert checked_worker_timeout(2, "C") == 2.0 and isinstance(checked_worker_timeout(2, "C"), float)
    for bad in (0, -1.0, True, "5"):
        with pytest.raises(ValueError, match=r"^C: worker_timeout must be a positive number of seconds"):
            checked_worker_timeout(bad, "C")
    check_int(None, "max_frames_per_traj", "C")
    with pytest.raises(ValueError, match=r"^C: max_restarts must be a non-negative int, got -1$"):
        check_int(-1, "max_restarts", "C", minimum=0, allow_none=False)
    check_postproc_and_buffer(None, None, "C")
    with pytest.raises(TypeError, match=r"^C: postproc must be callable, got 3$"):
        check_postproc_and_buffer(3, None, "C")
    with pytest.raises(TypeError, match=r"^C: replay_buffer must have an extend\(\) method"):
        check_postproc_and_buffer(None, object(), "C")


def test_worker_ids():
    assert checked_worker_ids(None, 2) == [0, 1]
    assert checked_worker_ids(1, 2) == [1] and checked_worker_ids([1, 0], 2) == [1, 0]
    for bad in (2, -1, True, [0, 5], ["0"]):
        with pytest.raises(ValueError, match=r"^update_policy_weights_: worker_ids must be worker indices in \[0, 2\), "
                                             rf"got {re.escape(repr(bad))}$"):
            checked_worker_ids(bad, 2)


def test_worker_seed_is_numpy_seed_sequence():
    for seed, idx, restarts in [(0, 0, 0), (7, 1, 0), (7, 1, 2), (2**40, 5, 1)]:
        state = np.random.SeedSequence([seed, idx, restarts]).generate_state(1, dtype=np.uint32)
        assert worker_seed(seed, idx, restarts) == int(state[0]) & 0x7FFFFFFF
    assert worker_seed(3, 1) == worker_seed(3, 1, 0)
    seeds = {worker_seed(s, i) for s in range(4) for i in range(4)}
    assert len(seeds) == 16  # seed + 1 is not worker idx + 1 shifted


@pytest.mark.parametrize("kwargs", [
    {"trust_policy": True, "use_buffers": False, "num_threads": 4, "no_cuda_sync": True},  # no effect
    {"reset_when_done": True, "compile_policy": False, "cudagraph_policy": None, "compact_obs": False,
     "preemptive_threshold": None, "weight_sync_schemes": None},  # their defaults (or a false value for None)
])
def test_torchrl_arguments_reap_takes(kwargs):
    check_torchrl_kwargs(kwargs, "C")


@pytest.mark.parametrize("kwargs, error, match", [
    ({"compile_policy": True}, NotImplementedError,
     r"C: compile_policy=True is not supported by reap; leave it at None \(compile the policy yourself"),
    ({"reset_when_done": False}, NotImplementedError, "C: reset_when_done=False is not supported by reap; leave it at True"),
    ({"weight_sync_schemes": {"policy": "shared_mem"}}, NotImplementedError,
     r"weight_sync_schemes=.* leave it at None \(a local collector runs the trainer's policy itself and takes only "
     r"NoWeightSyncScheme"),
    ({"weight_sync_schemes": {"policy": NoWeightSyncScheme(), "value": WeightSyncScheme()}}, NotImplementedError,
     r"weight_sync_schemes=.* leave it at None"),
    ({"bogus": 1}, TypeError, "C: unexpected keyword argument 'bogus'"),
])
def test_torchrl_arguments_reap_refuses(kwargs, error, match):
    with pytest.raises(error, match=match):
        check_torchrl_kwargs(kwargs, "C")
    with pytest.raises(error, match=match.replace("C: ", "Collector: ")):
        Collector(make_env, None, frames_per_batch=4, **kwargs)
    check_torchrl_kwargs(kwargs, "C", also_no_effect=set(kwargs))  # a backend's own no-effect names


def test_a_local_collector_with_no_weight_sync_ignores_weight_updates_as_torchrls():
    """TorchRL 0.14.1's Collector(weight_sync_schemes={"policy": NoWeightSyncScheme()}) leaves its
    policy as it is on update_policy_weights_(weights) (measured); without the scheme it loads them."""
    for schemes, loads in [(None, True), ({"policy": NoWeightSyncScheme()}, False)]:
        policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        before = policy.module.weight.detach().clone()
        zeros = TensorDict.from_module(policy).data.clone().zero_()
        with Collector(lambda: GymEnv("Pendulum-v1"), policy, frames_per_batch=4, total_frames=4,
                       weight_sync_schemes=schemes) as c:
            c.update_policy_weights_(zeros)
            c.update_policy_weights_(weights_dict={"policy": zeros})
            assert torch.equal(policy.module.weight.detach(), torch.zeros_like(before) if loads else before)
            assert next(iter(c)).batch_size == (4,)


def test_a_local_collector_refuses_the_selectors_of_several_workers_with_the_fix():
    env = GymEnv("CartPole-v1")
    with pytest.raises(ValueError, match=r"backend='local' runs one collector in this process, num_collectors=2 "
                                         r"needs backend='mp' \(or no backend\)"):
        Collector(env, None, backend="local", num_collectors=2, frames_per_batch=8)
    with pytest.raises(ValueError, match=r"sync is for collectors of several workers .* leave sync out"):
        Collector(env, None, frames_per_batch=8, sync=True)
    with pytest.raises(ValueError, match="backend_options are for the other backends; backend='direct'"):
        Collector(env, None, backend="direct", backend_options={"worker_timeout": 5}, frames_per_batch=8)
    with pytest.raises(TypeError, match="num_collectors must be a positive int, got 2.0"):
        Collector(env, None, num_collectors=2.0, frames_per_batch=8)
    with pytest.raises(ValueError, match="num_collectors must be a positive int or None, got 0"):
        Collector(env, None, num_collectors=0, frames_per_batch=8)
    with Collector(env, None, backend="direct", num_collectors=1, frames_per_batch=8, total_frames=8) as collector:
        assert type(collector) is Collector and next(iter(collector)).batch_size == (8,)


def test_the_collectors_devices_are_attributes_as_torchrls():
    collector = Collector(lambda: GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=4)
    assert (collector.env_device, collector.policy_device, collector.storing_device) == (None, None, None)
    collector.shutdown()
    collector = Collector(lambda: GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=4,
                          env_device="cpu", device="cpu")
    assert [str(d) for d in (collector.env_device, collector.policy_device, collector.storing_device)] == ["cpu"] * 3
    collector.shutdown()


def test_compact_obs_is_refused_only_where_it_is_not_built():
    """The Ray and RPC collectors pass TorchRL's arguments through check_torchrl_kwargs: refused
    there with where to find it; Collector takes it."""
    with pytest.raises(NotImplementedError, match=r"C: compact_obs=True is not supported by reap; leave it at False "
                                                  r"\(reap's Collector, MultiSyncCollector and MultiAsyncCollector"):
        check_torchrl_kwargs({"compact_obs": True}, "C")
    with Collector(make_env, None, frames_per_batch=4, compact_obs=True) as c:
        assert c.compact_obs and ("next", "observation") not in c.empty_batch().keys(True)
