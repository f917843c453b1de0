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
