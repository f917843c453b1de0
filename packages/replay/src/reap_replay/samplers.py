"""Samplers: which stored items a batch holds.

* :class:`RandomSampler`: uniform, with replacement.
* :class:`SamplerWithoutReplacement`: epochs over a permutation (``for batch in rb``).
* :class:`PrioritizedSampler`: proportional to ``(|priority| + eps) ** alpha``, with importance
  weights, over a :class:`~reap_replay.trees.PriorityTree` on the storage's device.
* :class:`SliceSampler`: contiguous slices of stored trajectories.

Every sampler returns ``(index, info)``; the replay buffer adds ``info["index"]``.

Examples:
    >>> import torch
    >>> from reap_replay.storages import LazyTensorStorage
    >>> storage = LazyTensorStorage(8)
    >>> storage.set(slice(0, 4), torch.arange(4))
    >>> index, info = SamplerWithoutReplacement(shuffle=False).sample(storage, 3)
    >>> index.tolist(), info
    ([0, 1, 2], {})
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase

from reap_replay._warn import _warn_once
from reap_replay.trees import PriorityTree, _first_bad, _why_bad

__all__ = [
    "PrioritizedSampler",
    "RandomSampler",
    "Sampler",
    "SamplerWithoutReplacement",
    "SliceSampler",
]

_EMPTY = "Cannot sample from an empty storage."


def _index_device(storage):
    device = getattr(storage, "device", None)
    return torch.device(device) if device is not None else torch.device("cpu")


class Sampler:
    """Base class of samplers: ``sample(storage, batch_size) -> (index, info)``.

    Examples:
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


class RandomSampler(Sampler):
    """Uniform sampling with replacement.

    Examples:
        >>> from reap_replay.storages import LazyTensorStorage
        >>> s = LazyTensorStorage(4)
        >>> s.set(slice(0, 2), torch.zeros(2))
        >>> index, _ = RandomSampler().sample(s, 5)
        >>> index.shape, bool((index < 2).all())
        (torch.Size([5]), True)
    """

    def sample(self, storage, batch_size: int):
        n = len(storage)
        if n == 0:
            raise RuntimeError(_EMPTY)
        index = torch.randint(n, (batch_size,), generator=self._rng)
        device = _index_device(storage)
        if device.type != "cpu":
            index = index.to(device)
        return index, {}


