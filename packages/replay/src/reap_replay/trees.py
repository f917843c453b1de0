"""Sum and min trees over priorities, as flat torch tensors on one device.

The tree is a segment tree of two levels under the root, which on a CPU or a GPU beats a binary
tree: every operation is a handful of vectorised ops whatever the batch, and there is no Python
loop over items or over the ``log2(capacity)`` levels of a binary tree.

* leaves: one value per slot, ``capacity`` rounded up to a power of two;
* leaves hold the values in ``dtype``; block sums, block mins and every prefix sum are float64
  (prefix sums over a million float32 priorities would otherwise be off by several ulps of a
  single priority);
* blocks: the sum and the min (over positive leaves) of each run of ``block_size`` leaves;
* root: the sum and the min of the blocks, reduced on demand and kept until the next write.

Sampling by prefix sum descends one level per search: in the cumulative sums of the blocks,
then, batched, in the cumulative sums of each chosen block's leaves. An update writes the leaves
(duplicate indices: the last write wins, deterministically, on CPU and CUDA alike) and recomputes
the touched blocks from their leaves, so no rounding error accumulates.

On the CPU the index work (gathers, scatters, searches, comparisons) runs on NumPy views of the
same tensors. A batch is some twenty such small ops, and a NumPy call costs a fraction of a torch
op's dispatch, so this is most of the time saved. The state stays in the torch tensors, so
devices, ``state_dict`` and checkpoints do not change. Every sum adds left to right on both
paths, so the two agree to the bit; only the running sums inside the sampled blocks stay a torch
op (NumPy has no fast running sum along a short axis).

On CUDA the tree runs Triton kernels (:mod:`reap_replay.tree_kernels`): a sampled batch is one
launch and no host sync, an update three launches and one sync (its input checks). Without
Triton it runs every step as a torch op, saying so once. ``backend=`` picks a path by name
(``"numpy"``, ``"torch"``, ``"triton"``); ``use_numpy=False`` is ``backend="torch"``.

Examples:
    >>> import torch
    >>> tree = PriorityTree(8)
    >>> tree.update(torch.tensor([0, 1, 2]), torch.tensor([1.0, 2.0, 5.0]))
    >>> float(tree.total()), float(tree.min())
    (8.0, 1.0)
    >>> tree.find_prefixsum(torch.tensor([0.5, 1.5, 7.9])).tolist()
    [0, 1, 2]
"""

from __future__ import annotations

import numpy as np
import torch

from reap_replay._warn import _warn_once

__all__ = ["PriorityTree"]

_NOTHING_TO_SAMPLE = "every value in the PriorityTree is zero: there is nothing to sample"

_NUMPY_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}

BACKENDS = ("numpy", "torch", "triton")


def _next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def _default_block_size(capacity: int) -> int:
    # sqrt-ish split, capped: 64 leaves per block measured fastest at 1M slots on CPU.
    return max(1, min(64, capacity >> 8))


def _block_sums(rows):
    """The float64 sum of each row of ``rows`` (a tensor), added left to right.

    The order is fixed so both paths agree to the bit: it is the last running sum of the row,
    and what the NumPy path's column reduction in :func:`_block_stats_numpy` computes.
    """
    return rows.cumsum(1, dtype=torch.float64)[:, -1]


