"""``"triton"``: Triton kernels for the recurrence, GEMMs for everything else.

Per layer, the input projection of all steps is one GEMM (torch), then the recurrence runs
with the resets applied inside the kernel, spread over batch tiles x hidden tiles: on a GPU
one persistent launch with a grid-wide barrier per step where the grid fits one program per
multiprocessor, else one launch per step (see ``_triton_kernels`` and :func:`plan_for`).
Backward runs the recurrence in reverse the same way and leaves the input and weight
gradients to GEMMs over ``[T * B]`` rows. ``recurrent_recompute="full"`` keeps no gate
activations and works through time in chunks (at least 16 steps, at most 32 chunks): forward
projects the input one chunk at a time, backward replays a chunk's projection and gates and
turns its gate gradients into input and weight gradients before the next, so neither the
projection nor the gate gradients of the whole sequence exist at once. ``recurrent_matmul_precision`` goes to
``tl.dot``; ``recurrent_compute_dtype`` is the dtype of its operands (accumulation stays in
the state dtype). Runs on CUDA tensors, or on the CPU under ``TRITON_INTERPRET=1`` (Triton's
interpreter: slow, for tests); anything else is an error naming the fix.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from reap.plugins import PluginNotInstalledError
from reap_rnn.backends.base import LayeredKernel, refuse
from reap_rnn.precision import resolve_precision


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


@dataclass(frozen=True)
class Plan:
    """How a layer's recurrence is laid out: tile sizes, and whether one persistent launch runs
    many steps (grid-wide barriers) or each step is a launch of its own."""

    block_b: int
    block_h: int
    red: int
    grid: tuple[int, int]
    persistent: bool
    num_warps: int = 4

    def kwargs(self, config: _Config) -> dict:
        return {"BLOCK_B": self.block_b, "BLOCK_H": self.block_h, "RED": self.red, "CDTYPE": config.cdtype,
                "ACC": config.acc, "PRECISION": config.precision, "num_warps": self.num_warps}


def _pow2_at_least(n: int, low: int, high: int) -> int:
    size = low
    while size < n and size < high:
        size *= 2
    return size


@functools.cache
def _multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def plan_for(B: int, H: int, device: torch.device) -> Plan:
    """The layout for ``B`` rows of ``H`` units on ``device``.

    On a GPU: the most programs that stay within one per multiprocessor (the persistent
    kernel's residency condition), each step's work spread as widely as possible; among
    layouts with as many programs, the wider hidden tile, then the narrower batch tile
    (measured faster on an H200: 11.7 ms against 12.3 for ``[256, 128]`` x 256, 79.8 against
    82.6 for ``[64, 256]`` x 1024; 32 programs against 16 for ``[32, 128]`` 2 x 256: 12.2 ms
    against 21.9). A batch
    too large for one program per multiprocessor even with 64 x 64 tiles runs one launch per
    step. Under the interpreter tiles are 16 wide and only a one-program grid is persistent
    (its programs run one after another).
    """
    if device.type != "cuda":
        grid = (_cdiv(B, 16), _cdiv(H, 16))
        return Plan(16, 16, 16, grid, grid == (1, 1))
    red = _pow2_at_least(H, 16, 64)
    n_sm = _multiprocessors(device.index if device.index is not None else torch.cuda.current_device())
    tiles = [(bb, bh) for bb in (16, 32, 64) for bh in (16, 32, 64)]
    fitting = [(_cdiv(B, bb) * _cdiv(H, bh), bh, -bb) for bb, bh in tiles if _cdiv(B, bb) * _cdiv(H, bh) <= n_sm]
    if not fitting:
        return Plan(64, 64, red, (_cdiv(B, 64), _cdiv(H, 64)), False)
    _, bh, bb = max(fitting)
    bb = -bb
    return Plan(bb, bh, red, (_cdiv(B, bb), _cdiv(H, bh)), True)


def _chunks(T: int, recompute: bool) -> list[tuple[int, int]]:
    """Time ranges processed together: all of them, or (recompute) chunks of at least 16 steps
    and at most 32 chunks, so that the input projection and the gate gradients exist for one
    chunk at a time (a chunk's share of the whole sequence's, at most a 16-step one's)."""
    size = min(T, max(16, _cdiv(T, 32))) if recompute else T
    return [(t0, min(T, t0 + size)) for t0 in range(0, T, size)]


def _project(x, w_ih, b_ih, b_hh, lstm):
    """The input projection of steps ``x`` (``[n, B, F]``), with the biases the kernel does not add."""
    if lstm:
        return F.linear(x, w_ih, None if b_ih is None else b_ih + b_hh).contiguous()
    return F.linear(x, w_ih, b_ih).contiguous()


class _TritonLayer(torch.autograd.Function):
    """One layer: ``x`` ``[T, B, F]`` -> the states after every step (``h_seq[, c_seq]``)."""

    @staticmethod
    def forward(ctx, x, w_ih, b_ih, b_hh, w_hh, h0, c0, keep, lstm, recompute, config):
        T, B, _ = x.shape
        H = w_hh.shape[1]
        k = _kernels()
        plan = plan_for(B, H, x.device)
        w = w_hh.contiguous()
        bh = b_hh.contiguous() if (b_hh is not None and not lstm) else w  # GRU's recurrent bias (else unused)
        hbuf = x.new_empty(T + 1, B, H)
        hbuf[0] = h0
        cbuf = x.new_empty(T + 1, B, H) if lstm else x.new_empty(0)
        if lstm:
            cbuf[0] = c0
        acts = x.new_empty(0) if recompute else x.new_empty(T, B, 4 * H)
        opts = {"SAVE": not recompute, **plan.kwargs(config)}
        if not lstm:
            opts["HAS_BIAS"] = b_hh is not None

        def launch(xw, t0, n, sync, persistent):
            if lstm:
                k.lstm_forward[plan.grid](xw, w, keep, hbuf, cbuf, acts, sync, t0, n, B, H,
                                          PERSISTENT=persistent, **opts)
            else:
                k.gru_forward[plan.grid](xw, w, bh, keep, hbuf, acts, sync, t0, n, B, H,
                                         PERSISTENT=persistent, **opts)

        for t0, t1 in _chunks(T, recompute):
            xw = _project(x[t0:t1], w_ih, b_ih, b_hh, lstm)
            _steps(launch, xw, t0, t1, plan)
        ctx.lstm, ctx.recompute, ctx.config, ctx.plan = lstm, recompute, config, plan
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, w_ih, b_ih, b_hh, w, bh, keep, hbuf, cbuf, acts)
        if lstm:
            return hbuf[1:], cbuf[1:]
        return hbuf[1:]

    @staticmethod
    def backward(ctx, dh_seq, dc_seq=None):
        x, w_ih, b_ih, b_hh, w, bh, keep, hbuf, cbuf, acts = ctx.saved_tensors
        lstm, recompute, plan = ctx.lstm, ctx.recompute, ctx.plan
        if dh_seq is None and dc_seq is None:
            return (None,) * 11
        T, B, _ = x.shape
        H = w.shape[1]
        k = _kernels()
        wt = w.t().contiguous()
        dh = torch.zeros(B, H, dtype=x.dtype, device=x.device)
        carry = torch.zeros_like(dh)  # LSTM: dc; GRU: the direct part of dh_{t-1}
        if dh_seq is None:
            dh_seq = dh if lstm else torch.zeros_like(hbuf[1:])
        dh_seq = _unit_stride(dh_seq)
        dc_seq = dh if dc_seq is None else _unit_stride(dc_seq)
        strides = (*dh_seq.stride()[:2], *dc_seq.stride()[:2]) if lstm else dh_seq.stride()[:2]
        opts = {"RECOMPUTE": recompute, **plan.kwargs(ctx.config)}
        if lstm:
            opts.update(HAS_DH=dh_seq is not dh, HAS_DC=dc_seq is not dh)
        else:
            opts["HAS_BIAS"] = b_hh is not None
        grads = _WeightGrads(x, w_ih, w, b_ih is not None, lstm, ctx.needs_input_grad[0])
        for t0, t1 in reversed(_chunks(T, recompute)):
            xw = _project(x[t0:t1], w_ih, b_ih, b_hh, lstm) if recompute else x.new_empty(0)
            dg = x.new_empty(t1 - t0, B, 4 * H)

            def launch(xw_s, dg_s, t_last, n, sync, persistent, phase_a=True, phase_b=True):
                if lstm:
                    k.lstm_backward[plan.grid](xw_s, w, wt, keep, hbuf, cbuf, acts, dh_seq, dc_seq, dh, carry,
                                               dg_s, sync, t_last, n, B, H, *strides, PHASE_A=phase_a, PHASE_B=phase_b,
                                               PERSISTENT=persistent, **opts)
                else:
                    k.gru_backward[plan.grid](xw_s, w, wt, bh, keep, hbuf, acts, dh_seq, dh, carry, dg_s, sync,
                                              t_last, n, B, H, *strides, PHASE_A=phase_a, PHASE_B=phase_b,
                                              PERSISTENT=persistent, **opts)

            _steps_back(launch, xw, dg, t0, t1, plan)
            grads.add(t0, t1, dg, hbuf[t0:t1], keep[t0:t1])
        d_b_ih, d_b_hh = grads.biases()
        return grads.d_x, grads.d_w_ih, d_b_ih, d_b_hh, grads.d_w_hh, dh, carry if lstm else None, \
            None, None, None, None


class _WeightGrads:
    """The GEMMs after the recurrence, accumulated range by range of time steps. ``dG`` rows
    are the gate gradients (LSTM ``[di, df, dg, do]``; GRU ``[dr, dz, dn * r, dn]``, of which
    the first three meet ``W_hh`` and ``[dr, dz, dn]`` meet ``W_ih``)."""

    def __init__(self, x, w_ih, w_hh, has_bias, lstm, want_dx):
        H = w_hh.shape[1]
        self.x, self.w_ih, self.lstm, self.H = x, w_ih, lstm, H
        self.d_x = torch.empty_like(x) if want_dx else None
        self.d_w_ih = torch.zeros_like(w_ih)
        self.d_w_hh = torch.zeros_like(w_hh)
        self.d_b_x = x.new_zeros(w_ih.shape[0]) if has_bias and not lstm else None  # LSTM: d_b_h serves both
        self.d_b_h = x.new_zeros(w_hh.shape[0]) if has_bias else None

    def _input_side(self, flat):
        """(columns of dG that meet W_ih, rows of W_ih they meet) pairs."""
        H = self.H
        if self.lstm:
            return [(flat, slice(None))]
        return [(flat[:, : 2 * H], slice(0, 2 * H)), (flat[:, 3 * H :], slice(2 * H, 3 * H))]

    def add(self, t0, t1, dg, h, keep):
        """Steps ``t0 .. t1 - 1``: their gate gradients ``dg``, the states entering them ``h``
        (before the resets) and ``keep``. Scales ``dg``'s recurrent columns in place."""
        n, B, _ = dg.shape
        flat = dg.view(n * B, -1)
        rec = flat if self.lstm else flat[:, : 3 * self.H]
        if self.d_b_h is not None:
            self.d_b_h += rec.sum(0)
        xs = self.x[t0:t1].reshape(n * B, -1)
        dx = None if self.d_x is None else self.d_x[t0:t1].view(n * B, -1)
        for i, (part, rows) in enumerate(self._input_side(flat)):
            self.d_w_ih[rows].addmm_(part.t(), xs)
            if self.d_b_x is not None:
                self.d_b_x[rows] += part.sum(0)
            if dx is not None:  # beta 0 first: d_x starts uninitialised
                dx.addmm_(part, self.w_ih[rows], beta=float(i > 0))
        # the state met W_hh times keep: scale dG's rows rather than copy the states
        rec.mul_(keep.reshape(n * B, 1))
        self.d_w_hh.addmm_(rec.t(), h.reshape(n * B, -1))

    def biases(self):
        if self.lstm:  # one bias vector in the kernel: b_ih and b_hh get the same gradient
            return self.d_b_h, self.d_b_h
        return self.d_b_x, self.d_b_h


def _steps(launch, xw, t0, t1, plan):
    """Forward steps ``t0 .. t1 - 1`` (``xw`` holds their projections)."""
    if plan.persistent:
        launch(xw, t0, t1 - t0, torch.zeros(plan.grid[0], dtype=torch.int32, device=xw.device), True)
        return
    for t in range(t0, t1):
        launch(xw[t - t0], t, 1, xw, False)


def _steps_back(launch, xw, dg, t0, t1, plan):
    """Backward steps ``t1 - 1`` down to ``t0``; ``dg`` gets their gate gradients."""
    if plan.persistent:
        launch(xw, dg, t1 - 1, t1 - t0, torch.zeros(plan.grid[0], dtype=torch.int32, device=dg.device), True)
        return
    for t in reversed(range(t0, t1)):
        xw_s = xw[t - t0] if xw.numel() else xw
        launch(xw_s, dg[t - t0], t, 1, dg, False, phase_b=False)
        launch(xw_s, dg[t - t0], t, 1, dg, False, phase_a=False)


def _unit_stride(grad: torch.Tensor) -> torch.Tensor:
    """``grad`` (``[T, B, H]``) as the kernels read it: any time/batch strides, units contiguous
    (the module's outputs are transposed views, so their gradients usually come strided)."""
    return grad if grad.stride(2) == 1 else grad.contiguous()


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
        # Triton launches on the current device: make it the input's (cuda:1 while cuda:0 is current)
        with torch.cuda.device(inp.device) if inp.is_cuda else contextlib.nullcontext():
            out = _TritonLayer.apply(inp.contiguous(), w.w_ih, w.b_ih, w.b_hh, w.w_hh, h0.contiguous(),
                                     None if c0 is None else c0.contiguous(), keep, spec.kind == "lstm",
                                     spec.recompute == "full", config)
        return out if isinstance(out, tuple) else (out,)


def _interpreted() -> bool:
    if os.environ.get("TRITON_INTERPRET", "0") != "1":
        return False
    return _kernels().INTERPRETED
