"""The Triton backend's two step layouts, each equal to torch.nn run segment by segment: one
persistent launch whose programs meet at a grid-wide barrier per step, and one launch per step
(per phase in backward). Under the CPU interpreter programs run one after another, so the
persistent case there is a one-program grid; on a GPU it has several programs."""

from __future__ import annotations

import pytest
import torch
from rnn_reference import make_batch
from test_exactness import TOL, assert_close_lists, outputs_and_grads, run_module, run_reference

from reap_rnn import GRUModule, LSTMModule

pytest.importorskip("triton")
from reap_rnn.backends import triton_backend  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _cdiv(a, b):
    return -(-a // b)


def forced_plan(layout, used):
    def plan(B, H, device):
        if layout == "persistent":
            block = 16 if device.type == "cuda" else 32
            chosen = triton_backend.Plan(block, block, 16, (_cdiv(B, block), _cdiv(H, block)), True)
        else:
            chosen = triton_backend.Plan(16, 16, 16, (_cdiv(B, 16), _cdiv(H, 16)), False)
        used.append(chosen)
        return chosen

    return plan


@pytest.mark.parametrize("recompute", ["none", "full"])
@pytest.mark.parametrize("layout", ["persistent", "per-step"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_step_layouts_match_torch(kind, layout, recompute, monkeypatch):
    used = []
    monkeypatch.setattr(triton_backend, "plan_for", forced_plan(layout, used))
    torch.manual_seed(0)
    cls = LSTMModule if kind == "lstm" else GRUModule
    module = cls(input_size=5, hidden_size=20, num_layers=2, in_key="obs", out_key="feat",
                 recurrent_backend="triton", recurrent_recompute=recompute, device=DEVICE).double()
    steps = 34 if recompute == "full" else 7  # full: three chunks of time (16, 16, 2)
    td = make_batch(module, 3, steps, torch.float64, torch.Generator().manual_seed(0)).to(DEVICE)
    got, got_grads = outputs_and_grads(module, td, run_module(module, td))
    want, want_grads = outputs_and_grads(module, td, run_reference(module, td))
    assert_close_lists(got, want, TOL[torch.float64], "outputs")
    assert_close_lists(got_grads, want_grads, TOL[torch.float64], "grads")
    assert used and all(p.persistent == (layout == "persistent") for p in used)


def test_plan_on_cpu_is_the_interpreter_layout():
    assert triton_backend.plan_for(3, 20, torch.device("cpu")) == triton_backend.Plan(16, 16, 16, (1, 2), False)
    assert triton_backend.plan_for(3, 16, torch.device("cpu")).persistent


def test_recompute_works_through_time_in_chunks():
    assert triton_backend._chunks(6, False) == [(0, 6)]
    assert triton_backend._chunks(6, True) == [(0, 6)]
    assert triton_backend._chunks(40, True) == [(0, 16), (16, 32), (32, 40)]
    assert triton_backend._chunks(1024, True) == [(t, t + 32) for t in range(0, 1024, 32)]


def test_plan_on_a_gpu_spreads_each_step_over_the_multiprocessors(monkeypatch):
    monkeypatch.setattr(triton_backend, "_multiprocessors", lambda index: 132)  # an H100/H200
    cuda = torch.device("cuda", 0)
    Plan = triton_backend.Plan
    assert triton_backend.plan_for(32, 256, cuda) == Plan(16, 16, 64, (2, 16), True)
    assert triton_backend.plan_for(64, 1024, cuda) == Plan(16, 32, 64, (4, 32), True)
    assert triton_backend.plan_for(256, 256, cuda) == Plan(16, 32, 64, (16, 8), True)
    assert triton_backend.plan_for(3, 20, cuda) == Plan(16, 16, 32, (1, 2), True)
    assert triton_backend.plan_for(10_000, 1024, cuda) == Plan(64, 64, 64, (157, 16), False)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_without_biases(kind):
    torch.manual_seed(0)
    cls = LSTMModule if kind == "lstm" else GRUModule
    module = cls(input_size=5, hidden_size=20, in_key="obs", out_key="feat", bias=False,
                 recurrent_backend="triton", device=DEVICE).double()
    td = make_batch(module, 3, 5, torch.float64, torch.Generator().manual_seed(0)).to(DEVICE)
    got, got_grads = outputs_and_grads(module, td, run_module(module, td))
    want, want_grads = outputs_and_grads(module, td, run_reference(module, td))
    states = 2 if kind == "lstm" else 1
    assert len(got_grads) == 1 + states + 2  # input, stored states, w_ih, w_hh: no bias parameters
    assert_close_lists(got + got_grads, want + want_grads, TOL[torch.float64], "no bias")
