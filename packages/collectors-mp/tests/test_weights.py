"""Pushed weights must match the workers' policy exactly, and restarted workers run the latest."""

import functools
import os
import signal

import pytest
import torch
from tensordict.nn import TensorDictModule

from reap_mp import MultiAsyncCollector, MultiSyncCollector, PipeWeightSyncScheme
from reap_testing import ConstantPolicy, env_fn

FAST = "forkserver"


def linear_policy():
    module = torch.nn.Linear(2, 1)
    with torch.no_grad():
        module.weight.zero_()
        module.bias.zero_()
    return TensorDictModule(module, in_keys=["observation"], out_keys=["action"])


def test_restarted_worker_runs_the_current_weights_after_an_integer_push():
    # the repro: int64 weights first (exactly castable), then the float policy, then
    # SIGKILL worker 0. The copy kept for restarts must be float, not truncated int64.
    trainer = linear_policy()
    collector = MultiSyncCollector([env_fn(), env_fn()], trainer, worker_tags=True, frames_per_batch=8,
                                   mp_start_method=FAST, on_worker_failure="restart")
    with collector:
        collector.update_policy_weights_({"module.weight": torch.ones(1, 2, dtype=torch.int64),
                                          "module.bias": torch.zeros(1, dtype=torch.int64)})
        batch = collector.next()
        assert torch.equal(batch["action"], batch["observation"].sum(-1, keepdim=True))
        with torch.no_grad():
            trainer.module.weight.copy_(torch.tensor([[0.3, -1.7]]))
            trainer.module.bias.fill_(0.1)
        collector.update_policy_weights_()
        collector.next()
        os.kill(collector.worker_pids[0], signal.SIGKILL)
        batch = collector.next()
        assert collector.worker_restarts == [1, 0]
        assert (batch["collector", "policy_version"] == 2).all()
        expected = trainer(batch.select("observation").clone())["action"]
        torch.testing.assert_close(batch["action"], expected, rtol=1e-6, atol=1e-6)
        kept = collector._latest.weights
        assert kept["module", "weight"].dtype == torch.float32


@pytest.mark.parametrize("scheme", [None, PipeWeightSyncScheme()], ids=["shared_mem", "pipe"])
def test_mismatched_weights_are_refused_before_anything_changes(scheme):
    collector = MultiSyncCollector([env_fn(), env_fn()], ConstantPolicy(1.0).as_module(), worker_tags=True, frames_per_batch=8,
                                   mp_start_method=FAST, weight_sync_schemes=scheme)
    with collector:
        with pytest.raises(ValueError, match=r"update_policy_weights_: the weights' 'module\.weight' has shape "
                                             r"\(2,\) but the policy's has shape \(1,\)"):
            collector.update_policy_weights_({"weight": torch.tensor([2.0, 2.0])})  # broadcastable
        with pytest.raises(ValueError, match=r"'module\.weight' are torch\.float64 and cannot be cast exactly "
                                             r"to the policy's torch\.float32 \(0\.1 would become"):
            collector.update_policy_weights_({"weight": torch.tensor([0.1], dtype=torch.float64)})
        assert collector.policy_version == 0
        batch = collector.next()
        assert (batch["action"] == 1.0).all()
        collector.update_policy_weights_({"weight": torch.tensor([3], dtype=torch.int64)})  # exact: cast
        batch = collector.next()
        assert (batch["action"] == 3.0).all()
        assert (batch["collector", "policy_version"] == 1).all()


def test_a_worker_restarted_after_its_own_push_runs_those_weights():
    collector = MultiAsyncCollector([env_fn(), env_fn()], ConstantPolicy(1.0).as_module(), worker_tags=True, frames_per_batch=4,
                                    mp_start_method=FAST, on_worker_failure="restart")
    with collector:
        it = iter(collector)
        next(it)
        collector.update_policy_weights_({"weight": torch.tensor([5.0])}, worker_ids=[1])
        os.kill(collector.worker_pids[1], signal.SIGKILL)
        seen = []
        while len(seen) < 3:
            batch = next(it)
            if batch["collector", "worker_id"][0] == 1:
                seen.append(batch)
        assert collector.worker_restarts == [0, 1]
        for batch in seen:  # a batch sent before the kill may be older: its version says so
            version = int(batch["collector", "policy_version"][0])
            assert (batch["action"] == {0: 1.0, 1: 5.0}[version]).all()
        assert int(seen[-1]["collector", "policy_version"][0]) == 1  # the restarted worker's


