import doctest

import pytest

import reap
import reap_mp
from reap.collectors.multi import MultiCollector
from reap.plugins import collector_backends, get_registries, get_weight_sync_scheme


@pytest.mark.parametrize("module", ["reap_mp.plugin", "reap_mp.weight_sync"])
def test_doctests(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0


def test_registrations():
    assert "mp" in collector_backends()
    assert get_weight_sync_scheme("shared_mem").cls is reap_mp.SharedMemWeightSyncScheme
    assert get_weight_sync_scheme("pipe").cls is reap_mp.PipeWeightSyncScheme
    for name in ["MultiSyncCollector", "MultiAsyncCollector", "MultiSyncDataCollector",
                 "MultiaSyncDataCollector", "ParallelEnv", "MultiProcessedWeightUpdater",
                 "SharedMemWeightSyncScheme", "PipeWeightSyncScheme", "AsyncCollector", "aSyncDataCollector"]:
        assert name in get_registries().exports
        assert getattr(reap, name) is getattr(reap_mp, name)
    assert reap.MultiSyncDataCollector is reap.MultiSyncCollector
    assert reap.MultiaSyncDataCollector is reap.MultiAsyncCollector
    assert reap.aSyncDataCollector is reap.AsyncCollector
    from reap.collectors import AsyncCollector  # TorchRL's module path

    assert AsyncCollector is reap_mp.AsyncCollector
    # reap-core's: the base of every backend's worker error, and weight-sync schemes' base
    assert reap_mp.WorkerError is reap.WorkerError and issubclass(reap.WorkerError, RuntimeError)
    assert issubclass(reap_mp.SharedMemWeightSyncScheme, reap.WeightSyncScheme)


def test_factory_dispatch_validates_before_spawning():
    # sync=False reaches MultiAsyncCollector, whose own check rejects cat_results
    with pytest.raises(ValueError, match="cat_results.*only applies to MultiSyncCollector"):
        MultiCollector([lambda: None], None, sync=False, frames_per_batch=4, cat_results=0)
    with pytest.raises(ValueError, match="create_env_fn is an empty list"):
        reap.Collector([], None, backend="mp", frames_per_batch=4)


def test_num_collectors_sync_and_backend_options_dispatch_as_torchrl():
    import torch

    from reap_testing import constant_policy, env_fn

    # num_collectors: that many collectors in processes, async by default (TorchRL 0.14's Collector);
    # "process" is TorchRL's name of "mp"; backend_options reach the collector
    with reap.Collector(env_fn(), constant_policy(), backend="process", num_collectors=2, frames_per_batch=8,
                        total_frames=16, backend_options={"worker_timeout": 30}) as c:
        assert type(c).__name__ == "MultiAsyncCollector" and c.num_workers == 2 and c.worker_timeout == 30
        assert [b.batch_size for b in c] == [torch.Size([8])] * 2
    with pytest.raises(ValueError, match="num_collectors=3 but create_env_fn has 2 constructors"):
        reap.Collector([env_fn()] * 2, None, num_collectors=3, frames_per_batch=8)
    with pytest.raises(ValueError, match=r"backend_options repeats \['frames_per_batch'\]"):
        reap.Collector(env_fn(), None, backend="mp", frames_per_batch=8, backend_options={"frames_per_batch": 4})
    with pytest.raises(TypeError, match="sync must be True, False or None, got 'yes'"):
        reap.Collector(env_fn(), None, backend="mp", sync="yes", frames_per_batch=8)
