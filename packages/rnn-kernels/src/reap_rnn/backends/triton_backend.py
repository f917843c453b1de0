"""``"triton"``: fused Triton kernels, forward and backward, over the whole sequence.

Per layer, the input projection is one GEMM (torch), then one kernel launch runs the
recurrence over all steps with the resets applied inside the kernel, tiled over the hidden
size so any size fits (see ``_triton_kernels``); backward is one launch in reverse plus the
weight-gradient GEMMs. ``recurrent_recompute="full"`` keeps no gate activations: backward
replays the forward's gate computation in the kernel. ``recurrent_matmul_precision`` goes to
``tl.dot``; ``recurrent_compute_dtype`` is the dtype of its operands (accumulation stays in
the state dtype). Runs on CUDA tensors, or on the CPU under ``TRITON_INTERPRET=1`` (Triton's
interpreter: slow, for tests); anything else is an error naming the fix.
"""

from __future__ import annotations

import importlib.util
import os

import torch
import torch.nn.functional as F

from reap.plugins import PluginNotInstalledError
from reap_rnn.backends.base import LayeredKernel, refuse
from reap_rnn.precision import resolve_precision

BLOCK_B = 16


def _block(H: int) -> int:
    return 16 if H <= 32 else 32 if H <= 128 else 64


def _kernels():
    from reap_rnn.backends import _triton_kernels

    return _triton_kernels


def _tl_dtype(dtype: torch.dtype):
    import triton.language as tl

    table = {torch.float32: tl.float32, torch.float64: tl.float64, torch.float16: tl.float16,
             torch.bfloat16: tl.bfloat16}
    return table[dtype]


class _Config:
    def __init__(self, spec, dtype):
        self.acc = _tl_dtype(dtype)
        self.cdtype = _tl_dtype(spec.compute_dtype or dtype)
        self.precision = resolve_precision(spec.precision) if (spec.compute_dtype or dtype) == torch.float32 else "ieee"

    def kwargs(self, H):
        block = _block(H)
        return {"BLOCK_B": BLOCK_B, "BLOCK_H": block, "BLOCK_K": block, "CDTYPE": self.cdtype,
                "ACC": self.acc, "PRECISION": self.precision}