class SamplerWithoutReplacement(Sampler):
    """Epochs over a permutation of the stored items: no item twice before all were seen.

    After the last batch of an epoch ``ran_out`` is ``True`` (this ends ``for batch in rb``)
    and the next call starts a new epoch. A change in the storage's length starts a new epoch.

    Args:
        drop_last (bool): drop the last batch of an epoch if it is incomplete.
        shuffle (bool): permute the items (``False``: storage order).

    Examples:
        >>> from reap_replay.storages import LazyTensorStorage
        >>> s = LazyTensorStorage(8)
        >>> s.set(slice(0, 5), torch.arange(5))
        >>> sampler = SamplerWithoutReplacement(shuffle=False)
        >>> [sampler.sample(s, 2)[0].tolist() for _ in range(3)], sampler.ran_out
        ([[0, 1], [2, 3], [4]], True)
    """

    def __init__(self, drop_last: bool = False, shuffle: bool = True):
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self._sample_list: torch.Tensor | None = None
        self._pos = 0
        self.len_storage = 0
        self._ran_out = False

    @property
    def ran_out(self) -> bool:
        return self._ran_out

    @ran_out.setter
    def ran_out(self, value: bool) -> None:
        self._ran_out = bool(value)

    def _new_epoch(self) -> None:
        self._sample_list = None
        self._pos = 0

    def _permutation(self, n: int) -> torch.Tensor:
        if self.shuffle:
            return torch.randperm(n, generator=self._rng)
        return torch.arange(n)

    def sample(self, storage, batch_size: int):
        n = len(storage)
        if n == 0:
            raise RuntimeError(_EMPTY)
        if self.drop_last and batch_size > n:
            raise ValueError(
                f"batch_size={batch_size} is larger than the {n} stored items and drop_last=True: "
                "no batch can be drawn"
            )
        remaining = 0 if self._sample_list is None else self._sample_list.numel() - self._pos
        if (
            self._sample_list is None
            or n != self.len_storage
            or remaining == 0
            or (self.drop_last and remaining < batch_size)
        ):
            self._sample_list = self._permutation(n)
            self._pos = 0
            self.len_storage = n
            self._ran_out = False
        index = self._sample_list[self._pos : self._pos + batch_size]
        self._pos += index.numel()
        remaining = self._sample_list.numel() - self._pos
        if remaining == 0 or (self.drop_last and remaining < batch_size):
            self._ran_out = True
        device = _index_device(storage)
        if device.type != "cpu":
            index = index.to(device)
        return index, {}

    def _empty(self) -> None:
        self._new_epoch()
        self.len_storage = 0
        self._ran_out = False

    def state_dict(self) -> dict:
        return {
            "_sample_list": self._sample_list,
            "_pos": self._pos,
            "len_storage": self.len_storage,
            "_ran_out": self._ran_out,
            "drop_last": self.drop_last,
            "shuffle": self.shuffle,
        }

    def _check_state(self, state_dict: dict, storage_len: int) -> None:
        sl, pos, n = state_dict.get("_sample_list"), state_dict["_pos"], state_dict["len_storage"]
        if not _is_count(n) or not _is_count(pos) or not isinstance(state_dict["_ran_out"], bool):
            raise ValueError(f"_pos={pos!r}, len_storage={n!r} or _ran_out is not valid")
        if sl is not None:
            if not isinstance(sl, torch.Tensor) or sl.ndim != 1 or sl.dtype != torch.int64:
                raise ValueError("_sample_list is not a 1-D int64 tensor")
            if pos > sl.numel() or n > storage_len or (sl.numel() and not 0 <= int(sl.min()) <= int(sl.max()) < n):
                raise ValueError(
                    f"_sample_list (of {sl.numel()} indices), _pos={pos} and len_storage={n} do "
                    f"not fit the {storage_len} stored rows"
                )

    def load_state_dict(self, state_dict: dict) -> None:
        sl = state_dict.get("_sample_list")
        self._sample_list = None if sl is None else sl.clone()
        self._pos = int(state_dict["_pos"])
        self.len_storage = int(state_dict["len_storage"])
        self._ran_out = bool(state_dict["_ran_out"])

    def __repr__(self) -> str:
        return f"SamplerWithoutReplacement(drop_last={self.drop_last}, shuffle={self.shuffle})"


