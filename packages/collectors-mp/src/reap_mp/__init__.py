"""reap-collectors-mp: multi-process sync and async collectors over shared memory.

``MultiSyncCollector`` / ``MultiAsyncCollector`` (and ``AsyncCollector``, one worker) run
reap's single-process ``Collector`` in worker processes that write batches into shared memory;
``ParallelEnv`` steps sub-envs in worker processes. Weight-sync schemes (``"shared_mem"``,
``"pipe"``) move trainer weights to the workers. Everything here is also importable from
``reap`` once this package is installed.
"""

from reap.errors import WorkerError as WorkerError  # reap-core's since the shared driver
from reap_mp.collectors import (
    AsyncCollector,
    MultiAsyncCollector,
    MultiaSyncDataCollector,
    MultiSyncCollector,
    MultiSyncDataCollector,
    aSyncDataCollector,
    worker_seed,
)
from reap_mp.parallel_env import ParallelEnv
from reap_mp.weight_sync import (
    MultiProcessedWeightUpdater,
    MultiProcessWeightSyncScheme,
    PipeWeightSyncScheme,
    SharedMemWeightSyncScheme,
)
from reap_mp.weight_sync import WeightSyncScheme as WeightSyncScheme  # reap.weight_update's

__all__ = [
    "AsyncCollector",
    "MultiAsyncCollector",
    "MultiProcessWeightSyncScheme",
    "MultiProcessedWeightUpdater",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "ParallelEnv",
    "PipeWeightSyncScheme",
    "SharedMemWeightSyncScheme",
    "aSyncDataCollector",
    "worker_seed",
]
