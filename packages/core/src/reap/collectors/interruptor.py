"""Early stop of a rollout: TorchRL's ``interruptor`` and ``preemptive_threshold``.

A :class:`Collector` given an ``interruptor`` polls it after each step; once it says stop, the
rollout ends there and the batch keeps its full size, its steps not collected marked with
``("collector", "traj_ids") == -1`` (the other entries of those steps are stale). A
``MultiSyncCollector(preemptive_threshold=p)`` stops its slowest workers this way as soon as
``int(p * num_workers)`` have delivered; with ``cat_results="stack"`` the batch gains
``("collector", "mask")`` (True on collected steps), with another ``cat_results`` the steps not
collected are dropped.
"""

from __future__ import annotations

import ctypes
import multiprocessing

import torch
from tensordict import TensorDictBase

from reap.collectors.worker import TRAJ_KEY

#: the entry that flags a preempted batch's collected steps (``cat_results="stack"``)
MASK_KEY = ("collector", "mask")


class Interruptor:
    """A stop flag in shared memory: set in the trainer's process, read by every worker.

    It reaches a worker process only as an argument of the process it starts (shared memory is
    inherited, not pickled); threads share it as it is. Any object with TorchRL's three methods
    may stand in for it.

    Examples:
        >>> flag = Interruptor()
        >>> flag.collection_stopped()
        False
        >>> flag.stop_collection(); flag.collection_stopped()
        True
        >>> flag.start_collection(); flag.collection_stopped()
        False
    """

    def __init__(self):
        self._stopped = multiprocessing.RawValue(ctypes.c_bool, False)

    def start_collection(self) -> None:
        self._stopped.value = False

    def stop_collection(self) -> None:
        self._stopped.value = True

    def collection_stopped(self) -> bool:
        return self._stopped.value


def checked_interruptor(interruptor, owner: str):
    """``interruptor`` (None, or an object with ``collection_stopped()``) as given.

    Examples:
        >>> checked_interruptor(True, "Collector")
        Traceback (most recent call last):
        ...
        TypeError: Collector: interruptor must have a collection_stopped() method (e.g. reap.collectors.Interruptor()), got True
    """
    if interruptor is not None and not callable(getattr(interruptor, "collection_stopped", None)):
        raise TypeError(f"{owner}: interruptor must have a collection_stopped() method "
                        f"(e.g. reap.collectors.Interruptor()), got {interruptor!r}")
    return interruptor


def checked_preemptive_threshold(value, owner: str, *, sync: bool) -> float:
    """``preemptive_threshold`` as a float in [0, 1] (None: 1.0, never preempt).

    Examples:
        >>> checked_preemptive_threshold(None, "C", sync=True)
        1.0
        >>> checked_preemptive_threshold(1.5, "C", sync=True)
        Traceback (most recent call last):
        ...
        ValueError: C: preemptive_threshold must be between 0.0 and 1.0 (the share of workers that finish their rollout before the others are stopped), got 1.5
    """
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{owner}: preemptive_threshold must be between 0.0 and 1.0 (the share of workers that "
                         f"finish their rollout before the others are stopped), got {value!r}")
    if value < 1.0 and not sync:
        raise ValueError(f"{owner}: preemptive_threshold={value!r} stops the slow workers of a sync batch; an async "
                         "collector does not wait for them. Use MultiSyncCollector, or leave it unset")
    return float(value)


def collected_steps(batch: TensorDictBase) -> torch.Tensor:
    """The time steps of a worker's batch ``[*env_batch, T]`` that were collected (``[T]``)."""
    valid = batch.get(TRAJ_KEY) != -1
    return valid.reshape(-1, valid.shape[-1]).any(0)


def mark_collected(batch: TensorDictBase) -> int:
    """Add ``("collector", "mask")`` to a stacked batch; its number of collected frames."""
    mask = batch.get(TRAJ_KEY) != -1
    batch.set(MASK_KEY, mask)
    return int(mask.sum())


__all__ = ["MASK_KEY", "Interruptor", "checked_interruptor", "checked_preemptive_threshold", "collected_steps", "mark_collected"]
