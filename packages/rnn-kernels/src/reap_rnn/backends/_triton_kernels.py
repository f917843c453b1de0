"""Triton kernels of the ``"triton"`` backend: the recurrence of one layer, spread over the GPU.

The grid is ``batch tiles x hidden tiles``: program ``(b, j)`` owns rows ``b*BLOCK_B...`` and
hidden units ``j*BLOCK_H...`` of the state. At each step it reads the whole previous state
of its rows (written by every program of its batch tile at the step before), multiplies it
by its slice of ``W_hh`` (``RED`` columns at a time), adds the precomputed input projection
and writes its tile of the new state. The states live in ``[T + 1, B, H]`` buffers (row 0 is
the initial state, a new row per step, so no address is read before the step that writes it);
the incoming state is multiplied by ``keep`` (0 where a trajectory starts) in the kernel.

Backward has two phases per step: (A) program ``(b, j)`` turns its tile of ``dh``/``dc`` into
its tile of the gate gradients ``dG_t``; (B) the same program computes its tile of the
recurrent gradient ``dG_t @ W_hh`` (it reads every program's phase-A tile of its rows). The
input-projection and weight gradients are GEMMs over all steps outside the kernels.

Steps are separated in one of two ways, chosen by the caller:

* ``PERSISTENT``: one launch runs ``n_steps`` steps and the programs of a batch tile (the only
  ones that exchange state) meet at a barrier (a global counter per batch tile, release/acquire
  atomics) after each step (forward) or between the phases (backward). Every program must be
  resident at once, so the grid is at most one program per multiprocessor; under Triton's CPU
  interpreter programs run one after another, so only a one-program grid may use it there.
* one launch per step (per phase in backward): the stream orders the steps.

Loads of data that other programs wrote in the same launch (the previous state, the gate
gradients) read L2 (``cache_modifier=".cg"``), never the multiprocessor's own L1, which is
not kept coherent and may hold a line cached before another program wrote into it (a line
can straddle two steps' rows when a row is not a multiple of 128 bytes). Their loops are not
software-pipelined (``num_stages=1``): Triton turns pipelined loads into ``cp.async`` copies,
which cache 4-byte elements in L1 whatever the modifier. (On an H200, float16 operands at
3 rows x 20 units gave outputs off by up to 0.09, varying from run to run, before this; the
pipelining is the suspected cause; this change has not yet run on a GPU, and the speeds in
the package README were measured before it.)
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _tanh(x):
    return 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0


@triton.jit
def _grid_sync(sync_ptr, target):
    """Wait until the counter at ``sync_ptr`` reaches ``target`` (each program adds 1 per barrier).

    The wait reads the counter with plain volatile loads (an atomic per poll would queue behind
    every other program's polls at the counter's L2 slice) and then acquires with one atomic,
    which reads a value after every program's releasing add: their stores are visible after it.
    """
    tl.debug_barrier()
    tl.atomic_add(sync_ptr, 1, sem="release", scope="gpu")
    seen = tl.load(sync_ptr, volatile=True)
    while seen < target:
        seen = tl.load(sync_ptr, volatile=True)
    tl.atomic_add(sync_ptr, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()


@triton.jit
def _program_tile(B, H, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr):
    """This program's rows and units, their masks, the 2-D mask and the ``[B, H]`` offsets."""
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    rh = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mb = rb < B
    mh = rh < H
    return rb, rh, mb, mh, mb[:, None] & mh[None, :], rb[:, None] * H + rh[None, :]


@triton.jit
def _store4(ptr, a, b, c, d, H, mask):
    """Four ``[BB, BH]`` tiles at ``ptr``, ``ptr + H``, ``ptr + 2H``, ``ptr + 3H`` (a gate row)."""
    tl.store(ptr, a, mask=mask)
    tl.store(ptr + H, b, mask=mask)
    tl.store(ptr + 2 * H, c, mask=mask)
    tl.store(ptr + 3 * H, d, mask=mask)


