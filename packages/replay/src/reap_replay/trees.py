"""Sum and min trees over priorities, as flat torch tensors on one device.

The tree is a segment tree of two levels under the root, which on a CPU or a GPU beats a binary
tree: every operation is a handful of vectorised torch ops whatever the batch, and there is no
Python loop over items or over the ``log2(capacity)`` levels of a binary tree.

* leaves: one value per slot, ``capacity`` rounded up to a power of two;
* leaves hold the values in ``dtype``; block sums, block mins and every prefix sum are float64
  (prefix sums over a million float32 priorities would otherwise be off by several ulps of a
  single priority);
* blocks: the sum and the min (over positive leaves) of each run of ``block_size`` leaves;
* root: the sum and the min of the blocks, reduced on demand.

Sampling by prefix sum descends one level per op: ``searchsorted`` in the cumulative sums of the
blocks, then a batched ``searchsorted`` in the cumulative sums of each chosen block's leaves.
An update writes the leaves (duplicate indices: the last write wins, deterministically, on CPU
and CUDA alike) and recomputes the touched blocks from their leaves, so no rounding error
accumulates.

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

import torch

__all__ = ["PriorityTree"]


def _next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def _default_block_size(capacity: int) -> int:
    # sqrt-ish split, capped: 64 leaves per block measured fastest at 1M slots on CPU.
    return max(1, min(64, capacity >> 8))


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

    Unwritten slots count as 0 in the sum; the min is over the positive values (a zero value can
    never be sampled, so it does not bound the importance weights).

    Examples:
        >>> import torch
        >>> tree = PriorityTree(4, dtype=torch.float64)
        >>> tree.update(torch.tensor([3, 3]), torch.tensor([1.0, 4.0]))  # last write wins
        >>> tree[torch.tensor([3])].tolist(), float(tree.total())
        ([4.0], 4.0)
    """

    def __init__(self, capacity: int, *, device="cpu", dtype=torch.float32, block_size=None):
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
        self.reset()

    def reset(self) -> None:
        """Sets every slot back to unwritten."""
        kw64 = {"device": self.device, "dtype": torch.float64}
        self._leaves = torch.zeros(self.size, device=self.device, dtype=self.dtype)
        self._sum_blocks = torch.zeros(self.num_blocks, **kw64)
        self._min_blocks = torch.full((self.num_blocks,), float("inf"), **kw64)
        self._inf = torch.tensor(float("inf"), device=self.device, dtype=self.dtype)
        self._zero = torch.zeros((), **kw64)
        self._prefix = torch.zeros(self.num_blocks + 1, **kw64)
        self._scratch = torch.zeros(self.size, device=self.device, dtype=torch.int32)

    # ---------------------------------------------------------------- writes
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

    def update(self, index: torch.Tensor, value: torch.Tensor) -> None:
        """Writes ``value`` at ``index`` (1-D tensors, or a scalar value to broadcast)."""
        index = torch.as_tensor(index, device=self.device, dtype=torch.long).reshape(-1)
        value = torch.as_tensor(value, device=self.device, dtype=self.dtype).reshape(-1)
        if value.numel() == 1 and index.numel() != 1:
            value = value.expand(index.numel())
        elif value.numel() != index.numel():
            raise ValueError(
                f"value has {value.numel()} elements but index has {index.numel()}; "
                "they must match (or value must be a scalar)."
            )
        if index.numel() == 0:
            return
        if index.numel() > 1:
            value = self._last_write_values(index, value)
        self._leaves.index_copy_(0, index, value)
        # Recompute the touched blocks from their leaves (one gather serves the sum and the
        # min); duplicate block ids write identical values, so the order does not matter.
        block = index >> self._shift
        rows = self._leaves.view(-1, self.block_size).index_select(0, block)
        self._sum_blocks.index_copy_(0, block, rows.sum(1, dtype=torch.float64))
        self._min_blocks.index_copy_(0, block, torch.where(rows > 0, rows, self._inf).amin(1).double())

    def load_leaves(self, values: torch.Tensor) -> None:
        """Replaces every leaf at once and rebuilds the blocks."""
        values = torch.as_tensor(values, device=self.device, dtype=self.dtype).reshape(-1)
        if values.numel() != self.size:
            raise ValueError(f"expected {self.size} leaves, got {values.numel()}")
        self._leaves.copy_(values)
        rows = self._leaves.view(-1, self.block_size)
        self._sum_blocks.copy_(rows.sum(1, dtype=torch.float64))
        self._min_blocks.copy_(torch.where(rows > 0, rows, self._inf).amin(1))

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
        return self._min_blocks.amin()

    def _block_prefix(self) -> torch.Tensor:
        """``[0, cumsum(blocks)...]`` in a reused buffer: ``prefix[b]`` is the mass before block b."""
        torch.cumsum(self._sum_blocks, 0, out=self._prefix[1:])
        return self._prefix

    def find_prefixsum(self, mass: torch.Tensor) -> torch.Tensor:
        """For each ``m`` in ``mass``, the slot ``i`` with ``sum(v[:i]) <= m < sum(v[:i+1])``.

        Masses at or past the total land on the last positive slot. The slot found always holds
        a positive value (when any does).
        """
        prefix = self._block_prefix()
        mass = torch.as_tensor(mass, device=self.device, dtype=torch.float64).reshape(-1)
        mass = torch.minimum(mass, torch.nextafter(prefix[-1], self._zero))
        return self._descend(prefix, mass)

    def sample(self, uniform: torch.Tensor) -> torch.Tensor:
        """Slots drawn with probability ``v[i] / total()``, from ``uniform`` draws in ``[0, 1)``.

        ``uniform`` should be float64 (float32 draws are converted).
        """
        prefix = self._block_prefix()
        mass = uniform.to(device=self.device, dtype=torch.float64).reshape(-1) * prefix[-1]
        return self._descend(prefix, mass)

    def _descend(self, prefix: torch.Tensor, mass: torch.Tensor) -> torch.Tensor:
        """Two searchsorted ops: the block, then the slot in it. No host sync.

        ``mass < total`` picks a block with a positive sum; the mass left inside it is kept
        strictly below the block's leaf sum, so the slot found has a positive value:
        ``row_cs[j] > m >= row_cs[j - 1]``.
        """
        block = torch.searchsorted(prefix[1:], mass, right=True).clamp_max_(self.num_blocks - 1)
        rest = mass - prefix.index_select(0, block)
        row_cs = self._leaves.view(-1, self.block_size).index_select(0, block)
        row_cs = row_cs.cumsum(1, dtype=torch.float64)
        rest = torch.minimum(rest, torch.nextafter(row_cs[:, -1], self._zero))
        inner = torch.searchsorted(row_cs, rest.unsqueeze(1), right=True).squeeze(1)
        return (block << self._shift) + inner

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(capacity={self.capacity}, block_size={self.block_size}, "
            f"device={self.device}, dtype={self.dtype})"
        )