def test_schemes_from_torchrls_backend_names():
    from reap.weight_update import (
        MultiProcessWeightSyncScheme,
        NoWeightSyncScheme,
        WeightSyncScheme,
    )

    assert MultiProcessWeightSyncScheme is PipeWeightSyncScheme
    built = {name: type(WeightSyncScheme.from_backend(name)).__name__
             for name in ("none", "direct", "shared", "thread", "process", "multiprocessing")}
    assert built == {"none": "NoWeightSyncScheme", "direct": "NoWeightSyncScheme",
                     "shared": "SharedMemWeightSyncScheme", "thread": "SharedMemWeightSyncScheme",
                     "process": "PipeWeightSyncScheme", "multiprocessing": "PipeWeightSyncScheme"}
    assert WeightSyncScheme.from_backend("shared", lock_timeout=5).lock_timeout == 5.0
    assert isinstance(WeightSyncScheme.from_backend("none"), NoWeightSyncScheme)
    with pytest.raises(ValueError, match=r"from_backend: unsupported backend 'nccl'; expected one of \['direct'"):
        WeightSyncScheme.from_backend("nccl")


@pytest.mark.parametrize("collector_cls", [MultiSyncCollector, MultiAsyncCollector])
def test_no_weight_sync_scheme_keeps_the_workers_policy(collector_cls):
    from reap.weight_update import WeightSyncScheme

    collector = collector_cls([env_fn(), env_fn()], ConstantPolicy(1.0).as_module(), worker_tags=True, frames_per_batch=8,
                              mp_start_method=FAST,
                              weight_sync_schemes={"policy": WeightSyncScheme.from_backend("none")})
    with collector:
        collector.update_policy_weights_({"weight": torch.tensor([4.0])})
        assert collector.policy_version == 0
        for _, batch in zip(range(3), collector):
            assert (batch["action"] == 1.0).all()
            assert (batch["collector", "policy_version"] == 0).all()


@pytest.mark.parametrize("scheme_cls", ["SharedMemWeightSyncScheme", "MultiProcessWeightSyncScheme"])
def test_init_on_sender_as_torchrl_then_a_mismatched_worker_is_named(scheme_cls):
    """TorchRL's scheme.init_on_sender(model=..., devices=..., model_id="policy") before the
    collector: weights then reach the workers as usual; a worker whose policy does not have the
    model's layout is an error naming the entry."""
    import reap_mp
    from reap_testing import constant_policy, env_fn

    scheme = getattr(reap_mp, scheme_cls)()
    scheme.init_on_sender(model=constant_policy(0.0), devices=["cpu", "cpu"], model_id="policy")
    with reap_mp.MultiSyncCollector([env_fn(), env_fn()], policy_factory=functools.partial(constant_policy, 0.0),
                                    frames_per_batch=8, weight_sync_schemes={"policy": scheme},
                                    mp_start_method="forkserver") as c:
        c.update_policy_weights_(constant_policy(2.0))
        assert (c.next()["action"] == 2.0).all()
    other = getattr(reap_mp, scheme_cls)()
    other.init_on_sender(model=torch.nn.Linear(3, 1))
    with pytest.raises(ValueError, match=r"worker 0's policy does not match the model given to init_on_sender"):
        reap_mp.MultiSyncCollector([env_fn(), env_fn()], policy_factory=functools.partial(constant_policy, 0.0),
                                   frames_per_batch=8, weight_sync_schemes={"policy": other},
                                   mp_start_method="forkserver")
    with pytest.raises(ValueError, match=r"model_id='critic'; reap's collectors synchronise one model, 'policy'"):
        other.init_on_sender(model=torch.nn.Linear(3, 1), model_id="critic")
    with pytest.raises(TypeError, match=r"init_on_sender got unexpected keyword arguments \['modle'\]"):
        other.init_on_sender(modle=torch.nn.Linear(3, 1))