@triton.jit
def _load4(ptr, H, mask):
    """The four tiles :func:`_store4` wrote."""
    return (tl.load(ptr, mask=mask, other=0.0), tl.load(ptr + H, mask=mask, other=0.0),
            tl.load(ptr + 2 * H, mask=mask, other=0.0), tl.load(ptr + 3 * H, mask=mask, other=0.0))


@triton.jit
def _recur_gates(h_ptr, w_ptr, keep, rb, mb, rh, mh, H, FOUR: tl.constexpr,
                 BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, RED: tl.constexpr,
                 CDTYPE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    """``(keep * h)[rb, :] @ W[g * H + rh, :]^T`` for the gates ``g`` (4 with ``FOUR``, else 3) of
    one tile of units, each ``[BB, BH]``; the state is read once for all gates. With 3 gates
    the fourth result is zeros."""
    a0 = tl.zeros((BLOCK_B, BLOCK_H), dtype=ACC)
    a1 = tl.zeros((BLOCK_B, BLOCK_H), dtype=ACC)
    a2 = tl.zeros((BLOCK_B, BLOCK_H), dtype=ACC)
    a3 = tl.zeros((BLOCK_B, BLOCK_H), dtype=ACC)
    for k0 in tl.range(0, H, RED, num_stages=1):  # not pipelined: see the module docstring
        rk = k0 + tl.arange(0, RED)
        mk = rk < H
        hp = tl.load(h_ptr + rb[:, None] * H + rk[None, :], mask=mb[:, None] & mk[None, :], other=0.0,
                     cache_modifier=".cg")
        hp = (hp * keep[:, None]).to(CDTYPE)
        wp = w_ptr + rh[None, :] * H + rk[:, None]
        wm = mh[None, :] & mk[:, None]
        a0 += tl.dot(hp, tl.load(wp, mask=wm, other=0.0).to(CDTYPE), input_precision=PRECISION, out_dtype=ACC)
        a1 += tl.dot(hp, tl.load(wp + H * H, mask=wm, other=0.0).to(CDTYPE), input_precision=PRECISION,
                     out_dtype=ACC)
        a2 += tl.dot(hp, tl.load(wp + 2 * H * H, mask=wm, other=0.0).to(CDTYPE), input_precision=PRECISION,
                     out_dtype=ACC)
        if FOUR:
            a3 += tl.dot(hp, tl.load(wp + 3 * H * H, mask=wm, other=0.0).to(CDTYPE), input_precision=PRECISION,
                         out_dtype=ACC)
    return a0, a1, a2, a3


@triton.jit
def _back_tile(dg_ptr, wt_ptr, rb, mb, rk, mk, GH, ROW,
               BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, RED: tl.constexpr,
               CDTYPE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    """``dG[rb, :GH] @ W[:GH, rk]`` (``dG`` rows ``ROW`` apart) with ``wt`` = ``W^T`` (``[H, GH]``,
    rows contiguous): ``[BB, BH]``."""
    acc = tl.zeros((BLOCK_B, BLOCK_H), dtype=ACC)
    for j0 in tl.range(0, GH, RED, num_stages=1):  # not pipelined: see the module docstring
        rj = j0 + tl.arange(0, RED)
        mj = rj < GH
        d = tl.load(dg_ptr + rb[:, None] * ROW + rj[None, :], mask=mb[:, None] & mj[None, :], other=0.0,
                    cache_modifier=".cg")
        w = tl.load(wt_ptr + rk[None, :] * GH + rj[:, None], mask=mj[:, None] & mk[None, :], other=0.0)
        acc += tl.dot(d.to(CDTYPE), w.to(CDTYPE), input_precision=PRECISION, out_dtype=ACC)
    return acc


@triton.jit
def _lstm_gates(xw_ptr, h_ptr, w_ptr, keep, rb, mb, rh, mh, H,
                BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, RED: tl.constexpr,
                CDTYPE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    """The four gates of one tile at one step; ``xw_ptr``/``h_ptr`` point at that step's rows."""
    m2 = mb[:, None] & mh[None, :]
    x_row = xw_ptr + rb[:, None] * 4 * H + rh[None, :]
    i, f, g, o = _recur_gates(h_ptr, w_ptr, keep, rb, mb, rh, mh, H, True, BLOCK_B, BLOCK_H, RED, CDTYPE, ACC,
                              PRECISION)
    i += tl.load(x_row, mask=m2, other=0.0)
    f += tl.load(x_row + H, mask=m2, other=0.0)
    g += tl.load(x_row + 2 * H, mask=m2, other=0.0)
    o += tl.load(x_row + 3 * H, mask=m2, other=0.0)
    return _sigmoid(i), _sigmoid(f), _tanh(g), _sigmoid(o)


@triton.jit(do_not_specialize=["t0", "n_steps"])
def lstm_forward(xw_ptr, w_ptr, keep_ptr, hbuf_ptr, cbuf_ptr, acts_ptr, sync_ptr, t0, n_steps, B, H,
                 SAVE: tl.constexpr, PERSISTENT: tl.constexpr, BLOCK_B: tl.constexpr,
                 BLOCK_H: tl.constexpr, RED: tl.constexpr, CDTYPE: tl.constexpr, ACC: tl.constexpr,
                 PRECISION: tl.constexpr):
    """Steps ``t0 .. t0 + n_steps - 1``; ``xw_ptr`` points at step ``t0``'s projection."""
    rb, rh, mb, mh, m2, tile = _program_tile(B, H, BLOCK_B, BLOCK_H)
    nprog = tl.num_programs(1)
    sync_ptr += tl.program_id(0)
    for s in range(n_steps):
        t = t0 + s
        keep = tl.load(keep_ptr + t * B + rb, mask=mb, other=0.0)
        i, f, g, o = _lstm_gates(xw_ptr + s * B * 4 * H, hbuf_ptr + t * B * H, w_ptr, keep, rb, mb, rh, mh, H,
                                 BLOCK_B, BLOCK_H, RED, CDTYPE, ACC, PRECISION)
        c_prev = tl.load(cbuf_ptr + t * B * H + tile, mask=m2, other=0.0) * keep[:, None]
        c = f * c_prev + i * g
        tl.store(cbuf_ptr + (t + 1) * B * H + tile, c, mask=m2)
        tl.store(hbuf_ptr + (t + 1) * B * H + tile, o * _tanh(c), mask=m2)
        if SAVE:
            _store4(acts_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :], i, f, g, o, H, m2)
        if PERSISTENT:
            _grid_sync(sync_ptr, (s + 1) * nprog)


@triton.jit(do_not_specialize=["t_last", "n_steps"])
def lstm_backward(xw_ptr, w_ptr, wt_ptr, keep_ptr, hbuf_ptr, cbuf_ptr, acts_ptr, dh_seq_ptr, dc_seq_ptr,
                  dh_ptr, dc_ptr, dg_ptr, sync_ptr, t_last, n_steps, B, H, dh_st, dh_sb, dc_st, dc_sb,
                  RECOMPUTE: tl.constexpr, HAS_DH: tl.constexpr, HAS_DC: tl.constexpr,
                  PHASE_A: tl.constexpr, PHASE_B: tl.constexpr, PERSISTENT: tl.constexpr,
                  BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, RED: tl.constexpr,
                  CDTYPE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    """Steps ``t_last`` down to ``t_last - n_steps + 1``. ``xw_ptr`` (with ``RECOMPUTE``) and
    ``dg_ptr`` point at step ``t_last - n_steps + 1``'s rows; ``dh``/``dc`` carry ``[B, H]``; the
    incoming ``dh_seq``/``dc_seq`` may be strided (time stride ``*_st``, batch stride ``*_sb``)."""
    rb, rh, mb, mh, m2, tile = _program_tile(B, H, BLOCK_B, BLOCK_H)
    nprog = tl.num_programs(1)
    sync_ptr += tl.program_id(0)
    t_first = t_last - n_steps + 1
    for step in range(n_steps):
        t = t_last - step
        s = t - t_first
        keep = tl.load(keep_ptr + t * B + rb, mask=mb, other=0.0)
        dg_t = dg_ptr + s * B * 4 * H
        if PHASE_A:
            if RECOMPUTE:
                i, f, g, o = _lstm_gates(xw_ptr + s * B * 4 * H, hbuf_ptr + t * B * H, w_ptr, keep, rb, mb, rh,
                                         mh, H, BLOCK_B, BLOCK_H, RED, CDTYPE, ACC, PRECISION)
            else:
                i, f, g, o = _load4(acts_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :], H, m2)
            dh = tl.load(dh_ptr + tile, mask=m2, other=0.0)
            if HAS_DH:
                dh += tl.load(dh_seq_ptr + t * dh_st + rb[:, None] * dh_sb + rh[None, :], mask=m2, other=0.0)
            dc = tl.load(dc_ptr + tile, mask=m2, other=0.0)
            if HAS_DC:
                dc += tl.load(dc_seq_ptr + t * dc_st + rb[:, None] * dc_sb + rh[None, :], mask=m2, other=0.0)
            c = tl.load(cbuf_ptr + (t + 1) * B * H + tile, mask=m2, other=0.0)
            c_in = tl.load(cbuf_ptr + t * B * H + tile, mask=m2, other=0.0) * keep[:, None]
            tc = _tanh(c)
            dc += dh * o * (1.0 - tc * tc)
            _store4(dg_t + rb[:, None] * 4 * H + rh[None, :], dc * g * i * (1.0 - i), dc * c_in * f * (1.0 - f),
                    dc * i * (1.0 - g * g), dh * tc * o * (1.0 - o), H, m2)
            tl.store(dc_ptr + tile, dc * f * keep[:, None], mask=m2)
        if PERSISTENT:
            _grid_sync(sync_ptr, (step + 1) * nprog)
        if PHASE_B:
            acc = _back_tile(dg_t, wt_ptr, rb, mb, rh, mh, 4 * H, 4 * H, BLOCK_B, BLOCK_H, RED, CDTYPE, ACC, PRECISION)
            tl.store(dh_ptr + tile, acc * keep[:, None], mask=m2)


@triton.jit
def _gru_gates(xw_ptr, h_ptr, w_ptr, b_ptr, keep, rb, mb, rh, mh, H,
               HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr,
               RED: tl.constexpr, CDTYPE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    m2 = mb[:, None] & mh[None, :]
    x_row = xw_ptr + rb[:, None] * 3 * H + rh[None, :]
    hr, hz, hn, _ = _recur_gates(h_ptr, w_ptr, keep, rb, mb, rh, mh, H, False, BLOCK_B, BLOCK_H, RED, CDTYPE,
                                 ACC, PRECISION)
    if HAS_BIAS:
        hr += tl.load(b_ptr + rh, mask=mh, other=0.0)[None, :]
        hz += tl.load(b_ptr + H + rh, mask=mh, other=0.0)[None, :]
        hn += tl.load(b_ptr + 2 * H + rh, mask=mh, other=0.0)[None, :]
    r = _sigmoid(tl.load(x_row, mask=m2, other=0.0) + hr)
    z = _sigmoid(tl.load(x_row + H, mask=m2, other=0.0) + hz)
    n = _tanh(tl.load(x_row + 2 * H, mask=m2, other=0.0) + r * hn)
    return r, z, n, hn


@triton.jit(do_not_specialize=["t0", "n_steps"])
def gru_forward(xw_ptr, w_ptr, b_ptr, keep_ptr, hbuf_ptr, acts_ptr, sync_ptr, t0, n_steps, B, H,
                HAS_BIAS: tl.constexpr, SAVE: tl.constexpr, PERSISTENT: tl.constexpr,
                BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, RED: tl.constexpr,
                CDTYPE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    rb, rh, mb, mh, m2, tile = _program_tile(B, H, BLOCK_B, BLOCK_H)
    nprog = tl.num_programs(1)
    sync_ptr += tl.program_id(0)
    for s in range(n_steps):
        t = t0 + s
        keep = tl.load(keep_ptr + t * B + rb, mask=mb, other=0.0)
        r, z, n, hn = _gru_gates(xw_ptr + s * B * 3 * H, hbuf_ptr + t * B * H, w_ptr, b_ptr, keep, rb, mb, rh,
                                 mh, H, HAS_BIAS, BLOCK_B, BLOCK_H, RED, CDTYPE, ACC, PRECISION)
        h_in = tl.load(hbuf_ptr + t * B * H + tile, mask=m2, other=0.0) * keep[:, None]
        tl.store(hbuf_ptr + (t + 1) * B * H + tile, n + z * (h_in - n), mask=m2)
        if SAVE:
            _store4(acts_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :], r, z, n, hn, H, m2)
        if PERSISTENT:
            _grid_sync(sync_ptr, (s + 1) * nprog)


@triton.jit(do_not_specialize=["t_last", "n_steps"])
def gru_backward(xw_ptr, w_ptr, wt_ptr, b_ptr, keep_ptr, hbuf_ptr, acts_ptr, dh_seq_ptr, dh_ptr,
                 direct_ptr, dg_ptr, sync_ptr, t_last, n_steps, B, H, dh_st, dh_sb,
                 HAS_BIAS: tl.constexpr, RECOMPUTE: tl.constexpr, PHASE_A: tl.constexpr,
                 PHASE_B: tl.constexpr, PERSISTENT: tl.constexpr, BLOCK_B: tl.constexpr,
                 BLOCK_H: tl.constexpr, RED: tl.constexpr, CDTYPE: tl.constexpr, ACC: tl.constexpr,
                 PRECISION: tl.constexpr):
    """As ``lstm_backward``; ``dG`` rows are ``[dr, dz, dn * r, dn]`` (``4H``): the first three
    are the recurrent pre-activations' gradients, ``dr, dz, dn`` the input projection's."""
    rb, rh, mb, mh, m2, tile = _program_tile(B, H, BLOCK_B, BLOCK_H)
    nprog = tl.num_programs(1)
    sync_ptr += tl.program_id(0)
    t_first = t_last - n_steps + 1
    for step in range(n_steps):
        t = t_last - step
        s = t - t_first
        keep = tl.load(keep_ptr + t * B + rb, mask=mb, other=0.0)
        dg_t = dg_ptr + s * B * 4 * H
        if PHASE_A:
            if RECOMPUTE:
                r, z, n, hn = _gru_gates(xw_ptr + s * B * 3 * H, hbuf_ptr + t * B * H, w_ptr, b_ptr, keep, rb,
                                         mb, rh, mh, H, HAS_BIAS, BLOCK_B, BLOCK_H, RED, CDTYPE, ACC, PRECISION)
            else:
                r, z, n, hn = _load4(acts_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :], H, m2)
            dh = tl.load(dh_ptr + tile, mask=m2, other=0.0)
            dh += tl.load(dh_seq_ptr + t * dh_st + rb[:, None] * dh_sb + rh[None, :], mask=m2, other=0.0)
            h_in = tl.load(hbuf_ptr + t * B * H + tile, mask=m2, other=0.0) * keep[:, None]
            dn = dh * (1.0 - z) * (1.0 - n * n)
            _store4(dg_t + rb[:, None] * 4 * H + rh[None, :], dn * hn * r * (1.0 - r), dh * (h_in - n) * z * (1.0 - z),
                    dn * r, dn, H, m2)
            tl.store(direct_ptr + tile, dh * z, mask=m2)
        if PERSISTENT:
            _grid_sync(sync_ptr, (step + 1) * nprog)
        if PHASE_B:
            acc = _back_tile(dg_t, wt_ptr, rb, mb, rh, mh, 3 * H, 4 * H, BLOCK_B, BLOCK_H, RED, CDTYPE, ACC,
                             PRECISION)
            acc += tl.load(direct_ptr + tile, mask=m2, other=0.0)
            tl.store(dh_ptr + tile, acc * keep[:, None], mask=m2)
