"""The base class of samplers and the helpers they share."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

_EMPTY = "Cannot sample from an empty storage."


def _index_device(storage):
    device = getattr(storage, "device", None)
    return torch.device(device) if device is not None else torch.device("cpu")


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _as_key(key):
    if key is None:
        return None
    return tuple(key) if isinstance(key, (tuple, list)) else key


class Sampler:
    """Base class of samplers: ``sample(storage, batch_size) -> (index, info)``.

    Examples:
        >>> from reap_replay.samplers import RandomSampler
        >>> isinstance(RandomSampler(), Sampler)
        True
    """

    _rng: torch.Generator | None = None

    def sample(self, storage, batch_size: int):
        raise NotImplementedError

    def add(self, index) -> None:
        pass

    def extend(self, index) -> None:
        pass

    def update_priority(self, index, priority, *, storage=None) -> None:
        pass

    def mark_update(self, index, *, storage=None) -> None:
        pass

    def _info_index(self, index):
        """What the buffer reports as ``info["index"]`` for the rows ``index`` it read."""
        return index

    @property
    def default_priority(self) -> float:
        return 1.0

    @property
    def ran_out(self) -> bool:
        return False

    @ran_out.setter
    def ran_out(self, value: bool) -> None:
        pass

    def _empty(self) -> None:
        pass

    def _new_epoch(self) -> None:
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        pass

    def _check_state(self, state_dict: dict, storage_len: int) -> None:
        """Raises (KeyError, ValueError) if ``state_dict`` does not fit a storage holding
        ``storage_len`` rows; ``load_state_dict`` of a checked state cannot fail."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def priority_of(data: TensorDictBase, key, reduction: str, n: int):
    """Per-item priorities from ``data[key]`` (``None`` if absent), reduced to one per item."""
    value = data.get(key, None)
    if value is None:
        return None
    value = value.reshape(n, -1)
    if value.shape[1] == 1:
        return value[:, 0]
    if reduction == "median":
        return value.median(1).values
    if reduction in ("max", "min"):
        return getattr(value, "a" + reduction)(1)
    return value.float().mean(1)
