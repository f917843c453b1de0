"""Triton kernels of the ``"triton"`` backend: one launch runs a layer over the whole sequence.

A program owns ``BLOCK_B`` batch rows and walks time; at each step it computes the hidden
units tile by tile (``BLOCK_H`` at a time, each tile's matmul summed over ``BLOCK_K``-wide
slices of the previous state), so any hidden size fits. States live in ``[T + 1, B, H]``
buffers whose row 0 is the initial state; the incoming state is multiplied by ``keep`` (0
where a trajectory starts) inside the kernel. Backward walks time in reverse with two passes
per step (gate gradients tile by tile, then the recurrent ``dG @ W_hh`` tile by tile), with a
block barrier between them; with ``RECOMPUTE`` it rebuilds the gates from the saved states
instead of reading saved activations.
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
def _recur_tile(h_ptr, w_ptr, keep, rb, mb, row0, rh, mh, B, H, WK,
                BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
                CDTYPE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    """``(keep * h)[rb, :] @ W[row0 + rh, :]^T`` for one tile of output units: ``[BB, BH]``."""
    acc = tl.zeros((BLOCK_B, BLOCK_H), dtype=ACC)
    for k0 in range(0, WK, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        mk = rk < WK
        hp = tl.load(h_ptr + rb[:, None] * WK + rk[None, :], mask=mb[:, None] & mk[None, :], other=0.0)
        hp = hp * keep[:, None]
        w = tl.load(w_ptr + (row0 + rh)[None, :] * WK + rk[:, None], mask=mh[None, :] & mk[:, None], other=0.0)
        acc += tl.dot(hp.to(CDTYPE), w.to(CDTYPE), input_precision=PRECISION, out_dtype=ACC)
    return acc


@triton.jit
def _back_tile(dg_ptr, w_ptr, rb, mb, rk, mk, B, H, G,
               BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
               CDTYPE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    """``dG[rb, :] @ W[:, rk]`` (``G`` gate rows of ``H`` units each): ``[BB, BK]``."""
    acc = tl.zeros((BLOCK_B, BLOCK_K), dtype=ACC)
    for row in range(0, G * H, BLOCK_H):
        rj = row + tl.arange(0, BLOCK_H)
        mj = rj < G * H
        d = tl.load(dg_ptr + rb[:, None] * (G * H) + rj[None, :], mask=mb[:, None] & mj[None, :], other=0.0)
        w = tl.load(w_ptr + rj[:, None] * H + rk[None, :], mask=mj[:, None] & mk[None, :], other=0.0)
        acc += tl.dot(d.to(CDTYPE), w.to(CDTYPE), input_precision=PRECISION, out_dtype=ACC)
    return acc


@triton.jit
def _lstm_gates(xw_ptr, hbuf_ptr, w_ptr, keep, t, rb, mb, rh, mh, B, H,
                BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
                CDTYPE: tl.constexpr, ACC: tl.constexpr, PRECISION: tl.constexpr):
    m2 = mb[:, None] & mh[None, :]
    x_row = xw_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :]
    h_t = hbuf_ptr + t * B * H
    i = tl.load(x_row, mask=m2, other=0.0) + _recur_tile(h_t, w_ptr, keep, rb, mb, 0, rh, mh, B, H, H, BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
    f = tl.load(x_row + H, mask=m2, other=0.0) + _recur_tile(h_t, w_ptr, keep, rb, mb, H, rh, mh, B, H, H, BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
    g = tl.load(x_row + 2 * H, mask=m2, other=0.0) + _recur_tile(h_t, w_ptr, keep, rb, mb, 2 * H, rh, mh, B, H, H, BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
    o = tl.load(x_row + 3 * H, mask=m2, other=0.0) + _recur_tile(h_t, w_ptr, keep, rb, mb, 3 * H, rh, mh, B, H, H, BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
    return _sigmoid(i), _sigmoid(f), _tanh(g), _sigmoid(o)


@triton.jit
def lstm_forward(xw_ptr, w_ptr, keep_ptr, hbuf_ptr, cbuf_ptr, acts_ptr, T, B, H,
                 SAVE: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr,
                 BLOCK_K: tl.constexpr, CDTYPE: tl.constexpr, ACC: tl.constexpr,
                 PRECISION: tl.constexpr):
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    mb = rb < B
    for t in range(T):
        keep = tl.load(keep_ptr + t * B + rb, mask=mb, other=0.0)
        for j0 in range(0, H, BLOCK_H):
            rh = j0 + tl.arange(0, BLOCK_H)
            mh = rh < H
            m2 = mb[:, None] & mh[None, :]
            i, f, g, o = _lstm_gates(xw_ptr, hbuf_ptr, w_ptr, keep, t, rb, mb, rh, mh, B, H,
                                     BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
            tile = rb[:, None] * H + rh[None, :]
            c_prev = tl.load(cbuf_ptr + t * B * H + tile, mask=m2, other=0.0) * keep[:, None]
            c = f * c_prev + i * g
            tl.store(cbuf_ptr + (t + 1) * B * H + tile, c, mask=m2)
            tl.store(hbuf_ptr + (t + 1) * B * H + tile, o * _tanh(c), mask=m2)
            if SAVE:
                a = acts_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :]
                tl.store(a, i, mask=m2)
                tl.store(a + H, f, mask=m2)
                tl.store(a + 2 * H, g, mask=m2)
                tl.store(a + 3 * H, o, mask=m2)
        tl.debug_barrier()


@triton.jit
def lstm_backward(xw_ptr, w_ptr, keep_ptr, hbuf_ptr, cbuf_ptr, acts_ptr, dh_seq_ptr, dc_seq_ptr,
                  dh_ptr, dc_ptr, dg_ptr, T, B, H,
                  RECOMPUTE: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr,
                  BLOCK_K: tl.constexpr, CDTYPE: tl.constexpr, ACC: tl.constexpr,
                  PRECISION: tl.constexpr):
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    mb = rb < B
    for step in range(T):
        t = T - 1 - step
        keep = tl.load(keep_ptr + t * B + rb, mask=mb, other=0.0)
        for j0 in range(0, H, BLOCK_H):
            rh = j0 + tl.arange(0, BLOCK_H)
            mh = rh < H
            m2 = mb[:, None] & mh[None, :]
            tile = rb[:, None] * H + rh[None, :]
            if RECOMPUTE:
                i, f, g, o = _lstm_gates(xw_ptr, hbuf_ptr, w_ptr, keep, t, rb, mb, rh, mh, B, H,
                                         BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
            else:
                a = acts_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :]
                i = tl.load(a, mask=m2, other=0.0)
                f = tl.load(a + H, mask=m2, other=0.0)
                g = tl.load(a + 2 * H, mask=m2, other=0.0)
                o = tl.load(a + 3 * H, mask=m2, other=0.0)
            dh = tl.load(dh_ptr + tile, mask=m2, other=0.0) + tl.load(dh_seq_ptr + t * B * H + tile, mask=m2, other=0.0)
            dc = tl.load(dc_ptr + tile, mask=m2, other=0.0) + tl.load(dc_seq_ptr + t * B * H + tile, mask=m2, other=0.0)
            c = tl.load(cbuf_ptr + (t + 1) * B * H + tile, mask=m2, other=0.0)
            c_in = tl.load(cbuf_ptr + t * B * H + tile, mask=m2, other=0.0) * keep[:, None]
            tc = _tanh(c)
            dc += dh * o * (1.0 - tc * tc)
            d = dg_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :]
            tl.store(d, dc * g * i * (1.0 - i), mask=m2)
            tl.store(d + H, dc * c_in * f * (1.0 - f), mask=m2)
            tl.store(d + 2 * H, dc * i * (1.0 - g * g), mask=m2)
            tl.store(d + 3 * H, dh * tc * o * (1.0 - o), mask=m2)
            tl.store(dc_ptr + tile, dc * f * keep[:, None], mask=m2)
        tl.debug_barrier()
        for k0 in range(0, H, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            mk = rk < H
            acc = _back_tile(dg_ptr + t * B * 4 * H, w_ptr, rb, mb, rk, mk, B, H, 4,
                             BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
            tl.store(dh_ptr + rb[:, None] * H + rk[None, :], acc * keep[:, None], mask=mb[:, None] & mk[None, :])
        tl.debug_barrier()


@triton.jit
def _gru_gates(xw_ptr, hbuf_ptr, w_ptr, b_ptr, keep, t, rb, mb, rh, mh, B, H,
               HAS_BIAS: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr,
               BLOCK_K: tl.constexpr, CDTYPE: tl.constexpr, ACC: tl.constexpr,
               PRECISION: tl.constexpr):
    m2 = mb[:, None] & mh[None, :]
    x_row = xw_ptr + t * B * 3 * H + rb[:, None] * 3 * H + rh[None, :]
    h_t = hbuf_ptr + t * B * H
    hr = _recur_tile(h_t, w_ptr, keep, rb, mb, 0, rh, mh, B, H, H, BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
    hz = _recur_tile(h_t, w_ptr, keep, rb, mb, H, rh, mh, B, H, H, BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
    hn = _recur_tile(h_t, w_ptr, keep, rb, mb, 2 * H, rh, mh, B, H, H, BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
    if HAS_BIAS:
        hr += tl.load(b_ptr + rh, mask=mh, other=0.0)[None, :]
        hz += tl.load(b_ptr + H + rh, mask=mh, other=0.0)[None, :]
        hn += tl.load(b_ptr + 2 * H + rh, mask=mh, other=0.0)[None, :]
    r = _sigmoid(tl.load(x_row, mask=m2, other=0.0) + hr)
    z = _sigmoid(tl.load(x_row + H, mask=m2, other=0.0) + hz)
    n = _tanh(tl.load(x_row + 2 * H, mask=m2, other=0.0) + r * hn)
    return r, z, n, hn


@triton.jit
def gru_forward(xw_ptr, w_ptr, b_ptr, keep_ptr, hbuf_ptr, acts_ptr, T, B, H,
                HAS_BIAS: tl.constexpr, SAVE: tl.constexpr, BLOCK_B: tl.constexpr,
                BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, CDTYPE: tl.constexpr,
                ACC: tl.constexpr, PRECISION: tl.constexpr):
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    mb = rb < B
    for t in range(T):
        keep = tl.load(keep_ptr + t * B + rb, mask=mb, other=0.0)
        for j0 in range(0, H, BLOCK_H):
            rh = j0 + tl.arange(0, BLOCK_H)
            mh = rh < H
            m2 = mb[:, None] & mh[None, :]
            r, z, n, hn = _gru_gates(xw_ptr, hbuf_ptr, w_ptr, b_ptr, keep, t, rb, mb, rh, mh, B, H,
                                     HAS_BIAS, BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
            tile = rb[:, None] * H + rh[None, :]
            h_in = tl.load(hbuf_ptr + t * B * H + tile, mask=m2, other=0.0) * keep[:, None]
            tl.store(hbuf_ptr + (t + 1) * B * H + tile, n + z * (h_in - n), mask=m2)
            if SAVE:
                a = acts_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :]
                tl.store(a, r, mask=m2)
                tl.store(a + H, z, mask=m2)
                tl.store(a + 2 * H, n, mask=m2)
                tl.store(a + 3 * H, hn, mask=m2)
        tl.debug_barrier()


@triton.jit
def gru_backward(xw_ptr, w_ptr, b_ptr, keep_ptr, hbuf_ptr, acts_ptr, dh_seq_ptr, dh_ptr,
                 direct_ptr, dhw_ptr, dxn_ptr, T, B, H,
                 HAS_BIAS: tl.constexpr, RECOMPUTE: tl.constexpr, BLOCK_B: tl.constexpr,
                 BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, CDTYPE: tl.constexpr,
                 ACC: tl.constexpr, PRECISION: tl.constexpr):
    rb = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    mb = rb < B
    for step in range(T):
        t = T - 1 - step
        keep = tl.load(keep_ptr + t * B + rb, mask=mb, other=0.0)
        for j0 in range(0, H, BLOCK_H):
            rh = j0 + tl.arange(0, BLOCK_H)
            mh = rh < H
            m2 = mb[:, None] & mh[None, :]
            tile = rb[:, None] * H + rh[None, :]
            if RECOMPUTE:
                r, z, n, hn = _gru_gates(xw_ptr, hbuf_ptr, w_ptr, b_ptr, keep, t, rb, mb, rh, mh, B, H,
                                         HAS_BIAS, BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
            else:
                a = acts_ptr + t * B * 4 * H + rb[:, None] * 4 * H + rh[None, :]
                r = tl.load(a, mask=m2, other=0.0)
                z = tl.load(a + H, mask=m2, other=0.0)
                n = tl.load(a + 2 * H, mask=m2, other=0.0)
                hn = tl.load(a + 3 * H, mask=m2, other=0.0)
            dh = tl.load(dh_ptr + tile, mask=m2, other=0.0) + tl.load(dh_seq_ptr + t * B * H + tile, mask=m2, other=0.0)
            h_in = tl.load(hbuf_ptr + t * B * H + tile, mask=m2, other=0.0) * keep[:, None]
            dn = dh * (1.0 - z) * (1.0 - n * n)
            d = dhw_ptr + t * B * 3 * H + rb[:, None] * 3 * H + rh[None, :]
            tl.store(d, dn * hn * r * (1.0 - r), mask=m2)
            tl.store(d + H, dh * (h_in - n) * z * (1.0 - z), mask=m2)
            tl.store(d + 2 * H, dn * r, mask=m2)
            tl.store(dxn_ptr + t * B * H + tile, dn, mask=m2)
            tl.store(direct_ptr + tile, dh * z, mask=m2)
        tl.debug_barrier()
        for k0 in range(0, H, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            mk = rk < H
            m2k = mb[:, None] & mk[None, :]
            acc = _back_tile(dhw_ptr + t * B * 3 * H, w_ptr, rb, mb, rk, mk, B, H, 3,
                             BLOCK_B, BLOCK_H, BLOCK_K, CDTYPE, ACC, PRECISION)
            acc += tl.load(direct_ptr + rb[:, None] * H + rk[None, :], mask=m2k, other=0.0)
            tl.store(dh_ptr + rb[:, None] * H + rk[None, :], acc * keep[:, None], mask=m2k)
        tl.debug_barrier()
