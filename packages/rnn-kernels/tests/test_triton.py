"""The Triton backend, on the CPU under Triton's interpreter (``TRITON_INTERPRET=1``, set by
conftest.py before triton is imported) and on a GPU when one is present: equal to torch.nn run
segment by segment, with hidden sizes above one tile so the tiling over the hidden size is
exercised."""

from __future__ import annotations

import pytest
import torch
from rnn_reference import make_batch
from test_exactness import TOL, assert_close_lists, outputs_and_grads, run_module, run_reference
from test_options import saved_for_backward

from reap_rnn import GRUModule, LSTMModule

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HIDDEN = 20  # two 16-wide tiles (the second one partly masked)


def build(kind, layers, dtype, **kwargs):
    torch.manual_seed(0)
    cls = LSTMModule if kind == "lstm" else GRUModule
    return cls(input_size=5, hidden_size=HIDDEN, num_layers=layers, in_key="obs", out_key="feat",
               recurrent_backend="triton", device=DEVICE, **kwargs).to(dtype)


def batch(module, dtype, B=3, T=6, seed=0):
    return make_batch(module, B, T, dtype, torch.Generator().manual_seed(seed)).to(DEVICE)


@pytest.mark.parametrize(("dtype", "layers"), [(torch.float64, 2), (torch.float32, 1)])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_matches_segment_by_segment(kind, dtype, layers):
    module = build(kind, layers, dtype)
    td = batch(module, dtype)
    got, got_grads = outputs_and_grads(module, td, run_module(module, td))
    want, want_grads = outputs_and_grads(module, td, run_reference(module, td))
    assert_close_lists(got, want, TOL[dtype], "outputs")
    assert_close_lists(got_grads, want_grads, TOL[dtype], "grads")


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recompute_full_same_results_fewer_saved(kind):
    none = build(kind, 1, torch.float64)
    full = build(kind, 1, torch.float64, recurrent_recompute="full")
    td = batch(none, torch.float64, seed=1)
    a = outputs_and_grads(none, td, run_module(none, td))
    b = outputs_and_grads(full, td, run_module(full, td))
    assert_close_lists(a[0] + a[1], b[0] + b[1], {"rtol": 1e-12, "atol": 1e-12}, "full vs none")
    n_none, bytes_none, _ = saved_for_backward(none, td.clone())
    n_full, bytes_full, _ = saved_for_backward(full, td.clone())
    assert bytes_full < bytes_none


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_one_layer_many_rows(kind):
    """More rows than one program's block (two programs), one layer, float32."""
    module = build(kind, 1, torch.float32)
    td = batch(module, torch.float32, B=18, T=4, seed=2)
    got, got_grads = outputs_and_grads(module, td, run_module(module, td))
    want, want_grads = outputs_and_grads(module, td, run_reference(module, td))
    # on a GPU the weight gradients (sums over B * T products) are summed in another order than
    # cuDNN's: measured 3.5e-5 apart on an H200 for values near 0.1
    tol = {"rtol": 1e-3, "atol": 1e-4} if DEVICE == "cuda" else TOL[torch.float32]
    assert_close_lists(got + got_grads, want + want_grads, tol, "rows")


def test_precision_modes_leave_torch_tf32_flag_alone():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    results = {}
    for mode in ("ieee", "tf32", "tf32x3"):
        module = build("gru", 1, torch.float32, recurrent_matmul_precision=mode)
        td = batch(module, torch.float32, seed=3)
        results[mode] = outputs_and_grads(module, td, run_module(module, td))[0]
        assert (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()) == before
    tol = {"rtol": 1e-2, "atol": 1e-2} if DEVICE == "cuda" else {"rtol": 1e-6, "atol": 1e-6}
    assert_close_lists(results["tf32"], results["ieee"], tol, "tf32")
    assert_close_lists(results["tf32x3"], results["ieee"], {"rtol": 1e-4, "atol": 1e-5}, "tf32x3")


def test_cpu_without_interpreter_is_a_clear_error(monkeypatch):
    module = build("gru", 1, torch.float32)
    td = batch(module, torch.float32).cpu()
    module = module.cpu()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    from reap_rnn import set_recurrent_mode

    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1.*recurrent_backend='scan'"), set_recurrent_mode(True):
        module(td)


def test_unsupported_options_are_errors():
    with pytest.raises(ValueError, match="'triton' does not support proj_size"):
        LSTMModule(input_size=3, hidden_size=8, proj_size=4, in_key="x", out_key="y", recurrent_backend="triton")
    with pytest.raises(ValueError, match="recurrent_compute_dtype"):
        GRUModule(input_size=3, hidden_size=8, in_key="x", out_key="y", recurrent_backend="triton",
                  recurrent_compute_dtype=torch.int8)
