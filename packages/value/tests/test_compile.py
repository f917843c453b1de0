"""The vectorised functions trace into one graph (``fullgraph=True``) for fixed shapes.

Dynamo raises on any graph break when ``fullgraph=True``, whatever the backend; the
``eager`` backend keeps the test fast, and ``aot_eager`` also runs AOT autograd's
functionalization over the in-place scan.
"""

from __future__ import annotations

import pytest
import torch
from value_reference import make_batch

import reap_value as rv

SHAPE = (3, 20, 1)


def _cases():
    v, nv, r, d, t = make_batch(SHAPE, seed=11)
    gamma = 0.5 + 0.5 * torch.rand(SHAPE, generator=torch.Generator().manual_seed(1))
    return [
        (rv.vec_generalized_advantage_estimate, (0.99, 0.95, v, nv, r, d, t), {}),
        (rv.vec_generalized_advantage_estimate, (gamma, 0.95, v, nv, r, d, t), {}),
        (rv.generalized_advantage_estimate, (0.99, 0.95, v, nv, r, d), {"time_dim": 1}),
        (rv.td0_return_estimate, (0.99, nv, r, t), {}),
        (rv.td1_return_estimate, (0.99, nv, r, d, t), {}),
        (rv.vec_td1_return_estimate, (0.99, nv, r, d, t), {}),
        (rv.vec_td1_advantage_estimate, (gamma, v, nv, r, d, t), {}),
        (rv.td_lambda_return_estimate, (0.99, 0.9, nv, r, d, t), {}),
        (rv.vec_td_lambda_return_estimate, (0.99, 0.9, nv, r, d, t), {}),
        (rv.vec_td_lambda_return_estimate, (gamma, gamma, nv, r, d), {}),
        (rv.vec_td_lambda_advantage_estimate, (0.99, 0.9, v, nv, r, d, t), {}),
    ]


@pytest.mark.parametrize("case", range(len(_cases())))
def test_fullgraph_compiles(case):
    fn, args, kwargs = _cases()[case]
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(*args, **kwargs), fn(*args, **kwargs))


def test_fullgraph_aot_eager_gae():
    v, nv, r, d, t = make_batch(SHAPE, seed=12)
    torch._dynamo.reset()
    compiled = torch.compile(
        rv.vec_generalized_advantage_estimate, fullgraph=True, backend="aot_eager"
    )
    expected = rv.vec_generalized_advantage_estimate(0.99, 0.95, v, nv, r, d, t)
    torch.testing.assert_close(compiled(0.99, 0.95, v, nv, r, d, t), expected)
