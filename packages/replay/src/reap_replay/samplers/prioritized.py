""":class:`PrioritizedSampler`: prioritized experience replay over a sum tree and a min tree."""

from __future__ import annotations

import numpy as np
import torch

from reap_replay._warn import _warn_once
from reap_replay.samplers.base import _EMPTY, Sampler, _on_device
from reap_replay.storages.base import _spawning
from reap_replay.trees import PriorityTree, _first_bad, _why_bad


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
        # the sampler's CPU generator: the same draws on every device
        uniform = _on_device(torch.rand(batch_size, generator=self._rng, dtype=torch.float64), self.device)
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
        if self._tree.backend == "triton" and self._write_on_device(index, priority, storage):
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

    def _write_on_device(self, index: torch.Tensor, priority: torch.Tensor, storage) -> bool:
        """The update in the tree's Triton kernels: checks, transform, max and write on the
        device, one host sync. False if an index or a priority is bad: nothing was written, and
        the checks below say which, in the same words as on the CPU."""
        limit = self._max_capacity if storage is None else min(self._max_capacity, len(storage))
        fresh = self._max_priority is None
        if fresh:
            self._max_priority = torch.zeros((), dtype=torch.float64, device=self.device)
        bad_index, bad_priority = self._tree._kernels().write_leaves(
            self._tree, index, priority, index_limit=limit, value_limit=self._priority_limit,
            eps=self._eps, alpha=self._alpha, transform=True, skip_negative=True,
            max_bits=self._max_priority.view(torch.int64))
        self._tree._stale = True
        if bad_index is None and bad_priority is None:
            return True
        if fresh:
            self._max_priority = None
        return False

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

    def __getstate__(self) -> dict:
        if _spawning():
            raise RuntimeError(
                "PrioritizedSampler cannot be shared between processes: its priority tree lives "
                "in this process. Keep the buffer in one process, or use "
                "reap_ray.RayReplayBuffer to reach it from others"
            )
        return self.__dict__

    def __repr__(self) -> str:
        return (
            f"PrioritizedSampler(max_capacity={self._max_capacity}, alpha={self._alpha}, "
            f"beta={self._beta}, eps={self._eps}, device={self.device})"
        )
