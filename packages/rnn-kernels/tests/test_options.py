"""Options: recompute saves less, bad arguments and unsupported combinations are clear errors,
``auto`` picks its backend by device and compile mode, the plugin registers everything, docstring examples run."""

from __future__ import annotations

import doctest
import importlib
import importlib.util

import pytest
import torch
from rnn_reference import make_batch

import reap_rnn
from reap_rnn import GRUModule, LSTMModule, set_recurrent_mode


def saved_for_backward(module, td):
    """Number and bytes of the tensors autograd keeps for backward of one recurrent forward."""
    count, nbytes = 0, 0

    def pack(t):
        nonlocal count, nbytes
        count += 1
        nbytes += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), set_recurrent_mode(True):
        out = module(td)
    return count, nbytes, out


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recompute_full_saves_fewer_tensors(kind):
    cls = LSTMModule if kind == "lstm" else GRUModule
    torch.manual_seed(0)
    none = cls(input_size=4, hidden_size=16, num_layers=2, in_key="x", out_key="y", recurrent_backend="scan")
    full = cls(input_size=4, hidden_size=16, num_layers=2, in_key="x", out_key="y", recurrent_backend="scan",
               recurrent_recompute="full")
    full.load_state_dict(none.state_dict())
    td = make_batch(none, 8, 32, torch.float32, torch.Generator().manual_seed(0))
    n_none, b_none, _ = saved_for_backward(none, td.clone())
    n_full, b_full, _ = saved_for_backward(full, td.clone())
    assert n_full < n_none
    assert b_full < 0.7 * b_none


def test_bad_arguments_name_the_argument():
    kw = {"input_size": 3, "hidden_size": 4, "in_key": "x", "out_key": "y"}
    with pytest.raises(ValueError, match="recurrent_backend must be one of"):
        LSTMModule(**kw, recurrent_backend="cudnn")
    with pytest.raises(ValueError, match="recurrent_recompute must be one of"):
        LSTMModule(**kw, recurrent_recompute="some")
    with pytest.raises(ValueError, match="recurrent_matmul_precision must be one of"):
        GRUModule(**kw, recurrent_matmul_precision="bf16")
    with pytest.raises(ValueError, match="bidirectional=True is not supported"):
        LSTMModule(**kw, bidirectional=True)
    with pytest.raises(ValueError, match="'scan' does not support proj_size; use recurrent_backend='pad'"):
        LSTMModule(**kw, proj_size=2, recurrent_backend="scan")
    with pytest.raises(ValueError, match="'pad' does not support recurrent_compute_dtype"):
        LSTMModule(**kw, recurrent_compute_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="pass exactly one of in_key and in_keys"):
        LSTMModule(input_size=3, hidden_size=4, out_key="y")
    with pytest.raises(ValueError, match="in_keys must be"):
        LSTMModule(input_size=3, hidden_size=4, in_keys=["x", "h"], out_key="y")
    with pytest.raises(ValueError, match="not both"):
        GRUModule(input_size=3, hidden_size=4, in_key="x", out_key="y", gru=torch.nn.GRU(3, 4, batch_first=True))
    with pytest.raises(ValueError, match="batch_first=True"):
        GRUModule(in_key="x", out_key="y", gru=torch.nn.GRU(3, 4))
    with pytest.raises(ValueError, match="recurrent_recompute='full'"):
        GRUModule(**kw, recurrent_backend="auto", recurrent_recompute="full")
    with pytest.raises(ValueError, match="batch_first=False is not supported"):
        LSTMModule(**kw, batch_first=False)
    with pytest.raises(ValueError, match="python_based=True does not support proj_size"):
        LSTMModule(**kw, proj_size=2, python_based=True)
    with pytest.raises(TypeError):  # a string is not a list of keys (TorchRL's error too)
        GRUModule(input_size=3, hidden_size=4, in_keys="xh", out_key="y")
    with pytest.raises(RuntimeError, match="temporal_mode is deprecated"):
        _ = GRUModule(**kw).temporal_mode
    with pytest.raises(NotImplementedError, match="Bidirectional LSTMs are not supported"):
        reap_rnn.LSTM(3, 4, bidirectional=True)
    with pytest.raises(ValueError, match="recurrent matmul precision"):
        reap_rnn.set_recurrent_matmul_precision("fp16")


def test_missing_is_init_names_init_tracker():
    from tensordict import TensorDict

    module = GRUModule(input_size=3, hidden_size=4, in_key="x", out_key="y")
    with pytest.raises(KeyError, match="InitTracker"):
        module(TensorDict(x=torch.randn(2, 3), batch_size=[2]))


def test_wraps_an_existing_rnn_and_keeps_its_weights():
    lstm = torch.nn.LSTM(3, 4, 2, batch_first=True)
    module = LSTMModule(lstm=lstm, in_key="x", out_key="y")
    assert module.lstm is lstm
    assert module.out_keys == ["y", ("next", "recurrent_state_h"), ("next", "recurrent_state_c")]