def _block_stats_numpy(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sums, positive mins)`` of each row of ``rows``, as :func:`_block_sums` and the torch
    path's min over positive entries (``inf`` where none).

    Both reduce the transposed rows along axis 0, which NumPy vectorises across the rows (it
    would not along a short axis 1) and adds in order. Rows without zeros (the usual case:
    priorities get ``eps`` added) take a plain min.
    """
    cols = np.ascontiguousarray(rows.T)
    sums = np.add.reduce(cols, axis=0, dtype=np.float64)
    low = np.minimum.reduce(cols, axis=0)
    if not low.min() > 0:
        low = np.minimum.reduce(np.where(cols > 0, cols, np.inf), axis=0)
    return sums, low


def _first_bad(values, limit: float):
    """``(bad, high)``: the position of the first of ``values`` (a flat NumPy array or tensor)
    that is NaN, negative or above ``limit`` (``None`` when every value is fine), and the max.

    The fast path is one min and one max (NaN fails both comparisons); only a batch with a bad
    value pays for the search. On CUDA the verdict costs one host sync.
    """
    if isinstance(values, np.ndarray):
        high = values.max()
        if values.min() >= 0 and high <= limit:
            return None, high
        ok = (values >= 0) & (values <= limit)
        return int(np.flatnonzero(~ok)[0]), high
    low, high = torch.aminmax(values)
    if bool((low >= 0) & (high <= limit)):
        return None, high
    ok = (values >= 0) & (values <= limit)
    return int(torch.nonzero(~ok)[0, 0]), high


def _why_bad(value: float, limit: float, what: str) -> str:
    """Why ``value`` is refused by :func:`_first_bad`, in words."""
    if value != value:
        return "is NaN"
    if value in (float("inf"), float("-inf")):
        return "is infinite"
    if value < 0:
        return "is negative"
    return f"overflows {what} (at most {limit:.4g})"


def _triton_unavailable(device: torch.device) -> str | None:
    """Why the Triton kernels cannot run on ``device`` (``None`` when they can)."""
    import os

    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        return "Triton kernels run on the CPU only under TRITON_INTERPRET=1 (tests)"
    if device.type not in ("cpu", "cuda"):
        return f"Triton kernels run on CUDA devices, not {device.type}"
    try:
        import reap_replay.tree_kernels  # noqa: F401
    except ImportError as err:
        return f"Triton is not importable ({err}); install it with `uv pip install triton`"
    return None


def _as_numpy(x, dtype=None) -> np.ndarray:
    """``x`` (tensor, array, number or list) as a flat NumPy array (of ``dtype`` if given)."""
    if isinstance(x, torch.Tensor):
        try:
            x = x.numpy()  # a plain CPU tensor: a view, without force's extra ops
        except (RuntimeError, TypeError):  # requires grad, lives off the CPU, conj/neg bits
            x = x.numpy(force=True)
    return np.asarray(x, dtype=dtype).reshape(-1)


class PriorityTree:
    """Sum tree and min tree over ``capacity`` non-negative values.

    Args:
        capacity (int): number of slots (rounded up to a power of two inside).

    Keyword Args:
        device (torch.device or str): where the tree lives. Defaults to ``"cpu"``.
        dtype (torch.dtype): float dtype of the leaves (sums are float64). Defaults to
            ``torch.float32``.
        block_size (int, optional): leaves per block, a power of two. Defaults to a size
            chosen from the capacity.
        use_numpy (bool, optional): run the index work through NumPy views. Defaults to
            ``True`` for float32 or float64 leaves on the CPU; asking for it elsewhere warns
            once and uses torch ops.
        backend (str, optional): ``"numpy"`` (CPU), ``"torch"`` (any device) or ``"triton"``
            (CUDA; on the CPU only under ``TRITON_INTERPRET=1``). Defaults to NumPy on the
            CPU and Triton on CUDA. A backend that cannot run there warns once and uses torch
            ops.

    Unwritten slots count as 0 in the sum; the min is over the positive values (a zero value can
    never be sampled, so it does not bound the importance weights).

    Examples:
        >>> import torch
        >>> tree = PriorityTree(4, dtype=torch.float64)
        >>> tree.update(torch.tensor([3, 3]), torch.tensor([1.0, 4.0]))  # last write wins
        >>> tree[torch.tensor([3])].tolist(), float(tree.total())
        ([4.0], 4.0)
    """

    def __init__(
        self, capacity: int, *, device="cpu", dtype=torch.float32, block_size=None, use_numpy=None, backend=None
    ):
        if int(capacity) <= 0:
            raise ValueError(f"capacity must be a positive integer, got capacity={capacity}")
        if not dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating point dtype, got dtype={dtype}")
        self.capacity = int(capacity)
        self.device = torch.device(device)
        self.dtype = dtype
        size = _next_pow2(self.capacity)
        bs = _default_block_size(size) if block_size is None else int(block_size)
        if bs <= 0 or bs & (bs - 1) or bs > size:
            raise ValueError(
                f"block_size must be a power of two between 1 and {size}, got block_size={block_size}"
            )
        self.size = size
        self.block_size = bs
        self._shift = bs.bit_length() - 1
        self.num_blocks = size // bs
        # The largest value a leaf may hold: what the dtype holds, and small enough that the
        # float64 sum of every leaf stays finite.
        self.max_value = min(torch.finfo(dtype).max, torch.finfo(torch.float64).max / size)
        self.backend = self._resolve_backend(use_numpy, backend)
        self.use_numpy = self.backend == "numpy"
        self._write_calls = 0  # the Triton writes' stamps count calls (tree_kernels)
        self.reset()

    def _resolve_backend(self, use_numpy, backend) -> str:
        if use_numpy is not None and not isinstance(use_numpy, bool):
            raise ValueError(f"use_numpy must be True, False or None (choose), got use_numpy={use_numpy!r}")
        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS} or None (choose), got backend={backend!r}")
        if backend is None and use_numpy is not None:
            backend = "numpy" if use_numpy else "torch"
        asked = f"backend={backend!r}" if use_numpy is None else f"use_numpy={use_numpy}"
        if backend in (None, "numpy"):
            why = None
            if self.device.type != "cpu":
                why = f"the tree lives on {self.device}, which NumPy cannot reach"
            elif self.dtype not in _NUMPY_DTYPES:
                why = f"NumPy views of {self.dtype} leaves are not supported (float32, float64 are)"
            if why is None:
                return "numpy"
            if backend == "numpy":
                _warn_once(f"tree-numpy-{why}", f"PriorityTree({asked}): {why}; it runs on torch ops.")
                return "torch"
            if self.device.type != "cuda":
                return "torch"
        if backend in (None, "triton"):
            why = _triton_unavailable(self.device)
            if why is None:
                return "triton"
            if backend == "triton" or self.device.type == "cuda":
                _warn_once(f"tree-triton-{why}", f"PriorityTree({asked}) on {self.device}: {why}; it runs on torch ops.")
        return "torch"

    def reset(self) -> None:
        """Sets every slot back to unwritten."""
        kw64 = {"device": self.device, "dtype": torch.float64}
        self._leaves = torch.zeros(self.size, device=self.device, dtype=self.dtype)
        self._sum_blocks = torch.zeros(self.num_blocks, **kw64)
        self._min_blocks = torch.full((self.num_blocks,), float("inf"), **kw64)
        self._inf = torch.tensor(float("inf"), device=self.device, dtype=self.dtype)
        self._zero = torch.zeros((), **kw64)
        self._prefix = torch.zeros(self.num_blocks + 1, **kw64)
        self._prefix_views = (0, None, None)  # (live blocks, block sums, prefix[1:]) for _refresh
        self._scratch = torch.zeros(self.size, device=self.device, dtype=torch.int32)
        if self.backend == "triton":  # the last position that wrote each slot, stamped by call
            self._stamps = torch.zeros(self.size, device=self.device, dtype=torch.int64)
        self._stale = True  # the prefix sums and the root min need recomputing
        self._root_min = None
        # Blocks past the last one written hold zeros: the NumPy path leaves them out of the
        # prefix sums (the torch path keeps them, as tracking this would cost a CUDA sync).
        self._live_blocks = 1 if self.use_numpy else self.num_blocks
        self._make_views()

    def _make_views(self) -> None:
        if self.use_numpy:  # views of the tensors above: the same memory
            self._leaves_np = self._leaves.numpy()
            self._rows_np = self._leaves_np.reshape(-1, self.block_size)
            self._sum_np = self._sum_blocks.numpy()
            self._min_np = self._min_blocks.numpy()
            self._prefix_np = self._prefix.numpy()
            self._scratch_np = self._scratch.numpy()

    def __getstate__(self) -> dict:
        # The NumPy views are of this process's memory: a copy makes its own (__setstate__).
        views = ("_leaves_np", "_rows_np", "_sum_np", "_min_np", "_prefix_np", "_scratch_np")
        state = {k: v for k, v in self.__dict__.items() if k not in views}
        state.update(_prefix_views=(0, None, None), _stale=True, _root_min=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._make_views()

    # ---------------------------------------------------------------- writes
    def update(self, index, value) -> None:
        """Writes ``value`` at ``index`` (1-D, or a scalar value to broadcast).

        ``index`` must lie in ``[0, size)``; a value that is NaN, negative or above
        :attr:`max_value` is refused (ValueError naming its index) and nothing is written.
        """
        index, value = self._as_arrays(index, value, torch.float64)
        n = index.shape[0]
        if value.shape[0] != n and value.shape[0] != 1:
            raise ValueError(
                f"value has {value.shape[0]} elements but index has {n}; "
                "they must match (or value must be a scalar)."
            )
        if n == 0:
            return
        if self.backend == "triton":
            self._stale = True
            bad_index, bad_value = self._kernels().write_leaves(
                self, index, value, index_limit=self.size, value_limit=self.max_value)
            if bad_index is None and bad_value is None:
                return
            if bad_index is not None:
                low, high = int(index.min()), int(index.max())
                raise IndexError(f"PriorityTree index out of range [0, {self.size}): got {low}..{high}")
            value = value.cpu()
            bad, _ = _first_bad(value, self.max_value)  # the batch's first bad value, as elsewhere
            i = int(index[bad if value.shape[0] > 1 else 0])
            why = _why_bad(float(value[bad]), self.max_value, f"the tree's {self.dtype}")
            raise ValueError(f"PriorityTree value {float(value[bad])} at index {i} {why}: values must be finite and >= 0")
        if self.use_numpy:
            low, high = int(index.min()), int(index.max())
            if low < 0 or high >= self.size:  # NumPy would wrap a negative index around silently
                raise IndexError(f"PriorityTree index out of range [0, {self.size}): got {low}..{high}")
        else:
            high = None  # reading it back would sync with the device
        bad, _ = _first_bad(value, self.max_value)
        if bad is not None:
            i = int(index[bad if value.shape[0] > 1 else 0])
            v = float(value[bad])
            why = _why_bad(v, self.max_value, f"the tree's {self.dtype}")
            raise ValueError(f"PriorityTree value {v} at index {i} {why}: values must be finite and >= 0")
        self._write(index, value, high)

    def _as_arrays(self, index, value, value_dtype: torch.dtype | None = None):
        """``index`` (int64) and ``value`` (``value_dtype``, default the tree's) as flat arrays
        of the tree's kind: NumPy on its CPU path, torch tensors on its device otherwise."""
        value_dtype = value_dtype or self.dtype
        if self.use_numpy:
            return _as_numpy(index, np.int64), _as_numpy(value, _NUMPY_DTYPES[value_dtype])
        index = torch.as_tensor(index, device=self.device, dtype=torch.long).reshape(-1)
        value = torch.as_tensor(value, device=self.device).detach().reshape(-1)
        return index, value.to(value_dtype)

    def _write(self, index, value, high: int | None) -> None:
        """:meth:`update` for checked, non-empty arrays of the tree's kind (``high``: max index).

        :class:`PrioritizedSampler` calls it directly, having checked the indices itself.
        """
        self._stale = True
        if self.use_numpy:
            self._update_numpy(index, value, high)
        elif self.backend == "triton":
            self._kernels().write_leaves(self, index, value, index_limit=self.size, value_limit=float("inf"))
        else:
            self._update_torch(index, value.to(self.dtype).expand(index.shape[0]))

    def _update_torch(self, index: torch.Tensor, value: torch.Tensor) -> None:
        if index.numel() > 1:
            value = self._last_write_values(index, value)
        self._leaves.index_copy_(0, index, value)
        # Recompute the touched blocks from their leaves (one gather serves the sum and the
        # min); duplicate block ids write identical values, so the order does not matter.
        block = index >> self._shift
        rows = self._leaves.view(-1, self.block_size).index_select(0, block)
        self._sum_blocks.index_copy_(0, block, _block_sums(rows))
        self._min_blocks.index_copy_(0, block, torch.where(rows > 0, rows, self._inf).amin(1).double())

    def _last_write_values(self, index: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """Gives every repeated index the value of its last occurrence (no sort, no Python loop).

        Each position learns the largest position sharing its index (a ``scatter_reduce`` amax
        into a scratch buffer), then takes that position's value: duplicates then all write the
        same value, so the result does not depend on the order writes land in.
        """
        n = index.numel()
        position = torch.arange(n, device=self.device, dtype=torch.int32)
        self._scratch.scatter_reduce_(0, index, position, reduce="amax", include_self=False)
        return value.index_select(0, self._scratch.index_select(0, index))

    def _update_numpy(self, index: np.ndarray, value: np.ndarray, high: int) -> None:
        """:meth:`_update_torch` on NumPy views."""
        self._live_blocks = max(self._live_blocks, (high >> self._shift) + 1)
        if index.shape[0] > 1:
            # Last write wins as in _last_write_values. Each slot records a position that wrote
            # it; if every position reads back its own, no index repeats. Otherwise which one
            # landed is unspecified in NumPy, and ufunc.at (ordered, slower) takes the largest.
            scratch = self._scratch_np
            position = np.arange(index.shape[0], dtype=np.int32)
            scratch[index] = position
            if not (scratch[index] == position).all():
                np.maximum.at(scratch, index, position)
                value = value[scratch[index]] if value.shape[0] > 1 else value
        self._leaves_np[index] = value
        block = index >> self._shift
        self._sum_np[block], self._min_np[block] = _block_stats_numpy(self._rows_np.take(block, axis=0))

    def load_leaves(self, values: torch.Tensor) -> None:
        """Replaces every leaf at once and rebuilds the blocks.

        Values that are NaN, negative or above :attr:`max_value` are refused (ValueError) and
        nothing changes.
        """
        self._leaves.copy_(self._checked_leaves(values))
        rows = self._leaves.view(-1, self.block_size)
        if self.backend == "triton":  # the blocks' sums in the order every write keeps
            self._kernels().rebuild_all_blocks(self)
        else:
            self._sum_blocks.copy_(_block_sums(rows))
            self._min_blocks.copy_(torch.where(rows > 0, rows, self._inf).amin(1))
        if self.use_numpy:
            written = np.flatnonzero(self._sum_np)
            self._live_blocks = int(written[-1]) + 1 if written.size else 1
        self._stale = True

    def _checked_leaves(self, values) -> torch.Tensor:
        """``values`` as this tree's leaves, or a ValueError (count, dtype, a bad value)."""
        values = torch.as_tensor(values, device=self.device).reshape(-1)
        if values.numel() != self.size:
            raise ValueError(f"expected {self.size} leaves, got {values.numel()}")
        if not values.is_floating_point():
            raise ValueError(f"leaves must be floating point values, got {values.dtype}")
        bad, _ = _first_bad(values.double(), self.max_value)
        if bad is not None:
            v = float(values[bad])
            why = _why_bad(v, self.max_value, f"the tree's {self.dtype}")
            raise ValueError(f"leaf {bad} holds {v}, which {why}")
        return values

    # ----------------------------------------------------------------- reads
    def __getitem__(self, index) -> torch.Tensor:
        index = torch.as_tensor(index, device=self.device, dtype=torch.long)
        return self._leaves[index]

    def leaves(self) -> torch.Tensor:
        """The leaf values (a view; unwritten slots hold 0)."""
        return self._leaves

    def total(self) -> torch.Tensor:
        """Sum of every value (a float64 0-d tensor, no host sync)."""
        return self._sum_blocks.sum()

    def min(self) -> torch.Tensor:
        """Min of the positive values (``inf`` when there is none)."""
        return torch.as_tensor(self._refresh()[1], device=self.device)

    def _refresh(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(prefix, root min)``, recomputed only after a write.

        ``prefix = [0, cumsum(block sums)...]``: ``prefix[b]`` is the mass before block b.
        """
        if self._stale:
            live = self._live_blocks
            if self._prefix_views[0] != live:  # slicing costs as much as a short running sum
                self._prefix_views = (live, self._sum_blocks[:live], self._prefix[1 : live + 1])
            _, sums, prefix_tail = self._prefix_views
            # torch's running sum even on the NumPy path: NumPy's costs 4x more per block
            torch.cumsum(sums, 0, out=prefix_tail)
            mins = self._min_np[:live] if self.use_numpy else self._min_blocks[:live]
            self._root_min = mins.min()  # a NumPy float on the NumPy path
            self._stale = False
        return self._prefix, self._root_min

    def find_prefixsum(self, mass) -> torch.Tensor:
        """For each ``m`` in ``mass``, the slot ``i`` with ``sum(v[:i]) <= m < sum(v[:i+1])``.

        Masses at or past the total land on the last positive slot. The slot found always holds
        a positive value (when any does).
        """
        prefix, _ = self._refresh()
        if self.use_numpy:
            total = self._prefix_np[self._live_blocks]
            mass = np.minimum(_as_numpy(mass, np.float64), np.nextafter(total, 0))
            return torch.from_numpy(self._descend_numpy(mass))
        mass = torch.as_tensor(mass, device=self.device, dtype=torch.float64).reshape(-1)
        mass = torch.minimum(mass, torch.nextafter(prefix[-1], self._zero))
        return self._descend_torch(prefix, mass)

    def sample(self, uniform: torch.Tensor) -> torch.Tensor:
        """Slots drawn with probability ``v[i] / total()``, from ``uniform`` draws in ``[0, 1)``.

        ``uniform`` should be float64 (float32 draws are converted).
        """
        index = self._draw(uniform, self._refresh()[0])
        return torch.from_numpy(index) if self.use_numpy else index

    def sample_with_weights(self, uniform: torch.Tensor, beta: float, dtype=torch.float32):
        """:meth:`sample`, with the importance weight ``(v[i] / min()) ** -beta`` of each slot.

        Returns ``(index, weight)``, the weights in ``dtype``.
        """
        prefix, root_min = self._refresh()
        if self.backend == "triton":
            if self.device.type == "cpu" and not prefix[-1] > 0:
                raise ValueError(_NOTHING_TO_SAMPLE)
            uniform = uniform.to(device=self.device, dtype=torch.float64).reshape(-1)
            return self._kernels().sample_slots(self, uniform, prefix, root_min, beta, dtype)
        index = self._draw(uniform, prefix)
        if not self.use_numpy:
            p = self._leaves.index_select(0, index).double()
            return index, (p / root_min).pow_(-beta).to(dtype)
        p = self._leaves_np[index].astype(np.float64)
        weight = (p / root_min) ** -beta
        if dtype in _NUMPY_DTYPES:
            return torch.from_numpy(index), torch.from_numpy(weight.astype(_NUMPY_DTYPES[dtype]))
        return torch.from_numpy(index), torch.from_numpy(weight).to(dtype)

    def _draw(self, uniform, prefix: torch.Tensor):
        """The slots of :meth:`sample`, as an array of the tree's kind (see :meth:`_as_arrays`)."""
        if self.use_numpy:
            return self._descend_numpy(self._masses_numpy(uniform))
        if self.device.type == "cpu" and not prefix[-1] > 0:  # a free check off CUDA
            raise ValueError(_NOTHING_TO_SAMPLE)
        if self.backend == "triton":
            uniform = uniform.to(device=self.device, dtype=torch.float64).reshape(-1)
            return self._kernels().sample_slots(self, uniform, prefix, None, None, None)[0]
        mass = uniform.to(device=self.device, dtype=torch.float64).reshape(-1) * prefix[-1]
        return self._descend_torch(prefix, mass)

    def _masses_numpy(self, uniform) -> np.ndarray:
        total = self._prefix_np[self._live_blocks]
        if not total > 0:
            raise ValueError(_NOTHING_TO_SAMPLE)
        return _as_numpy(uniform, np.float64) * total

    def _descend_torch(self, prefix: torch.Tensor, mass: torch.Tensor) -> torch.Tensor:
        """Two searchsorted ops: the block, then the slot in it. No host sync.

        ``mass < total`` picks a block with a positive sum; the mass left inside it is kept
        strictly below the block's leaf sum, so the slot found has a positive value:
        ``row_cs[j] > m >= row_cs[j - 1]``.
        """
        block = torch.searchsorted(prefix[1:], mass, right=True).clamp_max_(self.num_blocks - 1)
        rest = mass - prefix.index_select(0, block)
        row_cs = self._leaves.view(-1, self.block_size).index_select(0, block)
        row_cs = row_cs.double().cumsum(1)
        rest = torch.minimum(rest, torch.nextafter(row_cs[:, -1], self._zero))
        inner = torch.searchsorted(row_cs, rest.unsqueeze(1), right=True).squeeze(1)
        return (block << self._shift) + inner

    def _descend_numpy(self, mass: np.ndarray) -> np.ndarray:
        """:meth:`_descend_torch` on NumPy views; the row scan uses the same torch kernel.

        The slot is the first ``j`` with ``row_cs[j] > rest`` (an ``argmax`` over the row; a
        batched ``searchsorted`` is not in NumPy, and torch's costs more here).
        """
        live = self._live_blocks
        prefix = self._prefix_np
        block = np.searchsorted(prefix[1 : live + 1], mass, side="right")
        np.minimum(block, live - 1, out=block)
        rest = mass - prefix[block]
        rows = self._rows_np.take(block, axis=0).astype(np.float64)  # casting in cumsum is slower
        row_cs = torch.from_numpy(rows).cumsum(1).numpy()
        rest = np.minimum(rest, np.nextafter(row_cs[:, -1], 0.0))
        inner = np.argmax(row_cs > rest[:, None], axis=1)
        return (block << self._shift) + inner

    @staticmethod
    def _kernels():
        from reap_replay import tree_kernels  # imports triton: only trees that run it pay for it

        return tree_kernels

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(capacity={self.capacity}, block_size={self.block_size}, "
            f"device={self.device}, dtype={self.dtype}, backend={self.backend!r})"
        )
