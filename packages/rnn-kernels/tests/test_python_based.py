"""``python_based=True`` under ``"pad"``: plain torch ops step by step (TorchRL's python-based
cells), equal to torch.nn run segment by segment, and batched by ``torch.vmap`` over stacked
parameters (an ensemble), which the fused pad path cannot be."""

from __future__ import annotations

import pytest
import torch
from rnn_reference import make_batch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from test_exactness import TOL, assert_close_lists, outputs_and_grads, run_module, run_reference

from reap_rnn import GRUModule, LSTMModule, set_recurrent_mode
from reap_rnn.backends.loop import LoopKernel


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_python_based_pad_matches_torch(kind, layers):
    torch.manual_seed(0)
    cls = LSTMModule if kind == "lstm" else GRUModule
    module = cls(input_size=5, hidden_size=6, num_layers=layers, in_key="obs", out_key="feat",
                 python_based=True).double()
    assert isinstance(module._backend(torch.device("cpu")), LoopKernel)
    td = make_batch(module, 3, 7, torch.float64, torch.Generator().manual_seed(0))
    got, got_grads = outputs_and_grads(module, td, run_module(module, td))
    want, want_grads = outputs_and_grads(module, td, run_reference(module, td))
    assert_close_lists(got + got_grads, want + want_grads, TOL[torch.float64], "python_based")
    assert not isinstance(module.make_cudnn_based()._backend(torch.device("cpu")), LoopKernel)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_vmap_over_an_ensemble_of_parameters(kind):
    torch.manual_seed(0)
    cls = LSTMModule if kind == "lstm" else GRUModule
    rnn = cls(input_size=4, hidden_size=5, in_key="embed", out_key="features", python_based=True)
    model = TensorDictSequential(TensorDictModule(torch.nn.Linear(4, 4), ["observation"], ["embed"]), rnn,
                                 TensorDictModule(torch.nn.Linear(5, 3), ["features"], ["out"]))
    data = TensorDict({"observation": torch.randn(6, 11, 4),
                       "is_init": torch.rand(6, 11, 1, generator=torch.Generator().manual_seed(1)) < 0.2}, [6, 11])
    params = TensorDict.from_module(model)
    ensemble = torch.stack([params.apply(lambda p, i=i: p + 0.1 * i) for i in range(2)])

    def call(data, params):
        with set_recurrent_mode(True), params.to_module(model):
            return model(data.copy())["out"]

    batched = torch.vmap(call, (None, 0))(data, ensemble)
    assert batched.shape == (2, 6, 11, 3)
    for i in range(2):
        torch.testing.assert_close(batched[i], call(data, ensemble[i]))
