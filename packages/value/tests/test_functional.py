"""The functional estimators against plain loops over time, and their argument checks."""

from __future__ import annotations

import pytest
import torch
import value_reference as ref
from value_reference import make_batch

import reap_value as rv
from reap_value._scan import reverse_scan

SHAPES = [(4, 33, 1), (2, 1, 1), (3, 2, 5, 2), (1, 300, 1), (7, 64, 3)]
DTYPES = [torch.float32, torch.float64]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_terminated", [True, False])
def test_gae_matches_loop(shape, dtype, with_terminated):
    v, nv, r, d, t = make_batch(shape, dtype=dtype)
    t = t if with_terminated else None
    adv, target = rv.vec_generalized_advantage_estimate(0.97, 0.9, v, nv, r, d, t)
    ref_adv, ref_target = ref.gae(0.97, 0.9, v, nv, r, d, t)
    torch.testing.assert_close(adv, ref_adv)
    torch.testing.assert_close(target, ref_target)
    assert adv.shape == r.shape and adv.dtype == dtype
    adv2, target2 = rv.generalized_advantage_estimate(0.97, 0.9, v, nv, r, d, t)
    torch.testing.assert_close(adv2, ref_adv)
    torch.testing.assert_close(target2, ref_target)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_terminated", [True, False])
def test_td_lambda_matches_loop(shape, dtype, with_terminated):
    v, nv, r, d, t = make_batch(shape, dtype=dtype, seed=1)
    t = t if with_terminated else None
    expected = ref.td_lambda(0.95, 0.7, nv, r, d, t)
    for fn in (rv.vec_td_lambda_return_estimate, rv.td_lambda_return_estimate):
        torch.testing.assert_close(fn(0.95, 0.7, nv, r, d, t), expected)
    for fn in (rv.vec_td_lambda_advantage_estimate, rv.td_lambda_advantage_estimate):
        torch.testing.assert_close(fn(0.95, 0.7, v, nv, r, d, t), expected - v)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_td1_matches_loop(shape, dtype):
    v, nv, r, d, t = make_batch(shape, dtype=dtype, seed=2)
    expected = ref.td_lambda(0.9, 1.0, nv, r, d, t)
    for fn in (rv.vec_td1_return_estimate, rv.td1_return_estimate):
        torch.testing.assert_close(fn(0.9, nv, r, d, t), expected)
    for fn in (rv.vec_td1_advantage_estimate, rv.td1_advantage_estimate):
        torch.testing.assert_close(fn(0.9, v, nv, r, d, t), expected - v)


@pytest.mark.parametrize("dtype", DTYPES)
def test_td0_matches_definition(dtype):
    v, nv, r, d, t = make_batch((3, 8, 1), dtype=dtype, seed=3)
    torch.testing.assert_close(rv.td0_return_estimate(0.9, nv, r, t), ref.td0(0.9, nv, r, t))
    # done only stands in for a missing terminated
    with pytest.warns(UserWarning, match="done for td0_return_estimate is deprecated"):
        torch.testing.assert_close(rv.td0_return_estimate(0.9, nv, r, done=d), ref.td0(0.9, nv, r, d))
    torch.testing.assert_close(
        rv.td0_advantage_estimate(0.9, v, nv, r, d, t), ref.td0(0.9, nv, r, t) - v
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(16, 2048, 1), (256, 128, 1)])
def test_long_and_wide_float32_and_float64(shape, dtype):
    """The benchmark shapes, sparse dones, near-1 discounts: error must not grow with T."""
    v, nv, r, d, t = make_batch(shape, dtype=dtype, seed=4, p_done=0.005)
    adv, target = rv.vec_generalized_advantage_estimate(0.99, 0.95, v, nv, r, d, t)
    ref_adv, ref_target = ref.gae(0.99, 0.95, v, nv, r, d, t)
    torch.testing.assert_close(adv, ref_adv)
    torch.testing.assert_close(target, ref_target)
    torch.testing.assert_close(
        rv.vec_td_lambda_return_estimate(0.99, 0.95, nv, r, d, t),
        ref.td_lambda(0.99, 0.95, nv, r, d, t),
    )
    # Undiscounted sums over hundreds of steps: a float32 loop drifts from the exact sums as
    # much as any other float32 order of summation, so compare with the float64 loop here.
    exact = ref.td_lambda(1.0, 1.0, nv.double(), r.double(), d, t).to(dtype)
    torch.testing.assert_close(rv.vec_td1_return_estimate(1.0, nv, r, d, t), exact)


