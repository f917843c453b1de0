""":class:`PrioritizedReplayBuffer` and :class:`TensorDictPrioritizedReplayBuffer`: buffers built
with a :class:`~reap_replay.samplers.PrioritizedSampler` from ``alpha``, ``beta`` and ``eps``."""

from __future__ import annotations

import torch

from reap_replay.buffers.base import ReplayBuffer, _build
from reap_replay.buffers.tensordict import TensorDictReplayBuffer
from reap_replay.samplers import PrioritizedSampler
from reap_replay.storages import ListStorage, Storage


def _prioritized(name, storage, alpha, beta, eps, dtype, reduction, sampler_device, sync):
    """``(storage, sampler)`` of a prioritized buffer."""
    if sync is not True:
        raise NotImplementedError(
            f"{name}(sync={sync!r}): reap-replay keeps the priority tree with the buffer (sync=True); "
            "to prioritize from other processes, send them the buffer's update_priority calls"
        )
    storage = _build(storage, Storage, "storage")
    if storage is None:
        storage = ListStorage(1000)
    if storage.max_size is None:
        raise ValueError(
            f"{name} needs a storage with a finite max_size (the priority tree has a slot per "
            "item), e.g. ListStorage(1000) or LazyTensorStorage(1000)"
        )
    sampler = PrioritizedSampler(
        storage.max_size, alpha, beta, eps, dtype, reduction=reduction, device=sampler_device
    )
    return storage, sampler


class PrioritizedReplayBuffer(ReplayBuffer):
    """A replay buffer with a :class:`PrioritizedSampler` (``alpha``, ``beta``, ``eps``).

    Keyword Args:
        alpha (float): prioritisation exponent.
        beta (float): importance-sampling exponent.
        eps (float): added to ``|priority|``. Defaults to 1e-8.
        dtype (torch.dtype): dtype of the trees. Defaults to ``torch.float32``.
        storage (Storage, optional): defaults to ``ListStorage(1000)``.
        sampler (PrioritizedSampler, optional): a sampler to use instead of building one
            (then without ``sampler_device``).
        sampler_device: where the trees live (defaults to the storage's device).
        sync (bool): only ``True`` (the tree stays with the buffer).
        **kwargs: as :class:`ReplayBuffer`.

    Examples:
        >>> import torch
        >>> from reap_replay import LazyTensorStorage, PrioritizedReplayBuffer
        >>> rb = PrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(10))
        >>> _ = rb.extend(torch.arange(4.0))
        >>> rb.update_priority(torch.tensor([0, 1, 2, 3]), torch.tensor([0.0, 0.0, 0.0, 5.0]))
        >>> batch, info = rb.sample(3, return_info=True)
        >>> sorted(info)
        ['index', 'priority_weight']
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float32,
        storage=None,
        sampler=None,
        sampler_device=None,
        sync: bool = True,
        delayed_init: bool = False,
        **kwargs,
    ):
        kwargs["delayed_init"] = delayed_init
        if sampler is not None:
            if sampler_device is not None:
                raise TypeError("sampler_device cannot be passed when sampler is provided.")
            super().__init__(storage=storage, sampler=sampler, **kwargs)
            return
        reduction = kwargs.pop("reduction", "max")
        storage, sampler = _prioritized(type(self).__name__, storage, alpha, beta, eps, dtype,
                                        reduction, sampler_device, sync)
        super().__init__(storage=storage, sampler=sampler, **kwargs)

    @property
    def prioritized_sampler(self) -> PrioritizedSampler:
        """The sampler that holds the priorities."""
        return self._sampler


class TensorDictPrioritizedReplayBuffer(TensorDictReplayBuffer):
    """:class:`TensorDictReplayBuffer` with a :class:`PrioritizedSampler`.

    Samples carry ``"index"`` and ``"priority_weight"``; ``priority_key`` entries (default
    ``"td_error"``) set priorities on ``extend`` and :meth:`update_tensordict_priority`.

    Keyword Args:
        alpha (float): prioritisation exponent.
        beta (float): importance-sampling exponent.
        priority_key (NestedKey): defaults to ``"td_error"``.
        eps (float): added to ``|priority|``. Defaults to 1e-8.
        reduction (str): per-item reduction of multi-element priorities. Defaults to ``"max"``.
        sampler_device: where the trees live (defaults to the storage's device).
        sync (bool): only ``True`` (the tree stays with the buffer).
        **kwargs: as :class:`ReplayBuffer` (no ``sampler``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap_replay import LazyTensorStorage, TensorDictPrioritizedReplayBuffer
        >>> rb = TensorDictPrioritizedReplayBuffer(
        ...     alpha=0.7, beta=0.5, storage=LazyTensorStorage(10), batch_size=4
        ... )
        >>> _ = rb.extend(TensorDict({"obs": torch.randn(6, 3)}, [6]))
        >>> sample = rb.sample()
        >>> sample["td_error"] = torch.rand(4)
        >>> rb.update_tensordict_priority(sample)
        >>> sorted(sample.keys())
        ['index', 'obs', 'priority_weight', 'td_error']
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        priority_key="td_error",
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float32,
        storage=None,
        sampler=None,
        reduction: str = "max",
        sampler_device=None,
        sync: bool = True,
        compilable: bool = False,
        **kwargs,
    ):
        kwargs["compilable"] = compilable
        if sampler is not None:
            raise ValueError(f"{type(self).__name__} builds its own sampler: do not pass sampler=")
        storage, sampler = _prioritized(type(self).__name__, storage, alpha, beta, eps, dtype,
                                        reduction, sampler_device, sync)
        super().__init__(priority_key=priority_key, storage=storage, sampler=sampler, **kwargs)

    @property
    def prioritized_sampler(self) -> PrioritizedSampler:
        """The sampler that holds the priorities."""
        return self._sampler
