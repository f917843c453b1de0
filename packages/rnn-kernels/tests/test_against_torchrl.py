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
    """TorchRL's parameters in its order and with its defaults; reap's recurrent_compute_dtype
    defaults to None (the input's dtype), TorchRL's to float32 (ignored by its pad/scan)."""
    import inspect

    pairs = [(reap_rnn.LSTMModule, trm.LSTMModule), (reap_rnn.GRUModule, trm.GRUModule),
             (reap_rnn.LSTM, trm.LSTM), (reap_rnn.GRU, trm.GRU)]
    for ours, theirs in pairs:
        mine = inspect.signature(ours).parameters
        for name, param in inspect.signature(theirs).parameters.items():
            assert mine[name].kind == param.kind, (ours, name)
            if name != "recurrent_compute_dtype":
                assert mine[name].default == param.default, (ours, name)
        positional = [n for n, p in inspect.signature(theirs).parameters.items() if p.kind == p.POSITIONAL_OR_KEYWORD]
        assert [n for n, p in mine.items() if p.kind == p.POSITIONAL_OR_KEYWORD] == positional
    a, b = pair("lstm", 1)
    assert a.in_keys == b.in_keys and a.out_keys == b.out_keys
    assert a.canonical_keys == b.canonical_keys
    assert a.DEFAULT_IN_KEYS == b.DEFAULT_IN_KEYS and a.DEFAULT_OUT_KEYS == b.DEFAULT_OUT_KEYS


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_python_based_and_keyword_call_match_torchrl(kind):
    torch.manual_seed(0)
    keys = {"in_keys": ["obs", "h0", "h1"], "out_keys": ["y", ("next", "h0"), ("next", "h1")]} if kind == "lstm" \
        else {"in_keys": ["obs", "h0"], "out_keys": ["y", ("next", "h0")]}
    cls = (reap_rnn.LSTMModule, trm.LSTMModule) if kind == "lstm" else (reap_rnn.GRUModule, trm.GRUModule)
    ours = cls[0](3, 6, 2, python_based=True, default_recurrent_mode=True, **keys)
    theirs = cls[1](3, 6, 2, python_based=True, default_recurrent_mode=True, **keys)
    theirs.load_state_dict(ours.state_dict())
    assert isinstance(ours._rnn, getattr(reap_rnn, kind.upper()))
    x, is_init = torch.randn(4, 9, 3), torch.zeros(4, 9, dtype=torch.bool)
    a, b = ours(obs=x, is_init=is_init), theirs(obs=x, is_init=is_init)
    torch.testing.assert_close(a[0], b[0], rtol=1e-5, atol=1e-6)
    for x_, y_ in zip(a[1:], b[1:]):  # TorchRL writes the state only at the last step
        torch.testing.assert_close(x_[:, -1], y_[:, -1], rtol=1e-5, atol=1e-6)
    ours.make_cudnn_based()
    theirs.make_cudnn_based()
    torch.testing.assert_close(ours(obs=x, is_init=is_init)[0], theirs(obs=x, is_init=is_init)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_layers_and_cells_match_torchrl(kind, batch_first):
    torch.manual_seed(0)
    name = kind.upper()
    ours = getattr(reap_rnn, name)(3, 5, 2, batch_first=batch_first)
    theirs = getattr(trm, name)(3, 5, 2, batch_first=batch_first)
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(4, 6, 3) if batch_first else torch.randn(6, 4, 3)
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[1, 3:] = False
    mask = mask if batch_first else mask.t()
    for kwargs in ({}, {"mask": mask}):
        for a, b in zip(ours(x, **kwargs), theirs(x, **kwargs)):
            torch.testing.assert_close(a, b)
    cell, their_cell = getattr(reap_rnn, f"{name}Cell")(3, 5), getattr(trm, f"{name}Cell")(3, 5)
    their_cell.load_state_dict(cell.state_dict())
    torch.testing.assert_close(cell(x[0]), their_cell(x[0]))


def test_canonicalize_and_precision_match_torchrl(monkeypatch):
    from tensordict import TensorDict

    from reap_rnn import precision

    lstm, gru = reap_rnn.LSTMModule(input_size=3, hidden_size=4, in_key="obs", out_key="a"), \
        reap_rnn.GRUModule(input_size=3, hidden_size=4, in_key="obs", out_key="c")
    reward = torch.randn(2, 5, 1)
    td = TensorDict({"obs": torch.randn(5, 2, 3).transpose(0, 1), "reward": reward}, [2, 5])
    for out in (reap_rnn.canonicalize_rnn_subset(td, [lstm, gru]), trm.canonicalize_rnn_subset(td, [lstm, gru])):
        assert out["obs"].is_contiguous() and out["reward"].data_ptr() == reward.data_ptr()
        torch.testing.assert_close(out["obs"], td["obs"])
    monkeypatch.setattr(precision, "_global", None)
    for mode in ("ieee", "tf32", "tf32x3", "fast", "high-prec"):
        reap_rnn.set_recurrent_matmul_precision(mode)
        trm.set_recurrent_matmul_precision(mode)
        assert reap_rnn.get_recurrent_matmul_precision() == trm.get_recurrent_matmul_precision()
    trm.set_recurrent_matmul_precision(None)
