"""Optional cross-check with TorchRL, when it is installed (the bench dependency group).

The main exactness tests compare with the plain loops in ``value_reference``; this file only
confirms that the semantics are TorchRL's. TorchRL computes some paths in float32 even for
float64 inputs, hence the looser tolerances.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from value_reference import make_batch

import reap_value as rv

torchrl_functional = pytest.importorskip("torchrl.objectives.value.functional")
torchrl_value = pytest.importorskip("torchrl.objectives.value")

TOL = {"rtol": 1e-5, "atol": 1e-5}
FUNCTIONS = [
    "generalized_advantage_estimate",
    "vec_generalized_advantage_estimate",
    "td0_return_estimate",
    "td0_advantage_estimate",
    "td1_return_estimate",
    "vec_td1_return_estimate",
    "td1_advantage_estimate",
    "vec_td1_advantage_estimate",
    "td_lambda_return_estimate",
    "vec_td_lambda_return_estimate",
    "td_lambda_advantage_estimate",
    "vec_td_lambda_advantage_estimate",
]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_same_parameters(name):
    ours = inspect.signature(getattr(rv, name)).parameters
    theirs = inspect.signature(getattr(torchrl_functional, name)).parameters
    assert [(p.name, p.kind, p.default) for p in ours.values()] == [
        (p.name, p.kind, p.default) for p in theirs.values()
    ]


@pytest.mark.parametrize("shape", [(3, 17, 1), (2, 1, 1), (2, 3, 9, 2)])
def test_same_values(shape):
    v, nv, r, d, t = make_batch(shape, dtype=torch.float64)
    gamma = 0.5 + 0.5 * torch.rand(shape, dtype=torch.float64)
    cases = [
        ("vec_generalized_advantage_estimate", (0.9, 0.8, v, nv, r, d, t)),
        ("vec_generalized_advantage_estimate", (gamma, 0.8, v, nv, r, d, t)),
        ("generalized_advantage_estimate", (0.9, 0.8, v, nv, r, d, t)),
        ("vec_td_lambda_return_estimate", (0.9, 0.8, nv, r, d, t)),
        ("vec_td_lambda_return_estimate", (gamma, 0.8, nv, r, d, t)),
        ("td_lambda_return_estimate", (gamma, 0.8, nv, r, d, t, False)),
        ("vec_td1_return_estimate", (0.9, nv, r, d)),
        ("td1_return_estimate", (gamma, nv, r, d, t, False)),
        ("vec_td1_advantage_estimate", (0.9, v, nv, r, d, t)),
        ("vec_td_lambda_advantage_estimate", (0.9, 0.7, v, nv, r, d, t)),
        ("td0_return_estimate", (0.9, nv, r, t)),
    ]
    for name, args in cases:
        torch.testing.assert_close(
            getattr(rv, name)(*args), getattr(torchrl_functional, name)(*args), **TOL
        )


@pytest.mark.parametrize("name", ["GAE", "TD0Estimator", "TD1Estimator", "TDLambdaEstimator"])
def test_modules_same_values(name):
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule

    torch.manual_seed(0)
    net = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["obs"], out_keys=["state_value"])
    _, _, r, d, t = make_batch((3, 7, 1), seed=4)
    td = TensorDict(
        {
            "obs": torch.randn(3, 7, 3),
            "next": {"obs": torch.randn(3, 7, 3), "reward": r, "done": d, "terminated": t},
        },
        [3, 7],
    )
    kwargs = {"gamma": 0.9, "value_network": net}
    if name in ("GAE", "TDLambdaEstimator"):
        kwargs["lmbda"] = 0.8
    ours = getattr(rv, name)(**kwargs)(td.clone())
    theirs = getattr(torchrl_value, name)(**kwargs)(td.clone())
    for key in ("advantage", "value_target", "state_value", ("next", "state_value")):
        torch.testing.assert_close(ours[key], theirs[key], **TOL)