@pytest.mark.parametrize("dtype", DTYPES)
def test_per_step_gamma_and_lambda(dtype):
    shape = (3, 40, 2)
    v, nv, r, d, t = make_batch(shape, dtype=dtype, seed=5)
    gen = torch.Generator().manual_seed(0)
    gamma = 0.5 + 0.5 * torch.rand(shape, generator=gen, dtype=dtype)
    lmbda = torch.rand(shape, generator=gen, dtype=dtype)
    adv, target = rv.vec_generalized_advantage_estimate(gamma, lmbda, v, nv, r, d, t)
    ref_adv, ref_target = ref.gae(gamma, lmbda, v, nv, r, d, t)
    torch.testing.assert_close(adv, ref_adv)
    torch.testing.assert_close(target, ref_target)
    torch.testing.assert_close(
        rv.vec_td_lambda_return_estimate(gamma, lmbda, nv, r, d, t),
        ref.td_lambda(gamma, lmbda, nv, r, d, t),
    )
    torch.testing.assert_close(
        rv.vec_td1_return_estimate(gamma, nv, r, d, t), ref.td_lambda(gamma, 1.0, nv, r, d, t)
    )
    # a tensor that broadcasts (one gamma per batch row) and a 0-dim tensor
    row_gamma = gamma[:, :1, :1]
    torch.testing.assert_close(
        rv.vec_td_lambda_return_estimate(row_gamma, 0.8, nv, r, d, t),
        ref.td_lambda(row_gamma, 0.8, nv, r, d, t),
    )
    scalar = torch.tensor(0.9, dtype=dtype)
    torch.testing.assert_close(
        rv.vec_generalized_advantage_estimate(scalar, scalar, v, nv, r, d, t)[0],
        ref.gae(0.9, 0.9, v, nv, r, d, t)[0],
    )


def test_rolling_gamma_false():
    shape = (2, 12, 1)
    _, nv, r, d, t = make_batch(shape, dtype=torch.float64, seed=6)
    gen = torch.Generator().manual_seed(1)
    gamma = 0.5 + 0.5 * torch.rand(shape, dtype=torch.float64, generator=gen)
    lmbda = torch.rand(shape, dtype=torch.float64, generator=gen)
    for g, lm in [(gamma, 0.6), (gamma, lmbda), (0.9, lmbda)]:
        torch.testing.assert_close(rv.td_lambda_return_estimate(g, lm, nv, r, d, t, False),
                                   ref.td_lambda_fixed_gamma(g, lm, nv, r, d, t))
    torch.testing.assert_close(rv.td1_return_estimate(gamma, nv, r, d, t, False),
                               ref.td_lambda_fixed_gamma(gamma, 1.0, nv, r, d, t))
    # the vectorised forms ignore the flag with numbers, as TorchRL's
    torch.testing.assert_close(rv.vec_td_lambda_return_estimate(0.9, 0.6, nv, r, d, t, False),
                               rv.vec_td_lambda_return_estimate(0.9, 0.6, nv, r, d, t))


def test_rolling_gamma_false_refusals():
    """TorchRL's cases: a plain function needs a per-step coefficient, a vec_ one refuses tensors."""
    shape = (2, 12, 1)
    _, nv, r, d, t = make_batch(shape, seed=6)
    gamma = torch.full(shape, 0.9)
    with pytest.raises(RuntimeError, match="rolling_gamma=False is expected only with time-sensitive gamma or lambda"):
        rv.td_lambda_return_estimate(0.9, torch.tensor(0.6), nv, r, d, t, False)
    with pytest.raises(RuntimeError, match="rolling_gamma=False is expected only with time-sensitive gamma values"):
        rv.td1_advantage_estimate(gamma[:, :1], nv, nv, r, d, t, False)  # one gamma per row
    ended = torch.zeros_like(t)
    ended[:, 3] = True
    with pytest.raises(NotImplementedError, match="When using rolling_gamma=False"):
        rv.vec_td_lambda_return_estimate(gamma, 0.6, nv, r, d | ended, ended, False)  # steps follow a termination
    ended[:, 3:] = True
    with pytest.raises(NotImplementedError, match="The vectorized version of TD"):
        rv.vec_td1_advantage_estimate(gamma, nv, nv, r, d, ended, False)