class PrioritizedSampler(Sampler):
    r"""Prioritized experience replay (Schaul et al., 2015) over a sum tree and a min tree.

    With ``p_i = (priority_i + eps) ** alpha`` over the ``N`` stored items:

    * ``P(i) = p_i / sum_j p_j``;
    * the weight of a sampled item is ``w_i = (N * P(i)) ** -beta`` divided by the largest
      possible weight, that of the minimum-priority item: ``w_i = (p_i / min_j p_j) ** -beta``
      (the min over items with ``p_j > 0``: an item that cannot be drawn bounds nothing);
    * a new item gets the largest priority set so far (1.0 before any).

    Priorities must be finite and ``>= 0``, with ``p_i`` within the tree's dtype: a NaN, an
    infinity, a negative value or one that overflows is refused with a ValueError naming its
    index, and nothing is written (one NaN would otherwise poison every later sum).

    The trees live on ``device``, else on the storage's device (CPU or CUDA). Asking for a
    CUDA tree without CUDA warns once with the reason and uses the CPU.

    Args:
        max_capacity (int): number of slots; at least the storage's ``max_size``.
        alpha (float): prioritisation exponent, ``>= 0`` (0: uniform).
        beta (float): importance-sampling exponent, ``>= 0``.
        eps (float): added to ``|priority|``, ``>= 0``. Defaults to 1e-8.
        dtype (torch.dtype): float dtype of the trees. Defaults to ``torch.float32``.
        reduction (str): how a per-item priority with several elements is reduced by
            TensorDict buffers: ``"max"``, ``"min"``, ``"mean"`` or ``"median"``.
        max_priority_within_buffer (bool): new items get the max priority among the stored
            items (costs one pass over the tree per write) rather than the max ever set.
        device (torch.device or str, optional): where the trees live.

    Keyword Args:
        compilable (bool): accepted for TorchRL compatibility; the tree is plain tensor ops.

    Examples:
        >>> from reap_replay.storages import LazyTensorStorage
        >>> s = LazyTensorStorage(4)
        >>> s.set(slice(0, 2), torch.zeros(2))
        >>> sampler = PrioritizedSampler(4, alpha=1.0, beta=1.0, eps=0.0)
        >>> sampler.extend(torch.tensor([0, 1]))
        >>> sampler.update_priority(torch.tensor([0, 1]), torch.tensor([1.0, 3.0]))
        >>> index, info = sampler.sample(s, 4)
        >>> {round(w, 3) for w in info["priority_weight"].tolist()} <= {1.0, 0.333}
        True
    """

    _REDUCTIONS = ("max", "min", "mean", "median")

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        reduction: str = "max",
        max_priority_within_buffer: bool = False,
        device=None,
        *,
        compilable: bool = False,
    ):
        if isinstance(max_capacity, bool) or not isinstance(max_capacity, int) or max_capacity <= 0:
            raise ValueError(f"max_capacity must be a positive integer, got max_capacity={max_capacity!r}")
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0, got alpha={alpha}")
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got beta={beta}")
        if eps < 0:
            raise ValueError(f"eps must be >= 0, got eps={eps}")
        if reduction not in self._REDUCTIONS:
            raise ValueError(f"reduction must be one of {self._REDUCTIONS}, got reduction={reduction!r}")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got dtype={dtype}")
        self._max_capacity = max_capacity
        self._alpha = float(alpha)
        self._beta = float(beta)
        self._eps = float(eps)
        self.dtype = dtype
        self.reduction = reduction
        self._max_priority_within_buffer = bool(max_priority_within_buffer)
        self.compilable = compilable
        self._device_requested = device is not None
        self._tree = PriorityTree(max_capacity, device=self._resolve(device), dtype=dtype)
        self._max_priority: torch.Tensor | None = None
        self._set_priority_limit()

    def _set_priority_limit(self) -> None:
        """The largest raw priority whose ``(p + eps) ** alpha`` the tree can hold."""
        top = torch.finfo(torch.float64).max
        if self._alpha > 0:
            try:
                top = min(top, self._tree.max_value ** (1.0 / self._alpha) - self._eps)
            except OverflowError:  # a small alpha: every finite priority fits
                pass
        self._priority_limit = top

    # --------------------------------------------------------------- devices
    @staticmethod
    def _resolve(device) -> torch.device:
        if device is None:
            return torch.device("cpu")
        device = torch.device(device)
        if device.type == "cuda" and not torch.cuda.is_available():
            _warn_once(
                "cuda-tree",
                f"PrioritizedSampler: a CUDA priority tree was requested (device={str(device)!r}) "
                "but CUDA is unavailable (torch.cuda.is_available() is False); the tree runs on "
                "the CPU.",
            )
            return torch.device("cpu")
        return device

    @property
    def device(self) -> torch.device:
        return self._tree.device

    def _follow_storage(self, storage) -> None:
        """Moves the (still empty) tree to the storage's device when none was asked for."""
        if self._device_requested or storage is None:
            return
        device = getattr(storage, "device", None)
        if device is None:
            return
        device = self._resolve(device)
        if device != self._tree.device:
            leaves = self._tree.leaves().to(device)
            self._tree = PriorityTree(self._max_capacity, device=device, dtype=self.dtype)
            self._tree.load_leaves(leaves)
            if self._max_priority is not None:
                self._max_priority = self._scalar(float(self._max_priority))
        self._device_requested = True

    # ------------------------------------------------------------ parameters
    @property
    def alpha(self) -> float:
        return self._alpha

    @property
    def beta(self) -> float:
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        if value < 0:
            raise ValueError(f"beta must be >= 0, got beta={value}")
        self._beta = float(value)

    @property
    def max_size(self) -> int:
        return self._max_capacity

    @property
    def default_priority(self):
        """The raw priority a new item gets: the largest set so far (1.0 before any)."""
        if self._max_priority_within_buffer and self._alpha > 0:
            top = self._tree.leaves().max()
            if bool(top > 0):
                return (top ** (1.0 / self._alpha) - self._eps).clamp_min(0)
        if self._max_priority is None:
            return 1.0
        return self._max_priority

    # ---------------------------------------------------------------- sample
    def sample(self, storage, batch_size: int):
        self._follow_storage(storage)
        n = len(storage)
        if n == 0:
            raise RuntimeError(_EMPTY)
        uniform = torch.rand(batch_size, generator=self._rng, dtype=torch.float64)  # the tree moves it
        index, weight = self._tree.sample_with_weights(uniform, self._beta, self.dtype)
        return index, {"priority_weight": weight}

    # ---------------------------------------------------------------- writes
    def add(self, index) -> None:
        self.mark_update(index)

    def extend(self, index) -> None:
        self.mark_update(index)

    def mark_update(self, index, *, storage=None) -> None:
        self.update_priority(index, self.default_priority, storage=storage)

    def update_priority(self, index, priority, *, storage=None) -> None:
        """Sets the priority of the items at ``index`` (negative indices are skipped).

        ``priority`` is a number or a tensor with one value per index; duplicate indices keep
        the last value. A priority that requires grad is read detached. With ``storage``, an
        index must name a written item (``< len(storage)``), else ``< max_capacity``. Bad
        indices or priorities (NaN, infinite, negative, overflowing the tree's dtype) raise an
        error naming the first offending index, and nothing is written.
        """
        self._follow_storage(storage)
        index, priority = self._tree._as_arrays(index, priority, torch.float64)
        n = index.shape[0]
        if priority.shape[0] not in (1, n):
            raise ValueError(
                f"priority has {priority.shape[0]} elements but index has {n}; "
                "pass one priority per index, or a single number"
            )
        if n == 0:
            return
        low, high = int(index.min()), int(index.max())
        if high >= self._max_capacity:
            raise IndexError(
                f"priority index out of range: max_capacity={self._max_capacity}, got index {high}"
            )
        if storage is not None and high >= len(storage):
            raise IndexError(
                f"priority index {high} names no item: the buffer holds {len(storage)} items "
                f"(indices 0 to {len(storage) - 1}); a priority there would make sample() return "
                "a row never written"
            )
        if low < 0:  # e.g. items a max-value writer did not store
            keep = index >= 0
            index = index[keep]
            priority = priority[keep] if priority.shape[0] > 1 else priority
            if index.shape[0] == 0:
                return
        top = self._check_priority(priority, index)
        self._max_priority = top if self._max_priority is None else self._maximum(self._max_priority, top)
        self._tree._write(index, (priority + self._eps) ** self._alpha, high)  # checked above

    def _check_priority(self, priority, index=None):
        """Raises a ValueError naming the first bad priority's index (its position in the batch
        without ``index``); returns the largest. ``priority``: an array of the tree's kind
        (any tensor or number without ``index``)."""
        if index is None:
            _, priority = self._tree._as_arrays([], priority, torch.float64)
        bad, top = _first_bad(priority, self._priority_limit)  # one min and one max
        if bad is not None:
            value = float(priority[bad])
            if index is None:
                where = f"index {bad} of the batch"
            else:
                where = f"index {int(index[bad if priority.shape[0] > 1 else 0])}"
            why = _why_bad(value, self._priority_limit, f"the {self.dtype} priority tree")
            raise ValueError(
                f"priority {value} at {where} {why}: priorities must be finite and >= 0, "
                f"and (priority + eps) ** alpha at most {self._tree.max_value:.4g}"
                + (" (use dtype=torch.float64 for larger ones)" if "overflows" in why else "")
            )
        return top

    # The tree's kind of arrays (NumPy on the CPU, torch elsewhere): the update above reads the
    # same for both.
    def _maximum(self, a, b):
        return np.maximum(a, b) if self._tree.use_numpy else torch.maximum(a, b)

    def _scalar(self, value: float):
        if self._tree.use_numpy:
            return np.float64(value)
        return torch.tensor(value, device=self.device, dtype=torch.float64)

    # ----------------------------------------------------------------- state
    def _empty(self) -> None:
        self._tree.reset()
        self._max_priority = None

    def state_dict(self) -> dict:
        return {
            "_alpha": self._alpha,
            "_beta": self._beta,
            "_eps": self._eps,
            "_max_priority": None if self._max_priority is None else float(self._max_priority),
            "_leaves": self._tree.leaves().clone(),
        }

    def _check_state(self, state_dict: dict, storage_len: int) -> None:
        for name in ("_alpha", "_beta", "_eps", "_max_priority"):
            value = state_dict[name]
            if value is None and name == "_max_priority":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ValueError(f"{name}={value!r} is not a finite number >= 0")
        leaves = state_dict["_leaves"]
        if not isinstance(leaves, torch.Tensor):
            raise ValueError("_leaves is not a tensor")
        leaves = self._tree._checked_leaves(leaves)
        written = torch.nonzero(leaves[storage_len:])
        if written.numel():
            raise ValueError(
                f"the priority tree holds a priority at slot {storage_len + int(written[0, 0])}, "
                f"past the {storage_len} stored rows: sample() would return a row never written"
            )

    def load_state_dict(self, state_dict: dict) -> None:
        self._alpha = float(state_dict["_alpha"])
        self._beta = float(state_dict["_beta"])
        self._eps = float(state_dict["_eps"])
        mp = state_dict.get("_max_priority")
        self._max_priority = None if mp is None else self._scalar(float(mp))
        self._tree.load_leaves(state_dict["_leaves"])
        self._set_priority_limit()

    def __repr__(self) -> str:
        return (
            f"PrioritizedSampler(max_capacity={self._max_capacity}, alpha={self._alpha}, "
            f"beta={self._beta}, eps={self._eps}, device={self.device})"
        )


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _as_key(key):
    if key is None:
        return None
    return tuple(key) if isinstance(key, (tuple, list)) else key


