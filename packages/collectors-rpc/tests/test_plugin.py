"""The plugin's registrations, the docstring examples, collector_class, and ``reap collect --backend rpc``."""

import doctest
import importlib

import pytest
import torch

import reap
from reap.plugins import collector_backends, get_registries
from reap_rpc import DistributedCollector, RPCCollector
from reap_testing import ConstantPolicy, ConstantPolicyFactory, constant_policy, env_fn

FAST_MODULES = ["reap_rpc", "reap_rpc.plugin", "reap_rpc.weight_sync", "reap_rpc._flat",
                "reap_rpc._rendezvous", "reap_rpc.torchrun"]


def test_backends_schemes_and_exports_are_registered():
    assert {"rpc", "distributed"} <= set(collector_backends())
    schemes = get_registries().weight_sync_schemes
    assert schemes["rpc"].cls.__name__ == "RPCWeightSyncScheme"
    assert schemes["distributed"].cls.__name__ == "DistributedWeightSyncScheme"
    for name in ("RPCCollector", "DistributedCollector", "DistributedSyncCollector", "RPCWeightUpdater",
                 "DistributedWeightUpdater", "RPCWeightSyncScheme", "DistributedWeightSyncScheme"):
        assert getattr(reap, name).__module__.startswith("reap_rpc"), name
        assert ">>>" in getattr(reap, name).__doc__, name
    from reap.collectors.distributed import DistributedCollector, RPCCollector  # TorchRL's path

    assert RPCCollector is reap.RPCCollector and DistributedCollector is reap.DistributedCollector


@pytest.mark.parametrize("name", FAST_MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["reap_rpc.rpc_collector", "reap_rpc.distributed"])
def test_collector_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.slow
def test_collector_class_sync_runs_worker_processes_inside_each_worker():
    with RPCCollector([env_fn(batch=2)] * 2, ConstantPolicy(4.0).as_module(), collector_class="sync",
                      num_workers_per_collector=2, frames_per_batch=16, total_frames=16,
                      collector_kwargs={"mp_start_method": "forkserver"}) as collector:
        batch = next(iter(collector))
        # async: one worker's MultiSyncCollector batch, its 2 processes stacked: [2, 2 envs, 2 steps]
        assert batch.batch_size == torch.Size([2, 2, 4])
        assert batch["action"].unique().tolist() == [4.0]


@pytest.mark.slow
def test_weights_reach_workers_of_a_policy_factory_inside_each_worker():
    # each worker runs a MultiSyncCollector whose own workers make the policy: the worker reports
    # their weights' layout, so pushes are checked and delivered (they were refused as "no parameters")
    with DistributedCollector([env_fn()] * 2, None, policy_factory=ConstantPolicyFactory(1.0), collector_class="sync",
                              num_workers_per_collector=1, frames_per_batch=8, total_frames=24, sync=True,
                              collector_kwargs={"mp_start_method": "forkserver"}) as collector:
        actions = []
        for batch in collector:
            actions.append(batch["action"].unique().tolist())
            collector.update_policy_weights_(constant_policy(3.0))
    assert actions == [[1.0], [3.0], [3.0]]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rpc", "distributed"])
def test_reap_collect_cli_backend(backend, capsys):
    from reap.cli import main

    main(["collect", "--env", "CartPole-v1", "--frames", "80", "--backend", backend, "--workers", "2",
          "--num-envs", "2", "--frames-per-batch", "40", "--no-progress", "--seed", "1"])
    assert "collected 80 frames" in capsys.readouterr().out
