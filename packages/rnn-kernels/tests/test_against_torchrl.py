"""Optional cross-check with TorchRL's LSTMModule/GRUModule (the bench dependency group): same
weights, same data, recurrent mode with resets and single steps.

Data is laid out as collectors produce it: the stored state is zero where ``is_init`` is set
(TorchRL's recurrent mode restarts a trajectory from the stored state, reap's from zero; the
primer makes them the same thing in collected data)."""

from __future__ import annotations

import pytest
import torch
from rnn_reference import make_batch

import reap_rnn

trm = pytest.importorskip("torchrl.modules")


def pair(kind, layers):
    torch.manual_seed(0)
    rnn = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(5, 7, layers, batch_first=True)
    ours = (reap_rnn.LSTMModule if kind == "lstm" else reap_rnn.GRUModule)(**{kind: rnn}, in_key="obs", out_key="y")
    theirs = (trm.LSTMModule if kind == "lstm" else trm.GRUModule)(**{kind: rnn}, in_key="obs", out_key="y")
    return ours, theirs


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recurrent_mode_matches_torchrl(kind, layers):
    ours, theirs = pair(kind, layers)
    td = make_batch(ours, 4, 12, torch.float32, torch.Generator().manual_seed(0))
    for key in ours.in_keys[1:-1]:
        td[key] = td[key].masked_fill(td["is_init"].unsqueeze(-1), 0)
    with reap_rnn.set_recurrent_mode(True):
        a = ours(td.clone())
    with trm.set_recurrent_mode(True):
        b = theirs(td.clone())
    torch.testing.assert_close(a["y"], b["y"], rtol=1e-5, atol=1e-6)
    # TorchRL writes the true next state only at the last step of a row; reap at every step
    for key in ours.out_keys[1:]:
        torch.testing.assert_close(a[key][:, -1], b[key][:, -1], rtol=1e-5, atol=1e-6)
    ga = torch.autograd.grad(a["y"].pow(2).sum(), list(ours.parameters()))
    gb = torch.autograd.grad(b["y"].pow(2).sum(), list(theirs.parameters()))
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_single_step_matches_torchrl(kind):
    ours, theirs = pair(kind, 2)
    td = make_batch(ours, 5, 1, torch.float32, torch.Generator().manual_seed(1))[:, 0]
    a, b = ours(td.clone()), theirs(td.clone())
    for key in ours.out_keys:
        torch.testing.assert_close(a[key], b[key], rtol=1e-6, atol=1e-6)


def test_same_arguments_and_keys():
    import inspect

    for ours, theirs in [(reap_rnn.LSTMModule, trm.LSTMModule), (reap_rnn.GRUModule, trm.GRUModule)]:
        mine = set(inspect.signature(ours).parameters)
        missing = set(inspect.signature(theirs).parameters) - mine - {"batch_first", "python_based"}
        assert not missing, missing
    a, b = pair("lstm", 1)
    assert a.in_keys == b.in_keys and a.out_keys == b.out_keys