class SliceSampler(Sampler):
    """Contiguous slices of the stored trajectories, for sequence models.

    A batch of ``batch_size`` items holds ``num_slices`` slices of ``slice_len`` steps (give one
    of the two; the other is ``batch_size`` divided by it). Trajectories are runs of equal
    ``traj_key`` values, or end where ``end_key`` is set (defaults to ``("next", "done")``); the
    newest write and the end of the storage also end a trajectory. A trajectory is drawn
    uniformly, then a start uniformly within it. The last step of each slice is marked in
    ``info[truncated_key]`` (and ``("next", "done")``). Given both keys, as in TorchRL,
    ``traj_key`` is used where the storage holds it and ``end_key`` where it does not.

    Keyword Args:
        num_slices (int, optional): slices per batch.
        slice_len (int, optional): steps per slice.
        end_key (NestedKey, optional): flag marking the last step of a trajectory.
        traj_key (NestedKey, optional): trajectory id per step.
        truncated_key (NestedKey): where slice ends are reported.
        strict_length (bool): skip trajectories shorter than ``slice_len`` (if ``False``, they
            give shorter slices and the batch has fewer than ``batch_size`` items).
        cache_values (bool): accepted for TorchRL compatibility.

    Examples:
        >>> from tensordict import TensorDict
        >>> from reap_replay.storages import LazyTensorStorage
        >>> s = LazyTensorStorage(10)
        >>> s.set(slice(0, 6), TensorDict({"traj": torch.tensor([0, 0, 0, 1, 1, 1])}, [6]))
        >>> index, info = SliceSampler(slice_len=3, traj_key="traj").sample(s, 6)
        >>> sorted(index.view(2, 3)[:, 0].tolist()) in ([0, 0], [0, 3], [3, 3])
        True
    """

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key=None,
        traj_key=None,
        truncated_key=("next", "truncated"),
        strict_length: bool = True,
        cache_values: bool = False,
        **unsupported,
    ):
        if unsupported:
            raise NotImplementedError(
                f"SliceSampler options not supported by reap-replay: {sorted(unsupported)}"
            )
        if (num_slices is None) == (slice_len is None):
            raise TypeError(
                "give exactly one of num_slices and slice_len, got "
                f"num_slices={num_slices} and slice_len={slice_len}"
            )
        for name, value in (("num_slices", num_slices), ("slice_len", slice_len)):
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")
        self.num_slices = num_slices
        self.slice_len = slice_len
        if end_key is None and traj_key is None:
            end_key = ("next", "done")
        self.traj_key = _as_key(traj_key)
        self.end_key = _as_key(end_key)
        self.truncated_key = _as_key(truncated_key)
        self.strict_length = bool(strict_length)

    def _shape(self, batch_size: int) -> tuple[int, int]:
        if self.slice_len is not None:
            if batch_size % self.slice_len:
                raise ValueError(
                    f"batch_size must be divisible by slice_len, got batch_size={batch_size} "
                    f"and slice_len={self.slice_len}"
                )
            return batch_size // self.slice_len, self.slice_len
        if batch_size % self.num_slices:
            raise ValueError(
                f"batch_size must be divisible by num_slices, got batch_size={batch_size} "
                f"and num_slices={self.num_slices}"
            )
        return self.num_slices, batch_size // self.num_slices

    def _leaf(self, storage, key):
        get = getattr(storage, "get_leaf", None)
        return get(key) if key is not None and get is not None and storage.initialized else None

    def _trajectories(self, storage):
        n = len(storage)
        traj = self._leaf(storage, self.traj_key)
        if traj is not None:
            traj = traj[:n].reshape(n, -1)[:, 0]
            end = torch.empty(n, dtype=torch.bool, device=traj.device)
            torch.ne(traj[1:], traj[:-1], out=end[:-1])
        else:
            done = self._leaf(storage, self.end_key)
            if done is None:
                keys = [f"{name}={key!r}" for name, key in (("traj_key", self.traj_key),
                                                            ("end_key", self.end_key)) if key is not None]
                raise KeyError(f"SliceSampler needs the entry of {' or '.join(keys)} in a TensorDict "
                               "storage; it is missing")
            end = done[:n].reshape(n, -1).any(1)
        end = end.cpu().clone()
        end[n - 1] = True
        last = storage._last_cursor
        if last is not None and 0 < last <= n:
            end[last - 1] = True
        stops = torch.nonzero(end).squeeze(1)
        starts = torch.cat([stops.new_zeros(1), stops[:-1] + 1])
        return starts, stops - starts + 1

    def sample(self, storage, batch_size: int):
        n = len(storage)
        if n == 0:
            raise RuntimeError(_EMPTY)
        num_slices, slice_len = self._shape(batch_size)
        starts, lengths = self._trajectories(storage)
        if self.strict_length:
            ok = lengths >= slice_len
            if not bool(ok.any()):
                raise RuntimeError(
                    f"no stored trajectory has slice_len={slice_len} steps (lengths range "
                    f"{int(lengths.min())}-{int(lengths.max())}); lower slice_len or pass "
                    "strict_length=False"
                )
            starts, lengths = starts[ok], lengths[ok]
        pick = torch.randint(starts.numel(), (num_slices,), generator=self._rng)
        start, length = starts[pick], lengths[pick]
        span = length.clamp_max(slice_len)
        offset = (torch.rand(num_slices, generator=self._rng) * (length - span + 1)).long()
        first = start + offset
        if bool((span == slice_len).all()):
            steps = torch.arange(slice_len)
            index = (first.unsqueeze(1) + steps).reshape(-1)
            last_step = (steps == slice_len - 1).repeat(num_slices)
        else:
            total = int(span.sum())
            slice_of = torch.repeat_interleave(torch.arange(num_slices), span)
            begin = torch.cumsum(span, 0) - span
            step = torch.arange(total) - begin[slice_of]
            index = first[slice_of] + step
            last_step = step == span[slice_of] - 1
        info = self._flags(storage, index, last_step)
        device = _index_device(storage)
        if device.type != "cpu":
            index = index.to(device)
        return index, info

    def _info_index(self, index):
        """TorchRL's layout: one index tensor per storage dimension, ``(index,)``; a
        ``TensorDictReplayBuffer`` stacks it into ``"index"`` of shape ``[batch, 1]``."""
        return (index,)

    def _flags(self, storage, index, last_step) -> dict:
        done_buf = storage.get_leaf(("next", "done"))
        tail = tuple(done_buf.shape[1:]) if done_buf is not None else (1,)
        truncated = last_step.view(-1, *([1] * len(tail))).expand(-1, *tail).clone()
        info = {self.truncated_key: truncated.to(_index_device(storage))}
        if done_buf is not None:
            info[("next", "done")] = done_buf.index_select(0, index.to(done_buf.device)) | info[
                self.truncated_key
            ].to(done_buf.device)
            term = storage.get_leaf(("next", "terminated"))
            info[("next", "terminated")] = (
                term.index_select(0, index.to(term.device))
                if term is not None
                else torch.zeros_like(info[("next", "done")])
            )
        return info

    def __repr__(self) -> str:
        return (
            f"SliceSampler(num_slices={self.num_slices}, slice_len={self.slice_len}, "
            f"traj_key={self.traj_key}, end_key={self.end_key}, strict_length={self.strict_length})"
        )


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
