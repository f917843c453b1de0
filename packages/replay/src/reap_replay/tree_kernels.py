"""Triton kernels for :class:`~reap_replay.trees.PriorityTree` on a GPU: a batch in a few launches.

The tree's torch-op path costs some twenty small kernels and host syncs per sample and update.
Here a whole batch is:

* **sample**: one kernel. Each lane draws one slot: a binary search over the block prefix sums,
  then a left-to-right scan of the chosen block's leaves (float64, the CPU path's order, so the
  two paths find the same slot for the same draw), then the importance weight.
* **write** (update): three kernels, one grid barrier apart. ``_stamp`` checks every index and
  value (the first bad position of each kind goes to a flag) and stamps each slot with the last
  position that writes it (an ``atomic_max`` of ``call << 32 | position``, so stamps of earlier
  calls always lose: no reset); ``_write_leaves`` lets only the winning position write, and does
  nothing at all if a flag is set (nothing is written on bad input); ``_rebuild_blocks`` re-adds
  each touched block from its leaves, as the CPU path does, so no error accumulates.

The caller reads the flag once after the three launches (one host sync per write) and raises;
sampling never syncs. Under ``TRITON_INTERPRET=1`` the same kernels run on CPU tensors, which is
how the suite checks them without a GPU.

Examples:
    >>> import torch
    >>> from reap_replay.trees import PriorityTree
    >>> tree = PriorityTree(8, backend="triton")  # doctest: +SKIP
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["rebuild_all_blocks", "sample_slots", "write_leaves"]

LANES = 128  # draws or writes per program
_NO_FLAG: tl.constexpr = tl.constexpr(1 << 62)  # a flag slot no lane has written


@triton.jit
def _below(x):
    """The largest float64 below ``x`` (``x`` positive and finite), as ``nextafter(x, 0)``."""
    return (x.to(tl.int64, bitcast=True) - 1).to(tl.float64, bitcast=True)


@triton.jit(do_not_specialize=["n"])
def _sample(uniform_ptr, prefix_ptr, sums_ptr, leaves_ptr, root_min_ptr, index_ptr, weight_ptr, n, beta,
            NUM_BLOCKS: tl.constexpr, LOG_BLOCKS: tl.constexpr, BLOCK_SIZE: tl.constexpr,
            SHIFT: tl.constexpr, WEIGHTS: tl.constexpr, LANES: tl.constexpr):
    offs = tl.program_id(0) * LANES + tl.arange(0, LANES)
    live = offs < n
    total = tl.load(prefix_ptr + NUM_BLOCKS)
    mass = tl.minimum(tl.load(uniform_ptr + offs, mask=live, other=0.0).to(tl.float64) * total, _below(total))
    # the last block whose prefix (mass before it) is <= mass: binary lifting over NUM_BLOCKS
    block = tl.zeros([LANES], dtype=tl.int64)
    for k in tl.static_range(LOG_BLOCKS - 1, -1, -1):
        step = block + (1 << k)
        block = tl.where(tl.load(prefix_ptr + step, mask=live, other=float("inf")) <= mass, step, block)
    rest = mass - tl.load(prefix_ptr + block, mask=live, other=0.0)
    block_sum = tl.load(sums_ptr + block, mask=live, other=1.0)
    rest = tl.where(block_sum > 0, tl.minimum(rest, _below(block_sum)), rest)
    # the first leaf whose running sum exceeds rest
    start = block << SHIFT
    running = tl.zeros([LANES], dtype=tl.float64)
    inner = tl.zeros([LANES], dtype=tl.int64)
    for j in tl.static_range(BLOCK_SIZE):  # unrolled: every load issued at once
        running += tl.load(leaves_ptr + start + j, mask=live, other=0.0).to(tl.float64)
        inner += (running <= rest).to(tl.int64)
    slot = start + tl.minimum(inner, BLOCK_SIZE - 1)
    tl.store(index_ptr + offs, slot, mask=live)
    if WEIGHTS:
        p = tl.load(leaves_ptr + slot, mask=live, other=1.0).to(tl.float64)
        ratio = p / tl.load(root_min_ptr)
        tl.store(weight_ptr + offs, tl.exp(-beta * tl.log(ratio)).to(weight_ptr.dtype.element_ty), mask=live)


@triton.jit
def _clean(flags_ptr, LANES: tl.constexpr):
    """Whether no lane of ``_stamp`` raised a flag, as a vector (a scalar mask is refused by some
    Triton versions' interpreter)."""
    first = tl.zeros([LANES], dtype=tl.int32)
    return (tl.load(flags_ptr + first) == _NO_FLAG) & (tl.load(flags_ptr + first + 1) == _NO_FLAG)


@triton.jit
def _transformed(value, eps, alpha, TRANSFORM: tl.constexpr):
    """``(value + eps) ** alpha`` (``0 ** 0`` is 1, as in NumPy), or ``value`` as it is."""
    if TRANSFORM:
        base = value + eps
        power = tl.exp(alpha * tl.log(base))
        value = tl.where(base == 0, tl.where(alpha == 0, 1.0, 0.0), power)
    return value


@triton.jit(do_not_specialize=["n", "call", "index_limit"])
def _stamp(index_ptr, value_ptr, value_stride, stamps_ptr, flags_ptr, n, call, index_limit, value_limit,
           SKIP_NEGATIVE: tl.constexpr, LANES: tl.constexpr):
    offs = tl.program_id(0) * LANES + tl.arange(0, LANES)
    live = offs < n
    index = tl.load(index_ptr + offs, mask=live, other=0).to(tl.int64)
    value = tl.load(value_ptr + offs * value_stride, mask=live, other=0.0).to(tl.float64)
    skipped = (index < 0) if SKIP_NEGATIVE else (index < -(1 << 62))
    bad_index = live & ~skipped & ((index < 0) | (index >= index_limit))
    bad_value = live & ~skipped & ~((value >= 0) & (value <= value_limit))  # NaN fails both
    no_flag = tl.full([LANES], _NO_FLAG, tl.int64)
    flag_slot = tl.zeros([LANES], dtype=tl.int64)
    tl.atomic_min(flags_ptr + flag_slot, tl.where(bad_index, offs.to(tl.int64), no_flag), mask=live)
    tl.atomic_min(flags_ptr + flag_slot + 1, tl.where(bad_value, offs.to(tl.int64), no_flag), mask=live)
    ok = live & ~skipped & ~bad_index
    tl.atomic_max(stamps_ptr + index, (call.to(tl.int64) << 32) | offs.to(tl.int64), mask=ok)


@triton.jit(do_not_specialize=["n", "call"])
def _write_leaves(index_ptr, value_ptr, value_stride, stamps_ptr, flags_ptr, leaves_ptr, max_bits_ptr, n, call,
                  eps, alpha, TRANSFORM: tl.constexpr, TRACK_MAX: tl.constexpr, LANES: tl.constexpr):
    offs = tl.program_id(0) * LANES + tl.arange(0, LANES)
    live = (offs < n) & _clean(flags_ptr, LANES)
    index = tl.load(index_ptr + offs, mask=live, other=-1).to(tl.int64)
    live = live & (index >= 0)
    won = live & (tl.load(stamps_ptr + index, mask=live, other=-1) == ((call.to(tl.int64) << 32) | offs.to(tl.int64)))
    value = tl.load(value_ptr + offs * value_stride, mask=live, other=0.0).to(tl.float64)
    if TRACK_MAX:  # over every value given, overwritten ones too; a non-negative float64 orders as its bits
        tl.atomic_max(max_bits_ptr + tl.zeros([LANES], dtype=tl.int64), value.to(tl.int64, bitcast=True), mask=live)
    leaf = _transformed(value, eps, alpha, TRANSFORM)
    tl.store(leaves_ptr + index, leaf.to(leaves_ptr.dtype.element_ty), mask=won)


@triton.jit(do_not_specialize=["n"])
def _rebuild_blocks(index_ptr, flags_ptr, leaves_ptr, sums_ptr, mins_ptr, n,
                    BLOCK_SIZE: tl.constexpr, SHIFT: tl.constexpr, LANES: tl.constexpr):
    offs = tl.program_id(0) * LANES + tl.arange(0, LANES)
    live = (offs < n) & _clean(flags_ptr, LANES)
    index = tl.load(index_ptr + offs, mask=live, other=-1).to(tl.int64)
    live = live & (index >= 0)
    block = index >> SHIFT
    start = block << SHIFT
    total = tl.zeros([LANES], dtype=tl.float64)
    low = tl.full([LANES], float("inf"), tl.float64)
    for j in tl.static_range(BLOCK_SIZE):  # left to right, as the CPU path adds; unrolled
        leaf = tl.load(leaves_ptr + start + j, mask=live, other=0.0).to(tl.float64)
        total += leaf
        low = tl.minimum(low, tl.where(leaf > 0, leaf, float("inf")))
    # several lanes of one block store the same values
    tl.store(sums_ptr + block, total, mask=live)
    tl.store(mins_ptr + block, low, mask=live)


def sample_slots(tree, uniform: torch.Tensor, prefix: torch.Tensor, root_min, beta: float | None, dtype):
    """``(index, weight or None)`` of ``uniform``'s draws from ``tree``, in one launch.

    ``prefix`` is the tree's block prefix sums (``prefix[-1]`` the total) and ``root_min`` a 0-d
    float64 tensor on the tree's device; ``beta=None`` skips the weights.
    """
    n = uniform.numel()
    index = torch.empty(n, dtype=torch.int64, device=tree.device)
    weight = torch.empty(n, dtype=dtype, device=tree.device) if beta is not None else index
    if n:
        _sample[(triton.cdiv(n, LANES),)](
            uniform, prefix, tree._sum_blocks, tree._leaves, root_min, index, weight, n,
            0.0 if beta is None else float(beta),
            NUM_BLOCKS=tree.num_blocks, LOG_BLOCKS=tree.num_blocks.bit_length() - 1,
            BLOCK_SIZE=tree.block_size, SHIFT=tree._shift, WEIGHTS=beta is not None, LANES=LANES)
    return index, (weight if beta is not None else None)


def write_leaves(tree, index: torch.Tensor, value: torch.Tensor, *, index_limit: int, value_limit: float,
                 eps: float = 0.0, alpha: float = 1.0, transform: bool = False, skip_negative: bool = False,
                 max_bits: torch.Tensor | None = None) -> tuple[int | None, int | None]:
    """Writes ``value`` (or ``(value + eps) ** alpha`` with ``transform``) at ``index``, then
    rebuilds the touched blocks; three launches and one host sync.

    ``value`` holds one entry per index or a single one. An index must lie in ``[0,
    index_limit)`` (negative ones are skipped with ``skip_negative``) and a value in ``[0,
    value_limit]``. Returns the positions of the first bad index and of the first bad value
    (``None`` for none); if either is set nothing was written. ``max_bits`` (a 0-d int64 view of
    a float64) receives the largest value written, untransformed.
    """
    n = index.numel()
    tree._write_calls += 1
    call = tree._write_calls
    flags = torch.full((2,), _NO_FLAG.value, dtype=torch.int64, device=tree.device)
    stride = 1 if value.numel() > 1 else 0
    grid = (triton.cdiv(n, LANES),)
    _stamp[grid](index, value, stride, tree._stamps, flags, n, call, index_limit, value_limit,
                 SKIP_NEGATIVE=skip_negative, LANES=LANES)
    _write_leaves[grid](index, value, stride, tree._stamps, flags, tree._leaves,
                        flags if max_bits is None else max_bits, n, call, float(eps), float(alpha),
                        TRANSFORM=transform, TRACK_MAX=max_bits is not None, LANES=LANES)
    _rebuild_blocks[grid](index, flags, tree._leaves, tree._sum_blocks, tree._min_blocks, n,
                          BLOCK_SIZE=tree.block_size, SHIFT=tree._shift, LANES=LANES)
    bad_index, bad_value = flags.tolist()  # the one host sync
    no_flag = _NO_FLAG.value
    return (None if bad_index == no_flag else bad_index), (None if bad_value == no_flag else bad_value)


def rebuild_all_blocks(tree) -> None:
    """Re-adds every block of ``tree`` from its leaves (after its leaves were replaced)."""
    starts = torch.arange(0, tree.size, tree.block_size, device=tree.device)
    flags = torch.full((2,), _NO_FLAG.value, dtype=torch.int64, device=tree.device)
    _rebuild_blocks[(triton.cdiv(tree.num_blocks, LANES),)](
        starts, flags, tree._leaves, tree._sum_blocks, tree._min_blocks, tree.num_blocks,
        BLOCK_SIZE=tree.block_size, SHIFT=tree._shift, LANES=LANES)
