"""``"scan"``: the recurrence as a loop over time, no padding, with a hand-written backward.

Each layer's input projection is one GEMM over the whole sequence; the loop then does one
small matmul and a few elementwise ops per step, multiplying the incoming state by 0 where a
trajectory starts (only on steps that have a reset, in eager mode). The backward walks time in
reverse the same way and computes the recurrent weights' gradient as one GEMM at the end,
instead of one per step as autograd would. ``recurrent_recompute="full"`` is activation
checkpointing: forward keeps only its inputs, backward replays the forward loop.

Examples:
    >>> import torch
    >>> from reap_rnn.backends.base import RNNSpec, layer_weights
    >>> from reap_rnn.backends.scan import ScanKernel
    >>> lstm = torch.nn.LSTM(3, 4, batch_first=True)
    >>> x, is_init = torch.randn(2, 5, 3), torch.zeros(2, 5, dtype=torch.bool)
    >>> state0 = (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))
    >>> y, (h, c) = ScanKernel()(RNNSpec("lstm", 1, 4), x, state0, is_init, layer_weights(lstm), False)
    >>> torch.allclose(y, lstm(x)[0], atol=1e-6)
    True
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from reap_rnn.backends.base import LayeredKernel, refuse


def _resets(keep: torch.Tensor):
    """Per step: whether any row starts a trajectory there (None: mask every step)."""
    if torch.compiler.is_compiling():
        return None
    return (keep == 0).any(1).tolist()


def _lstm_loop(xw, h0, c0, keep, w_hh, resets):
    T, B, G = xw.shape
    H = G // 4
    acts = xw.new_empty(T, B, G)
    h_seq, c_seq = xw.new_empty(T, B, H), xw.new_empty(T, B, H)
    w_t = w_hh.t()
    h, c = h0, c0
    for t in range(T):
        if resets is None or resets[t]:
            k = keep[t].unsqueeze(1)
            h, c = h * k, c * k
        a = acts[t]
        pre = torch.addmm(xw[t], h, w_t)
        torch.sigmoid(pre, out=a)
        torch.tanh(pre[:, 2 * H : 3 * H], out=a[:, 2 * H : 3 * H])
        i, f, g, o = a.unflatten(1, (4, H)).unbind(1)
        c = torch.mul(f, c, out=c_seq[t]).addcmul_(i, g)
        h = torch.mul(o, torch.tanh(c), out=h_seq[t])
    return h_seq, c_seq, acts


class _LSTMScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xw, h0, c0, keep, w_hh):
        ctx.resets = _resets(keep)
        h_seq, c_seq, acts = _lstm_loop(xw, h0, c0, keep, w_hh, ctx.resets)
        ctx.save_for_backward(h0, c0, keep, w_hh, h_seq, c_seq, acts)
        return h_seq, c_seq

    @staticmethod
    def backward(ctx, dh_seq, dc_seq):
        h0, c0, keep, w_hh, h_seq, c_seq, acts = ctx.saved_tensors
        T, B, G = acts.shape
        H = G // 4
        k3 = keep.unsqueeze(-1)
        c_in = torch.cat([c0.unsqueeze(0), c_seq[:-1]]) * k3
        h_in = torch.cat([h0.unsqueeze(0), h_seq[:-1]]) * k3
        a4 = acts.unflatten(2, (4, H))
        i, f, g, o = a4.unbind(2)
        tc = torch.tanh(c_seq)
        dtanh_o = o * (1 - tc * tc)
        by_dc = torch.stack([g, c_in, i], 2)  # dc -> d i, d f, d g
        deriv = acts * (1 - acts)
        deriv.unflatten(2, (4, H))[:, :, 2] = 1 - g * g
        dG = acts.new_empty(T, B, G)
        dG4 = dG.unflatten(2, (4, H))
        dh = torch.zeros_like(h0)
        dc = torch.zeros_like(c0)
        resets = ctx.resets
        for t in range(T - 1, -1, -1):
            dh = dh + dh_seq[t]
            dc = (dc + dc_seq[t]).addcmul_(dh, dtanh_o[t])
            torch.mul(dc.unsqueeze(1), by_dc[t], out=dG4[t, :, :3])
            torch.mul(dh, tc[t], out=dG4[t, :, 3])
            dG[t].mul_(deriv[t])
            dh = dG[t] @ w_hh
            dc = dc * f[t]
            if resets is None or resets[t]:
                k = keep[t].unsqueeze(1)
                dh, dc = dh * k, dc * k
        flat = dG.reshape(T * B, G)
        dw = flat.t() @ h_in.reshape(T * B, -1)
        return dG, dh, dc, None, dw


def _gru_loop(xw, h0, keep, w_hh, b_hh, resets):
    T, B, G = xw.shape
    H = G // 3
    # one addmm per step gives the r/z pre-activations and W_hn h + b_hn: fold x's r/z parts
    # and the biases into the addend once for the whole sequence
    addend = torch.cat([xw[..., : 2 * H], xw.new_zeros(T, B, H)], -1)
    if b_hh is not None:
        addend = addend + b_hh
    hw = xw.new_empty(T, B, G)
    rz, n_seq, h_seq = xw.new_empty(T, B, 2 * H), xw.new_empty(T, B, H), xw.new_empty(T, B, H)
    w_t = w_hh.t()
    h = h0
    for t in range(T):
        if resets is None or resets[t]:
            h = h * keep[t].unsqueeze(1)
        pre = torch.addmm(addend[t], h, w_t, out=hw[t])
        torch.sigmoid(pre[:, : 2 * H], out=rz[t])
        n = torch.tanh(torch.addcmul(xw[t, :, 2 * H :], rz[t, :, :H], pre[:, 2 * H :]), out=n_seq[t])
        h = torch.addcmul(n, rz[t, :, H:], h - n, out=h_seq[t])
    return h_seq, rz, n_seq, hw[..., 2 * H :]


class _GRUScan(torch.autograd.Function):
    @staticmethod
    def forward(ctx, xw, h0, keep, w_hh, b_hh):
        ctx.resets, ctx.has_bias = _resets(keep), b_hh is not None
        h_seq, rz, n, hn = _gru_loop(xw, h0, keep, w_hh, b_hh, ctx.resets)
        ctx.save_for_backward(h0, keep, w_hh, h_seq, rz, n, hn)
        return h_seq

    @staticmethod
    def backward(ctx, dh_seq):
        h0, keep, w_hh, h_seq, rz, n, hn = ctx.saved_tensors
        T, B, H = h_seq.shape
        h_in = torch.cat([h0.unsqueeze(0), h_seq[:-1]]) * keep.unsqueeze(-1)
        r, z = rz[..., :H], rz[..., H:]
        to_n = (1 - z) * (1 - n * n)  # dh -> d n_pre
        to_z = (h_in - n) * z * (1 - z)  # dh -> d z_pre
        to_r = hn * r * (1 - r)  # d n_pre -> d r_pre
        dhw = h_seq.new_empty(T, B, 3 * H)
        dxn = h_seq.new_empty(T, B, H)
        dh = torch.zeros_like(h0)
        resets = ctx.resets
        for t in range(T - 1, -1, -1):
            dh = dh + dh_seq[t]
            dn = torch.mul(dh, to_n[t], out=dxn[t])
            torch.mul(dn, to_r[t], out=dhw[t, :, :H])
            torch.mul(dh, to_z[t], out=dhw[t, :, H : 2 * H])
            torch.mul(dn, r[t], out=dhw[t, :, 2 * H :])
            dh = torch.addmm(dh * z[t], dhw[t], w_hh)
            if resets is None or resets[t]:
                dh = dh * keep[t].unsqueeze(1)
        dxw = torch.cat([dhw[..., : 2 * H], dxn], -1)
        flat = dhw.reshape(T * B, 3 * H)
        dw = flat.t() @ h_in.reshape(T * B, H)
        db = flat.sum(0) if ctx.has_bias else None
        return dxw, dh, None, dw, db


class ScanKernel(LayeredKernel):
    """The ``"scan"`` backend (see the module docstring)."""

    name = "scan"

    def check(self, spec):
        super().check(spec)
        if spec.compute_dtype is not None:
            raise refuse("scan", "recurrent_compute_dtype", "use recurrent_backend='triton' or leave it None")

    def run_layer(self, spec, inp, w, h0, c0, keep):
        if spec.recompute == "full":
            return checkpoint(super().run_layer, spec, inp, w, h0, c0, keep, use_reentrant=False)
        return super().run_layer(spec, inp, w, h0, c0, keep)

    def layer(self, spec, xw, h0, c0, keep, w_hh, b_hh):
        if torch.compiler.is_compiling():  # plain ops: torch.compile traces one graph, autograd its backward
            return _traced_layer(spec.kind, xw, h0, c0, keep, w_hh, b_hh)
        if spec.kind == "lstm":
            return _LSTMScan.apply(xw, h0, c0, keep, w_hh)
        return (_GRUScan.apply(xw, h0, keep, w_hh, b_hh),)


def _traced_layer(kind, xw, h0, c0, keep, w_hh, b_hh):
    """The same recurrence in out-of-place ops only (what ``torch.compile`` traces)."""
    h, c, hs, cs = h0, c0, [], []
    for t in range(xw.shape[0]):
        k = keep[t].unsqueeze(1)
        h = h * k
        if kind == "lstm":
            i, f, g, o = (xw[t] + h @ w_hh.t()).chunk(4, 1)
            c = torch.sigmoid(f) * (c * k) + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            cs.append(c)
        else:
            hw = h @ w_hh.t() if b_hh is None else torch.addmm(b_hh, h, w_hh.t())
            xr, xz, xn = xw[t].chunk(3, 1)
            hr, hz, hn = hw.chunk(3, 1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            h = n + z * (h - n)
        hs.append(h)
    return (torch.stack(hs), torch.stack(cs)) if kind == "lstm" else (torch.stack(hs),)
