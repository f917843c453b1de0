"""Collectors: the single-process ``Collector`` and the protocol all collectors share."""

from reap.collectors.base import BaseCollector
from reap.collectors.collector import Collector, SyncDataCollector
from reap.collectors.evaluator import Evaluator
from reap.collectors.interruptor import Interruptor
from reap.collectors.multi import MultiCollector
from reap.collectors.trajectories import TrajIdCounter, split_trajectories
from reap.mirror import module_getattr

DataCollectorBase = BaseCollector

__all__ = [
    "BaseCollector",
    "Collector",
    "DataCollectorBase",
    "Evaluator",
    "Interruptor",
    "MultiCollector",
    "SyncDataCollector",
    "TrajIdCounter",
    "split_trajectories",
]

#: Names of other packages under TorchRL's path (``from reap.collectors import MultiSyncCollector``).
__getattr__ = module_getattr(__name__)
