"""reap-collectors-rpc: reap collectors in torch.distributed worlds, without Ray.

:class:`RPCCollector` drives worker processes through ``torch.distributed.rpc``;
:class:`DistributedCollector` and :class:`DistributedSyncCollector` move batches and weights over
a private gloo group. :func:`serve` is what the non-zero ranks of a ``torchrun`` world run.

Examples:
    >>> from reap_rpc import DistributedCollector, RPCCollector, serve
    >>> RPCCollector.__name__, DistributedCollector.__name__
    ('RPCCollector', 'DistributedCollector')
"""

from reap_rpc._driver import RemoteCollectorError
from reap_rpc._rendezvous import PortInUseError
from reap_rpc.distributed import DistributedCollector, DistributedSyncCollector
from reap_rpc.rpc_collector import RPCCollector
from reap_rpc.torchrun import serve
from reap_rpc.weight_sync import (
    DistributedWeightSyncScheme,
    DistributedWeightUpdater,
    RPCWeightSyncScheme,
    RPCWeightUpdater,
)

__version__ = "0.1.0"

__all__ = [
    "DistributedCollector",
    "DistributedSyncCollector",
    "DistributedWeightSyncScheme",
    "DistributedWeightUpdater",
    "PortInUseError",
    "RPCCollector",
    "RPCWeightSyncScheme",
    "RPCWeightUpdater",
    "RemoteCollectorError",
    "serve",
]
