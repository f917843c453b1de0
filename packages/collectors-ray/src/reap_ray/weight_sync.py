"""Weights to Ray actors: one ``ray.put`` per update, shared by every actor.

:class:`RayWeightSyncScheme` (``"ray"``) packs a policy's weights as a flat dict of NumPy
arrays (Ray hands them to every actor on a node from the same shared-memory object, without a
copy) and puts them in the object store once. The collector carries the resulting object ref
with each actor's next collect request; the actor copies the weights into its policy before
that rollout starts, never during one. :class:`RayWeightUpdater` is the TorchRL adapter name:
``collector.weight_updater(weights, worker_ids=...)`` pushes through the collector.

Examples:
    >>> import torch
    >>> from reap_ray.weight_sync import pack_weights, unpack_weights
    >>> packed = pack_weights(torch.nn.Linear(2, 1))
    >>> sorted(packed)
    ['bias', 'weight']
    >>> unpack_weights(packed)["weight"].shape
    torch.Size([1, 2])
"""

from __future__ import annotations

import warnings

import numpy as np
import ray
import torch
from tensordict import TensorDict, TensorDictBase

from reap.weight_update import WeightSyncScheme, WeightUpdaterBase, as_weights

_SEP = "."


def pack_weights(weights) -> dict | TensorDictBase:
    """Weights as ``{"a.b": ndarray}`` (zero-copy in Ray's object store), or a CPU TensorDict.

    Dtypes NumPy lacks (bfloat16) stay a TensorDict.
    """
    td = as_weights(weights)
    flat = td.flatten_keys(_SEP)
    out = {}
    for key, value in flat.items():
        value = value.detach()
        if value.dtype == torch.bfloat16:
            return td.detach().cpu().clone()
        out[key] = value.cpu().numpy()
    return out


def unpack_weights(packed) -> TensorDictBase:
    """The TensorDict of :func:`pack_weights`' output (read-only arrays are only read from)."""
    if isinstance(packed, TensorDictBase):
        return packed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # read-only arrays: copied into the policy, never written
        tensors = {key: torch.from_numpy(np.asarray(value)) for key, value in packed.items()}
    return TensorDict(tensors).unflatten_keys(_SEP)


class RayWeightSyncScheme(WeightSyncScheme):
    """The ``"ray"`` scheme: one ``ray.put`` per update, applied by actors between rollouts.

    Examples:
        >>> from reap.plugins import get_weight_sync_scheme
        >>> get_weight_sync_scheme("ray").cls().name
        'ray'
    """

    name = "ray"

    def __init__(self, **options):
        if options:
            raise TypeError(f"RayWeightSyncScheme: unexpected options {sorted(options)}")
        super().__init__()

    def pack(self, weights):
        """An object ref to the packed weights, shared by every actor that receives them."""
        return ray.put(pack_weights(weights))

    @staticmethod
    def apply(collector, packed) -> None:
        """In the actor, between rollouts: copy the weights into its collector's policy."""
        collector.update_policy_weights_(unpack_weights(packed))

    @staticmethod
    def applier(collector):
        """``apply`` for this actor's collector. For a reap ``Collector`` running a CPU module
        with the default weight updater, the weights are copied array by array straight into
        the policy's parameters and buffers (the driver checked them against this policy's
        layout before the ``ray.put``): half the time of the general path for a 1M-parameter MLP.

        Examples:
            >>> import torch
            >>> from reap import Collector, GymEnv
            >>> collector = Collector(GymEnv("Pendulum-v1"), None, frames_per_batch=2)
            >>> RayWeightSyncScheme.applier(collector) is RayWeightSyncScheme.apply  # no module to copy into
            True
        """
        from reap.collectors.collector import Collector
        from reap.weight_update import VanillaWeightUpdater

        policy = getattr(collector, "policy", None)
        if type(collector) is not Collector or not isinstance(policy, torch.nn.Module) \
                or type(collector.weight_updater) is not VanillaWeightUpdater:
            return RayWeightSyncScheme.apply
        flat = as_weights(policy).flatten_keys(_SEP)
        if any(v.device.type != "cpu" or v.dtype == torch.bfloat16 for v in flat.values()):
            return RayWeightSyncScheme.apply
        targets = {key: value.detach().numpy() for key, value in flat.items()}

        def apply(collector, packed) -> None:
            if not isinstance(packed, dict) or packed.keys() != targets.keys():
                RayWeightSyncScheme.apply(collector, packed)
                return
            for key, array in packed.items():
                np.copyto(targets[key], array)

        return apply


class RayWeightUpdater(WeightUpdaterBase):
    """Pushes weights to a :class:`~reap_ray.RayCollector`'s actors (TorchRL's adapter name).

    ``RayCollector(weight_updater=RayWeightUpdater())`` is what the collector builds anyway;
    ``updater(weights, worker_ids=[0])`` equals ``collector.update_policy_weights_(weights,
    worker_ids=[0])``. With no weights, ``weight_getter()`` (if given) or the collector's own
    policy is the source.

    Examples:
        >>> from reap_ray import RayWeightUpdater
        >>> RayWeightUpdater().collector is None
        True
    """

    def __init__(self, *, weight_getter=None, policy_weights=None, remote_collectors=None,
                 max_interval: int | None = None):
        self.weight_getter = weight_getter
        self.policy_weights = policy_weights

    def push_weights(self, weights=None, worker_ids=None) -> None:
        if self.collector is None:
            raise RuntimeError("RayWeightUpdater: not registered with a RayCollector")
        if weights is None and self.weight_getter is not None:
            weights = self.weight_getter()
        if weights is None:
            weights = self.policy_weights
        self.collector._push_weights(weights, worker_ids)
