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

from reap.weight_update import WeightUpdaterBase, as_weights
from reap_rpc._flat import FlatLayout


class RPCWeightSyncScheme:
    """The ``"rpc"`` scheme: weights as a CPU TensorDict argument of the next collect call.

    Examples:
        >>> from reap.plugins import get_weight_sync_scheme
        >>> get_weight_sync_scheme("rpc").cls().name
        'rpc'
    """

    name = "rpc"

    def __init__(self, **options):
        if options:
            raise TypeError(f"RPCWeightSyncScheme: unexpected options {sorted(options)}")

    @staticmethod
    def pack(weights):
        return as_weights(weights).detach().cpu().clone()

    def __repr__(self) -> str:
        return "RPCWeightSyncScheme()"


class DistributedWeightSyncScheme:
    """The ``"distributed"`` scheme: weights as one gloo message laid out as the worker's policy.

    Examples:
        >>> from reap.plugins import get_weight_sync_scheme
        >>> get_weight_sync_scheme("distributed").cls().name
        'distributed'
    """

    name = "distributed"

    def __init__(self, **options):
        if options:
            raise TypeError(f"DistributedWeightSyncScheme: unexpected options {sorted(options)}")

    @staticmethod
    def layout_of(weights) -> FlatLayout:
        return FlatLayout.of(as_weights(weights))

    @staticmethod
    def pack(weights, layout: FlatLayout):
        buf = layout.empty()
        layout.pack(as_weights(weights), buf)
        return buf

    def __repr__(self) -> str:
        return "DistributedWeightSyncScheme()"


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