def test_vtrace_matches_loop():
    v, nv, r, d, t = make_batch((3, 20, 2), dtype=torch.float64, seed=9)
    gen = torch.Generator().manual_seed(2)
    log_pi, log_mu = (0.5 * torch.randn(3, 20, 2, dtype=torch.float64, generator=gen) for _ in range(2))
    for kwargs in ({}, {"rho_thresh": 0.7, "c_thresh": 1.3}):
        adv, vs = rv.vtrace_advantage_estimate(0.9, log_pi, log_mu, v, nv, r, d, t, **kwargs)
        ref_adv, ref_vs = ref.vtrace(0.9, log_pi, log_mu, v, nv, r, d, t, **kwargs)
        torch.testing.assert_close(adv, ref_adv)
        torch.testing.assert_close(vs, ref_vs)
    moved = [x.transpose(0, 1) for x in (log_pi, log_mu, v, nv, r, d, t)]
    adv, vs = rv.vtrace_advantage_estimate(0.9, *moved, time_dim=0)
    torch.testing.assert_close(adv.transpose(0, 1), ref.vtrace(0.9, log_pi, log_mu, v, nv, r, d, t)[0])


@pytest.mark.parametrize("time_dim", [0, 1, -3, 2, -1])
def test_time_dim(time_dim):
    shape = (5, 6, 7)
    v, nv, r, d, t = make_batch(shape, dtype=torch.float64, seed=7, time_dim=time_dim)
    adv, _ = rv.vec_generalized_advantage_estimate(0.9, 0.8, v, nv, r, d, t, time_dim=time_dim)
    torch.testing.assert_close(adv, ref.gae(0.9, 0.8, v, nv, r, d, t, time_dim=time_dim)[0])
    ret = rv.vec_td_lambda_return_estimate(0.9, 0.8, nv, r, d, t, time_dim=time_dim)
    torch.testing.assert_close(ret, ref.td_lambda(0.9, 0.8, nv, r, d, t, time_dim=time_dim))


def test_semantics_by_hand():
    """done stops accumulation; truncation bootstraps; termination does not."""
    value = torch.zeros(1, 3, 1)
    next_value = torch.full((1, 3, 1), 10.0)
    reward = torch.ones(1, 3, 1)
    done = torch.tensor([False, True, True]).reshape(1, 3, 1)
    terminated = torch.tensor([False, False, True]).reshape(1, 3, 1)
    adv, _ = rv.vec_generalized_advantage_estimate(
        0.5, 1.0, value, next_value, reward, done, terminated
    )
    # step 2: terminated -> 1; step 1: truncated -> 1 + 0.5 * 10 = 6;
    # step 0: 1 + 0.5 * 10 - 0 + 0.5 * 6 = 9
    assert adv.flatten().tolist() == [9.0, 6.0, 1.0]
    ret = rv.vec_td1_return_estimate(0.5, next_value, reward, done, terminated)
    # step 0: 1 + 0.5 * G1 = 1 + 0.5 * 6 = 4
    assert ret.flatten().tolist() == [4.0, 6.0, 1.0]


def test_float_flags_and_empty_time():
    v, nv, r, d, t = make_batch((2, 5, 1), dtype=torch.float64)
    adv_bool, _ = rv.vec_generalized_advantage_estimate(0.9, 0.9, v, nv, r, d, t)
    adv_float, _ = rv.vec_generalized_advantage_estimate(0.9, 0.9, v, nv, r, d.double(), t.float())
    torch.testing.assert_close(adv_bool, adv_float)
    empty = torch.zeros(2, 0, 1)
    adv, target = rv.vec_generalized_advantage_estimate(0.9, 0.9, empty, empty, empty, empty.bool())
    assert adv.shape == (2, 0, 1)
    assert rv.vec_td_lambda_return_estimate(0.9, 0.9, empty, empty, empty.bool()).shape == (2, 0, 1)


def test_inputs_are_not_modified():
    v, nv, r, d, t = make_batch((2, 9, 1))
    copies = [x.clone() for x in (v, nv, r, d, t)]
    rv.vec_generalized_advantage_estimate(0.9, 0.9, v, nv, r, d, t)
    rv.vec_td_lambda_advantage_estimate(0.9, 0.9, v, nv, r, d, t)
    for x, y in zip((v, nv, r, d, t), copies):
        assert torch.equal(x, y)


def test_gradients_flow_and_match_loop():
    v, nv, r, d, t = make_batch((2, 17, 1), dtype=torch.float64, seed=8)
    ours = [x.clone().requires_grad_() for x in (v, nv, r)]
    theirs = [x.clone().requires_grad_() for x in (v, nv, r)]
    adv, target = rv.vec_generalized_advantage_estimate(0.9, 0.8, *ours, d, t)
    (adv.square().sum() + target.sum()).backward()
    radv, rtarget = ref.gae(0.9, 0.8, *theirs, d, t)
    (radv.square().sum() + rtarget.sum()).backward()
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.grad, b.grad)


