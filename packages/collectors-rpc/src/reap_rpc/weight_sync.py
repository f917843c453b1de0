"""Weights to remote workers: packed once per push, carried with each worker's next request.

* :class:`RPCWeightSyncScheme` (``"rpc"``): the weights as a CPU TensorDict, an argument of the
  worker's next ``collect`` RPC (TensorPipe moves the tensors).
* :class:`DistributedWeightSyncScheme` (``"distributed"``): the weights packed into one byte
  buffer laid out as the worker's policy, sent to the worker with one gloo message before its
  next collect command.

Either way the worker loads them before its next rollout, never during one, and tags its
batches with their version. :class:`RPCWeightUpdater` and :class:`DistributedWeightUpdater` are
TorchRL's adapter names: ``collector.weight_updater(weights, worker_ids=[0])`` pushes through
the collector.

Examples:
    >>> import torch
    >>> from reap_rpc.weight_sync import DistributedWeightSyncScheme
    >>> scheme = DistributedWeightSyncScheme()
    >>> packed = scheme.pack(torch.nn.Linear(2, 1), scheme.layout_of(torch.nn.Linear(2, 1)))
    >>> packed.dtype, packed.numel() > 12
    (torch.uint8, True)
"""

from __future__ import annotations

from reap.weight_update import WeightSyncScheme, WeightUpdaterBase, as_weights
from reap_rpc._flat import FlatLayout


class RPCWeightSyncScheme(WeightSyncScheme):
    """The ``"rpc"`` scheme: weights as a CPU TensorDict argument of the next collect call
    (``pack``: reap-core's detached copy).

    Examples:
        >>> from reap.plugins import get_weight_sync_scheme
        >>> get_weight_sync_scheme("rpc").cls().name
        'rpc'
    """

    name = "rpc"

    def __init__(self, **options):
        if options:
            raise TypeError(f"RPCWeightSyncScheme: unexpected options {sorted(options)}")
        super().__init__()


class DistributedWeightSyncScheme(WeightSyncScheme):
    """The ``"distributed"`` scheme: weights as one gloo message laid out as the worker's policy
    (``layout``, which the collector sets from the workers' policy).

    Examples:
        >>> from reap.plugins import get_weight_sync_scheme
        >>> get_weight_sync_scheme("distributed").cls().name
        'distributed'
    """

    name = "distributed"
    layout: FlatLayout | None = None

    def __init__(self, **options):
        if options:
            raise TypeError(f"DistributedWeightSyncScheme: unexpected options {sorted(options)}")
        super().__init__()

    @staticmethod
    def layout_of(weights) -> FlatLayout:
        return FlatLayout.of(as_weights(weights))

    def pack(self, weights, layout: FlatLayout | None = None):
        layout = self.layout if layout is None else layout
        if layout is None:
            raise ValueError("update_policy_weights_: the workers' policy has no weights to update")
        buf = layout.empty()
        layout.pack(as_weights(weights), buf)
        return buf


class RemoteWeightUpdater(WeightUpdaterBase):
    """Pushes weights to an RPC or distributed collector's workers.

    ``updater(weights, worker_ids=[0])`` equals ``collector.update_policy_weights_(weights,
    worker_ids=[0])``; with no weights, ``weight_getter()`` (if given) or the collector's own
    policy is the source.

    Examples:
        >>> from reap_rpc import RPCWeightUpdater
        >>> RPCWeightUpdater().collector is None
        True
    """

    def __init__(self, *, weight_getter=None, policy_weights=None, **torchrl_options):
        self.weight_getter = weight_getter
        self.policy_weights = policy_weights

    def push_weights(self, weights=None, worker_ids=None) -> None:
        if self.collector is None:
            raise RuntimeError(f"{type(self).__name__}: not registered with a collector")
        if weights is None and self.weight_getter is not None:
            weights = self.weight_getter()
        if weights is None:
            weights = self.policy_weights
        self.collector._push_weights(weights, worker_ids)


class RPCWeightUpdater(RemoteWeightUpdater):
    """TorchRL's name for the updater of an :class:`~reap_rpc.RPCCollector`.

    Examples:
        >>> from reap_rpc import RPCWeightUpdater
        >>> updater = RPCWeightUpdater(weight_getter=lambda: {"module.weight": 1.0})
        >>> updater.weight_getter()
        {'module.weight': 1.0}
    """


class DistributedWeightUpdater(RemoteWeightUpdater):
    """TorchRL's name for the updater of a :class:`~reap_rpc.DistributedCollector`.

    Examples:
        >>> from reap_rpc import DistributedWeightUpdater
        >>> DistributedWeightUpdater().push_weights()
        Traceback (most recent call last):
        ...
        RuntimeError: DistributedWeightUpdater: not registered with a collector
    """


__all__ = ["DistributedWeightSyncScheme", "DistributedWeightUpdater", "RPCWeightSyncScheme",
           "RPCWeightUpdater", "RemoteWeightUpdater"]