def test_default_recurrent_mode_and_context_manager():
    module = GRUModule(input_size=3, hidden_size=4, in_key="x", out_key="y", default_recurrent_mode=True)
    assert module.recurrent_mode is True
    with set_recurrent_mode(False):
        assert module.recurrent_mode is False
    assert module.recurrent_mode is True
    with pytest.raises(RuntimeError, match="context manager"):
        module.set_recurrent_mode(True)
    with pytest.raises(ValueError, match="'recurrent' or 'sequential'"):
        set_recurrent_mode("train")
    with set_recurrent_mode("Recurrent").clone():
        assert module.recurrent_mode is True


def test_python_based_and_back_keep_the_parameters():
    """python_based wraps reap's LSTM/GRU layer; make_*_based swap the holder, not the weights."""
    from tensordict import TensorDict

    module = LSTMModule(input_size=3, hidden_size=4, num_layers=2, in_key="x", out_key="y", python_based=True)
    assert isinstance(module.lstm, reap_rnn.LSTM)
    params = list(module.parameters())
    td = TensorDict(x=torch.randn(2, 5, 3), is_init=torch.zeros(2, 5, 1, dtype=torch.bool), batch_size=[2, 5])
    with set_recurrent_mode(True):
        ref = module(td.clone())["y"]
        assert type(module.make_cudnn_based().lstm) is torch.nn.LSTM
        torch.testing.assert_close(module(td.clone())["y"], ref)
        assert isinstance(module.make_python_based().lstm, reap_rnn.LSTM)
    assert all(a is b for a, b in zip(params, module.parameters()))


def test_keyword_call_returns_the_out_keys():
    module = GRUModule(3, 4, 1, in_keys=["x", "h"], out_keys=["y", ("next", "h")], default_recurrent_mode=True)
    x, is_init = torch.randn(2, 5, 3), torch.zeros(2, 5, dtype=torch.bool)
    y, h = module(x=x, is_init=is_init)
    assert y.shape == (2, 5, 4) and h.shape == (2, 5, 1, 4)
    with torch.no_grad():
        torch.testing.assert_close(y, module.gru(x)[0])


def test_layers_mask_carries_the_state_over():
    torch.manual_seed(0)
    lstm = reap_rnn.LSTM(3, 5, 2)
    x = torch.randn(2, 6, 3)
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[1, 4:] = False  # row 1 ends after 4 steps
    y, (h, c) = lstm(x, mask=mask)
    y_short, (h_short, c_short) = lstm(x[1:, :4])
    torch.testing.assert_close(h[:, 1:], h_short)
    torch.testing.assert_close(y[1, 4:], y_short[0, -1:].expand(2, 5))
    torch.testing.assert_close(y[:1], lstm(x[:1])[0])


def test_precision_presets_and_getter(monkeypatch):
    from reap_rnn import precision

    monkeypatch.setattr(precision, "_global", None)
    monkeypatch.setattr(precision, "_tensor_cores", lambda: False)  # as without a GPU, also on one
    assert precision.resolve_precision("fast") == precision.resolve_precision("high-prec") == "ieee"
    monkeypatch.setattr(precision, "_tensor_cores", lambda: True)
    assert (precision.resolve_precision("fast"), precision.resolve_precision("high-prec")) == ("tf32", "tf32x3")
    reap_rnn.set_recurrent_matmul_precision("high-prec")
    assert reap_rnn.get_recurrent_matmul_precision() == "tf32x3"
    monkeypatch.setenv("TORCHRL_RNN_PRECISION", "tf32")
    reap_rnn.set_recurrent_matmul_precision("auto")  # back to the default: the environment variable
    assert reap_rnn.get_recurrent_matmul_precision() == "tf32"
    monkeypatch.setenv("TORCHRL_RNN_PRECISION", "fp8")
    with pytest.raises(ValueError, match="TORCHRL_RNN_PRECISION='fp8'"):
        reap_rnn.set_recurrent_matmul_precision(None)


def test_auto_is_triton_on_cuda_pad_elsewhere_scan_under_compile(monkeypatch):
    module = LSTMModule(input_size=3, hidden_size=4, in_key="x", out_key="y", recurrent_backend="auto")
    assert module._backend(torch.device("cpu")).name == "pad"
    assert repr(module).endswith("recurrent_backend='auto' (pad on cpu))")
    has_triton = importlib.util.find_spec("triton") is not None
    assert set(module._kernels) == {"pad", "scan", "triton"} if has_triton else {"pad", "scan"}
    assert module.auto_backend("cuda") == ("triton" if has_triton else "pad")
    wide = LSTMModule(input_size=3, hidden_size=1024, in_key="x", out_key="y", recurrent_backend="auto")
    assert wide.auto_backend("cuda") == "pad"  # pad measured faster there
    monkeypatch.setattr(reap_rnn.modules, "_is_compiling", lambda: True)
    assert module.auto_backend("cuda") == module.auto_backend("cpu") == "scan"


