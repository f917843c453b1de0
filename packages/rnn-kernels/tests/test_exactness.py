"""Every CPU backend equals torch.nn.LSTM/GRU run segment by segment between resets: outputs,
the states after every step, and the gradients of every parameter, the input and the stored
state, with 1 and 2 layers, in float64 and float32."""

from __future__ import annotations

import pytest
import torch
from rnn_reference import ieee_float32, make_batch, reference

from reap_rnn import GRUModule, LSTMModule, set_recurrent_mode

TOL = {torch.float64: {"rtol": 1e-9, "atol": 1e-10}, torch.float32: {"rtol": 1e-4, "atol": 2e-5}}


def build(kind, backend, layers, dtype, **kwargs):
    torch.manual_seed(0)
    cls = LSTMModule if kind == "lstm" else GRUModule
    return cls(input_size=5, hidden_size=7, num_layers=layers, in_key="obs", out_key="feat",
               recurrent_backend=backend, **kwargs).to(dtype)


def outputs_and_grads(module, td, fn):
    """Run ``fn`` (module or reference) and return outputs plus the gradients of a loss mixing
    every output at every step."""
    params = list(module.parameters())
    x = td[module.in_keys[0]].clone().requires_grad_()
    stored = [td[k].clone().requires_grad_() for k in module.in_keys[1:-1]]
    y, states = fn(x, stored)
    gen = torch.Generator().manual_seed(1)  # drawn on the CPU (the same draws on every device), then moved
    loss = (y * torch.randn(y.shape, generator=gen, dtype=y.dtype).to(y.device)).sum()
    for s in states:
        loss = loss + (s * torch.randn(s.shape, generator=gen, dtype=s.dtype).to(s.device)).sum()
    grads = torch.autograd.grad(loss, [x, *stored, *params])
    return [y, *states], list(grads)


def run_module(module, td):
    def fn(x, stored):
        data = td.clone()
        data[module.in_keys[0]] = x
        for key, s in zip(module.in_keys[1:-1], stored):
            data[key] = s
        with set_recurrent_mode(True):
            out = module(data)
        return out[module.out_keys[0]], [out[k] for k in module.out_keys[1:]]

    return fn


def run_reference(module, td):
    is_init = td["is_init"].squeeze(-1)

    def fn(x, stored):
        state0 = tuple(s[:, 0].transpose(0, 1) for s in stored)
        with ieee_float32(x.device):
            return reference(module._rnn, x, state0, is_init)

    return fn


def assert_close_lists(got, want, tol, what):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, **tol, msg=lambda m, i=i: f"{what}[{i}]: {m}")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("backend", ["pad", "scan"])
def test_matches_segment_by_segment(backend, kind, layers, dtype):
    module = build(kind, backend, layers, dtype)
    td = make_batch(module, 4, 11, dtype, torch.Generator().manual_seed(layers))
    got, got_grads = outputs_and_grads(module, td, run_module(module, td))
    want, want_grads = outputs_and_grads(module, td, run_reference(module, td))
    assert_close_lists(got, want, TOL[dtype], "outputs")
    assert_close_lists(got_grads, want_grads, TOL[dtype], "grads")


@pytest.mark.parametrize("backend", ["pad", "scan"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recompute_full_same_gradients(backend, kind):
    if backend == "pad":
        with pytest.raises(ValueError, match="recurrent_recompute='full'"):
            build(kind, backend, 2, torch.float64, recurrent_recompute="full")
        return
    plain = build(kind, backend, 2, torch.float64)
    full = build(kind, backend, 2, torch.float64, recurrent_recompute="full")
    td = make_batch(plain, 3, 9, torch.float64, torch.Generator().manual_seed(3))
    a = outputs_and_grads(plain, td, run_module(plain, td))
    b = outputs_and_grads(full, td, run_module(full, td))
    assert_close_lists(a[0] + a[1], b[0] + b[1], {"rtol": 0, "atol": 0}, "full vs none")


def test_proj_size_with_pad():
    torch.manual_seed(0)
    module = LSTMModule(input_size=5, hidden_size=7, num_layers=2, proj_size=3, in_key="obs",
                        out_key="feat").double()
    td = make_batch(module, 3, 10, torch.float64, torch.Generator().manual_seed(0))
    got, got_grads = outputs_and_grads(module, td, run_module(module, td))
    want, want_grads = outputs_and_grads(module, td, run_reference(module, td))
    assert got[1].shape[-1] == 3 and got[2].shape[-1] == 7
    assert_close_lists(got + got_grads, want + want_grads, TOL[torch.float64], "proj")


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_single_step_mode_resets_where_is_init(kind):
    module = build(kind, "pad", 2, torch.float64)
    td = make_batch(module, 5, 1, torch.float64, torch.Generator().manual_seed(4))[:, 0]
    td["is_init"] = torch.tensor([[True], [False], [True], [False], [False]])
    out = module(td.clone())
    is_init = td["is_init"].squeeze(-1)
    for b in range(5):
        state = tuple(td[k][b].unsqueeze(1) * (0.0 if is_init[b] else 1.0)
                      for k in module.in_keys[1:-1])
        y, new = module._rnn(td[module.in_keys[0]][b].view(1, 1, -1), state if kind == "lstm" else state[0])
        new = new if kind == "lstm" else (new,)
        torch.testing.assert_close(out["feat"][b], y[0, 0], rtol=1e-12, atol=1e-12)
        for key, s in zip(module.out_keys[1:], new):
            torch.testing.assert_close(out[key][b], s[:, 0], rtol=1e-12, atol=1e-12)


def test_stepping_equals_recurrent_mode():
    """Single steps fed their own next states reproduce recurrent mode over the sequence."""
    module = build("lstm", "scan", 2, torch.float64)
    td = make_batch(module, 3, 8, torch.float64, torch.Generator().manual_seed(5))
    with set_recurrent_mode(True):
        seq = module(td.clone())
    h, c = td["recurrent_state_h"][:, 0], td["recurrent_state_c"][:, 0]
    for t in range(8):
        step = td[:, t].clone()
        step["recurrent_state_h"], step["recurrent_state_c"] = h, c
        out = module(step)
        torch.testing.assert_close(out["feat"], seq["feat"][:, t])
        h, c = out["next", "recurrent_state_h"], out["next", "recurrent_state_c"]
        torch.testing.assert_close(h, seq["next", "recurrent_state_h"][:, t])
        torch.testing.assert_close(c, seq["next", "recurrent_state_c"][:, t])


def test_batch_dims_fold_into_rows():
    module = build("gru", "scan", 1, torch.float64)
    td = make_batch(module, 6, 5, torch.float64, torch.Generator().manual_seed(6))
    with set_recurrent_mode(True):
        flat = module(td.clone())["feat"]
        nested = module(td.clone().reshape(2, 3, 5))["feat"]
        one_row = module(td[2].clone())["feat"]
    torch.testing.assert_close(nested.reshape(6, 5, -1), flat, rtol=0, atol=0)
    torch.testing.assert_close(one_row, flat[2])