class _TritonLayer(torch.autograd.Function):
    """One layer: ``x`` ``[T, B, F]`` -> the states after every step (``h_seq[, c_seq]``)."""

    @staticmethod
    def forward(ctx, x, w_ih, b_ih, b_hh, w_hh, h0, c0, keep, lstm, recompute, config):
        T, B, _ = x.shape
        H = w_hh.shape[1]
        k = _kernels()
        if lstm:
            bias = None if b_ih is None else b_ih + b_hh
            xw = F.linear(x, w_ih, bias).contiguous()
        else:
            xw = F.linear(x, w_ih, b_ih).contiguous()
        hbuf = x.new_empty(T + 1, B, H)
        hbuf[0] = h0
        acts = x.new_empty(0) if recompute else x.new_empty(T, B, 4 * H)
        grid = (_cdiv(B, BLOCK_B),)
        w = w_hh.contiguous()
        if lstm:
            cbuf = x.new_empty(T + 1, B, H)
            cbuf[0] = c0
            k.lstm_forward[grid](xw, w, keep, hbuf, cbuf, acts, T, B, H, SAVE=not recompute, **config.kwargs(H))
        else:
            cbuf = x.new_empty(0)
            bh = b_hh.contiguous() if b_hh is not None else w
            k.gru_forward[grid](xw, w, bh, keep, hbuf, acts, T, B, H, HAS_BIAS=b_hh is not None,
                                SAVE=not recompute, **config.kwargs(H))
        ctx.lstm, ctx.recompute, ctx.config = lstm, recompute, config
        ctx.has_bias = b_ih is not None
        ctx.save_for_backward(x, w_ih, b_ih, b_hh, w, keep, hbuf, cbuf, acts)
        if lstm:
            return hbuf[1:], cbuf[1:]
        return hbuf[1:]

    @staticmethod
    def backward(ctx, dh_seq, dc_seq=None):
        x, w_ih, b_ih, b_hh, w, keep, hbuf, cbuf, acts = ctx.saved_tensors
        T, B, _ = x.shape
        H = w.shape[1]
        k = _kernels()
        lstm, config = ctx.lstm, ctx.config
        xw = x.new_empty(0)
        if ctx.recompute:  # replay the input projection; the kernel replays the gates
            if lstm:
                xw = F.linear(x, w_ih, None if b_ih is None else b_ih + b_hh).contiguous()
            else:
                xw = F.linear(x, w_ih, b_ih).contiguous()
        grid = (_cdiv(B, BLOCK_B),)
        dh = torch.zeros(B, H, dtype=x.dtype, device=x.device)
        dh_seq = dh_seq.contiguous()
        if lstm:
            dc = torch.zeros_like(dh)
            dG = x.new_empty(T, B, 4 * H)
            k.lstm_backward[grid](xw, w, keep, hbuf, cbuf, acts, dh_seq, dc_seq.contiguous(), dh, dc,
                                  dG, T, B, H, RECOMPUTE=ctx.recompute, **config.kwargs(H))
            dxw, dhw = dG, dG
        else:
            dc = None
            direct = torch.zeros_like(dh)
            dhw = x.new_empty(T, B, 3 * H)
            dxn = x.new_empty(T, B, H)
            bh = b_hh.contiguous() if b_hh is not None else w
            k.gru_backward[grid](xw, w, bh, keep, hbuf, acts, dh_seq, dh, direct, dhw, dxn, T, B, H,
                                 HAS_BIAS=b_hh is not None, RECOMPUTE=ctx.recompute, **config.kwargs(H))
            dxw = torch.cat([dhw[..., : 2 * H], dxn], -1)
        h_in = hbuf[:-1] * keep.unsqueeze(-1)
        flat_x = dxw.reshape(T * B, -1)
        d_x = (flat_x @ w_ih).reshape(x.shape)
        d_w_ih = flat_x.t() @ x.reshape(T * B, -1)
        d_w_hh = dhw.reshape(T * B, -1).t() @ h_in.reshape(T * B, H)
        d_b_ih = d_b_hh = None
        if ctx.has_bias:
            d_b_ih = flat_x.sum(0)
            d_b_hh = d_b_ih if lstm else dhw.reshape(T * B, -1).sum(0)
        return d_x, d_w_ih, d_b_ih, d_b_hh, d_w_hh, dh, dc, None, None, None, None


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class TritonKernel(LayeredKernel):
    """The ``"triton"`` backend (see the module docstring)."""

    name = "triton"

    def check(self, spec):
        super().check(spec)
        if importlib.util.find_spec("triton") is None:
            raise PluginNotInstalledError(
                "recurrent_backend='triton' needs the triton package, which is not installed. Triton "
                "publishes wheels for Linux on x86_64 and aarch64, where reap-rnn-kernels installs it; "
                "there, install it with `uv pip install triton`. Elsewhere use recurrent_backend='scan' "
                "(or 'pad')."
            )
        if spec.compute_dtype not in (None, torch.float32, torch.float64, torch.float16, torch.bfloat16):
            raise refuse("triton", f"recurrent_compute_dtype={spec.compute_dtype}",
                         "use float32, float16, bfloat16, float64 or None")

    def check_input(self, x):
        if x.device.type == "cuda":
            return
        if x.device.type == "cpu" and _interpreted():
            return
        raise RuntimeError(
            f"recurrent_backend='triton' cannot run on {x.device} tensors: it needs a CUDA device, or "
            "TRITON_INTERPRET=1 set before triton is first imported (Triton's interpreter, for tests: "
            "slow); use recurrent_backend='scan' on the CPU"
        )

    def run_layer(self, spec, inp, w, h0, c0, keep):
        if inp.dtype not in (torch.float32, torch.float64):
            raise RuntimeError(f"recurrent_backend='triton' supports float32 and float64 inputs, got {inp.dtype}")
        config = _Config(spec, inp.dtype)
        out = _TritonLayer.apply(inp.contiguous(), w.w_ih, w.b_ih, w.b_hh, w.w_hh, h0.contiguous(),
                                 None if c0 is None else c0.contiguous(), keep, spec.kind == "lstm",
                                 spec.recompute == "full", config)
        return out if isinstance(out, tuple) else (out,)


def _interpreted() -> bool:
    if os.environ.get("TRITON_INTERPRET", "0") != "1":
        return False
    return _kernels().INTERPRETED