def test_layers_match_torch():
    torch.manual_seed(0)
    for ours, theirs in [(reap_rnn.LSTM(3, 5, 2), torch.nn.LSTM(3, 5, 2, batch_first=True)),
                         (reap_rnn.GRU(3, 5, 2), torch.nn.GRU(3, 5, 2, batch_first=True))]:
        theirs.load_state_dict(ours.state_dict())
        x = torch.randn(4, 6, 3)
        y1, s1 = ours(x)
        y2, s2 = theirs(x)
        torch.testing.assert_close(y1, y2)
        torch.testing.assert_close(s1, s2)


MODULES = ["reap_rnn", "reap_rnn.modules", "reap_rnn.mode", "reap_rnn.precision", "reap_rnn.layers",
           "reap_rnn.plugin", "reap_rnn.testing", "reap_rnn.backends.base", "reap_rnn.backends.pad",
           "reap_rnn.backends.scan", "reap_rnn.backends.loop"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_every_public_object_has_an_example():
    for name in reap_rnn.__all__:
        doc = getattr(reap_rnn, name).__doc__ or ""
        assert "Examples:" in doc and ">>>" in doc, name


def test_plugin_registers_backends_and_exports():
    import reap
    from reap.plugins import get_recurrent_backend, get_registries

    for name in ("pad", "scan", "triton"):
        assert get_recurrent_backend(name).name == name
    exports = get_registries().exports
    for name in reap_rnn.__all__:
        assert exports[name] == f"reap_rnn:{name}"
    assert reap.LSTMModule is reap_rnn.LSTMModule


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_traced_scan_equals_the_hand_written_one(kind):
    """What torch.compile traces (plain ops, autograd's backward) equals the eager Function."""
    from reap_rnn.backends.scan import _GRUScan, _LSTMScan, _traced_layer

    gen = torch.Generator().manual_seed(0)
    T, B, H = 7, 3, 5
    G = 4 if kind == "lstm" else 3
    xw = torch.randn(T, B, G * H, dtype=torch.float64, generator=gen, requires_grad=True)
    h0 = torch.randn(B, H, dtype=torch.float64, generator=gen, requires_grad=True)
    c0 = torch.randn(B, H, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.randn(G * H, H, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(G * H, dtype=torch.float64, generator=gen, requires_grad=True)
    keep = (torch.rand(T, B, generator=gen) > 0.3).double()
    if kind == "lstm":
        ours, inputs = _LSTMScan.apply(xw, h0, c0, keep, w), [xw, h0, c0, w]
        traced = _traced_layer("lstm", xw, h0, c0, keep, w, None)
    else:
        ours, inputs = (_GRUScan.apply(xw, h0, keep, w, b),), [xw, h0, w, b]
        traced = _traced_layer("gru", xw, h0, None, keep, w, b)
    weights = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in ours]
    g1 = torch.autograd.grad(sum((o * v).sum() for o, v in zip(ours, weights)), inputs)
    g2 = torch.autograd.grad(sum((o * v).sum() for o, v in zip(traced, weights)), inputs)
    for a, b_ in zip([*ours, *g1], [*traced, *g2]):
        torch.testing.assert_close(a, b_, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_scan_kernel_compiles_to_one_graph(backend):
    from reap.plugins import get_recurrent_backend
    from reap_rnn.backends.base import RNNSpec, layer_weights

    kernel = get_recurrent_backend("scan").impl
    gru = torch.nn.GRU(3, 4, batch_first=True)
    weights = layer_weights(gru)

    def loss(x, h0, is_init):
        y, _ = kernel(RNNSpec("gru", 1, 4), x, (h0,), is_init, weights, False)
        return y.pow(2).sum()

    x, h0 = torch.randn(2, 3, 3), torch.randn(1, 2, 4)
    is_init = torch.tensor([[False, True, False], [False, False, False]])
    # fullgraph=True fails on any graph break; aot_eager traces through AOTAutograd only,
    # inductor (torch.compile's default, what users get) also lowers the scan and generates code
    compiled = torch.compile(loss, fullgraph=True, backend=backend)
    x.requires_grad_(True)
    got = compiled(x, h0, is_init)
    (grad,) = torch.autograd.grad(got, x)
    x_ref = x.detach().requires_grad_(True)
    want = loss(x_ref, h0, is_init)
    (grad_ref,) = torch.autograd.grad(want, x_ref)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(grad, grad_ref)


@pytest.mark.parametrize("cls", [reap_rnn.LSTM, reap_rnn.GRU])
def test_python_layers_trace_under_dynamo(cls):
    """Like TorchRL's, reap's python-based layers are ``nn.RNNBase`` but not ``nn.LSTM``/``nn.GRU``
    (Dynamo refuses those without ``allow_rnn``): one graph, masked steps included."""
    torch.manual_seed(0)
    layer = cls(3, 4, num_layers=2)
    assert isinstance(layer, torch.nn.RNNBase) and not isinstance(layer, (torch.nn.LSTM, torch.nn.GRU))
    x, mask = torch.randn(2, 5, 3), torch.ones(2, 5, dtype=torch.bool)
    mask[1, 3:] = False
    compiled = torch.compile(lambda x, mask: layer(x, mask=mask), fullgraph=True, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, mask), layer(x, mask=mask))