def test_reverse_scan_broadcasts_and_copies():
    a = torch.tensor(0.5)
    b = torch.ones(4)
    out = reverse_scan(a, b, dim=0)
    torch.testing.assert_close(out, torch.tensor([1.875, 1.75, 1.5, 1.0]))
    assert b.tolist() == [1.0] * 4


# ------------------------------------------------------------------------------- errors


def _args(shape=(2, 4, 1)):
    v, nv, r, d, t = make_batch(shape)
    return v, nv, r, d, t


def test_shape_mismatch_names_argument():
    v, nv, r, d, t = _args()
    with pytest.raises(ValueError, match="reward has shape"):
        rv.vec_generalized_advantage_estimate(0.9, 0.9, v, nv, r[:, :3], d, t)
    with pytest.raises(ValueError, match="terminated has shape"):
        rv.vec_td_lambda_return_estimate(0.9, 0.9, nv, r, d, t[:1])
    with pytest.raises(ValueError, match="state_value has shape"):
        rv.vec_td1_advantage_estimate(0.9, v[:1], nv, r, d, t)


@pytest.mark.parametrize("time_dim", [3, -4, 10])
def test_time_dim_out_of_range(time_dim):
    v, nv, r, d, t = _args()
    with pytest.raises(ValueError, match="time_dim"):
        rv.vec_generalized_advantage_estimate(0.9, 0.9, v, nv, r, d, t, time_dim=time_dim)
    with pytest.raises(ValueError, match="time_dim"):
        rv.vec_td_lambda_return_estimate(0.9, 0.9, nv, r, d, t, time_dim=time_dim)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_coefficients_out_of_range(bad):
    v, nv, r, d, t = _args()
    with pytest.raises(ValueError, match="lmbda must lie in"):
        rv.vec_generalized_advantage_estimate(0.9, bad, v, nv, r, d, t)
    with pytest.raises(ValueError, match="gamma must lie in"):
        rv.vec_td1_return_estimate(bad, nv, r, d, t)
    with pytest.raises(ValueError, match="lmbda must lie in"):
        rv.vec_td_lambda_return_estimate(0.9, torch.full_like(r, bad), nv, r, d, t)


def test_bad_types():
    v, nv, r, d, t = _args()
    with pytest.raises(TypeError, match="gamma must be"):
        rv.vec_generalized_advantage_estimate("0.9", 0.9, v, nv, r, d, t)
    with pytest.raises(TypeError, match="reward must be a floating-point tensor"):
        rv.vec_generalized_advantage_estimate(0.9, 0.9, v, nv, r.long(), d, t)
    with pytest.raises(TypeError, match="next_state_value must be a torch.Tensor"):
        rv.vec_td_lambda_return_estimate(0.9, 0.9, nv.tolist(), r, d, t)
    with pytest.raises(ValueError, match="gamma of shape"):
        rv.vec_td_lambda_return_estimate(torch.rand(5, 4, 1), 0.9, nv, r, d, t)
    with pytest.raises(ValueError, match="time dimension"):
        rv.vec_td1_return_estimate(0.9, torch.tensor(1.0), torch.tensor(1.0), torch.tensor(True))
    with pytest.raises(ValueError, match="terminated"):
        rv.td0_return_estimate(0.9, nv, r)


@pytest.mark.parametrize("shape", [(9,), (2, 9, 1), (3, 9, 2)])
def test_reward2go_matches_loop(shape):
    generator = torch.Generator().manual_seed(5)
    reward = torch.randn(shape, generator=generator, dtype=torch.float64)
    done = torch.rand(shape, generator=generator) < 0.25
    before = done.clone()
    out = rv.reward2go(reward, done, 0.9)
    assert torch.equal(done, before)  # the input is left as it was
    time_first = (reward.unsqueeze(-1), done.unsqueeze(-1)) if reward.ndim == 1 else (
        reward.movedim(-2, 0), done.movedim(-2, 0))
    expected = torch.zeros_like(time_first[0])
    running = torch.zeros_like(time_first[0][0])
    for t in reversed(range(time_first[0].shape[0])):
        running = time_first[0][t] + 0.9 * running * ~time_first[1][t]
        expected[t] = running
    expected = expected.squeeze(-1) if reward.ndim == 1 else expected.movedim(0, -2)
    torch.testing.assert_close(out, expected)
