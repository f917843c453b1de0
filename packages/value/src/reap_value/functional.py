"""Functional advantage and return estimators with TorchRL's names, arguments and shapes.

Inputs have shape ``[*B, T, *F]`` with time at ``time_dim`` (``-2`` by default, so
``[*B, T, 1]`` for scalar rewards). ``done`` ends a trajectory: nothing accumulates across it.
``terminated`` zeroes the bootstrap value; a step that is done but not terminated (a
truncation) bootstraps from ``next_state_value``. ``terminated`` defaults to ``done``, and a
terminated step counts as done. Every output has the shape of the inputs.

``gamma`` and ``lmbda`` are numbers (the fast path) or tensors broadcastable to the inputs'
shape, for example one value per step (the general path); both are exact. The ``vec_`` names
and the plain names run the same log-depth scan (see :mod:`reap_value._scan`): the plain names
exist so that TorchRL code keeps working.

Examples:
    >>> import torch
    >>> from reap_value.functional import vec_generalized_advantage_estimate
    >>> value = torch.zeros(1, 3, 1)
    >>> reward = torch.ones(1, 3, 1)
    >>> done = torch.tensor([False, True, False]).reshape(1, 3, 1)
    >>> adv, target = vec_generalized_advantage_estimate(0.5, 1.0, value, value, reward, done)
    >>> adv.flatten()
    tensor([1.5000, 1.0000, 1.0000])
"""

from __future__ import annotations

import warnings

import torch

from reap.envs.transforms.returns import reward2go
from reap_value._checks import Coefficient, check_coefficient, check_tensors, check_time_dim
from reap_value._scan import reverse_scan, reverse_scan_

__all__ = [
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
    "vtrace_advantage_estimate",
    "reward2go",  # reap-core's, used by Reward2GoTransform
]


# --------------------------------------------------------------------------- shared cores


def _prepare(gamma, lmbda, time_dim, tensors):
    """Check everything; return (tensors with flags as bool, time index, shape)."""
    checked = check_tensors(tensors)
    any_tensor = next(iter(checked.values()))
    shape = any_tensor.shape
    dim = check_time_dim(time_dim, len(shape))
    check_coefficient("gamma", gamma, shape)
    if lmbda is not None:
        check_coefficient("lmbda", lmbda, shape)
    if "terminated" in checked and checked["terminated"] is not checked["done"]:
        # A terminated step always ends its trajectory.
        checked["done"] = checked["done"] | checked["terminated"]
    else:
        checked["terminated"] = checked["done"]
    return checked, dim, shape


def _float_not(flag: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``1 - flag`` as ``dtype``. Going through uint8 is several times faster on CPU than
    converting or masking with a bool tensor directly."""
    return (~flag).view(torch.uint8).to(dtype)


def _discounts(gamma, lmbda, done, dtype):
    """``gamma * lmbda`` where the trajectory goes on and 0 where it is done, in ``dtype``."""
    continues = _float_not(done, dtype)
    if isinstance(gamma, torch.Tensor) or isinstance(lmbda, torch.Tensor):
        # General path: per-step (or otherwise broadcast) coefficients.
        return continues * (gamma * lmbda)
    # Fast path: one number.
    return continues.mul_(gamma * lmbda)


def _bootstrap(next_state_value, terminated):
    """The next value where the episode goes on, 0 where it is terminated."""
    return next_state_value * _float_not(terminated, next_state_value.dtype)


def _gae(gamma, lmbda, state_value, next_state_value, reward, done, terminated, dim):
    bootstrap = _bootstrap(next_state_value, terminated)
    # delta[t] = r[t] + gamma * (1 - terminated[t]) * V(s[t+1]) - V(s[t])
    if isinstance(gamma, torch.Tensor):
        delta = reward + gamma * bootstrap
    else:
        delta = torch.add(reward, bootstrap, alpha=gamma)
    delta = delta - state_value
    coef = _discounts(gamma, lmbda, done, delta.dtype)
    advantage = reverse_scan_(coef, delta, dim=dim)
    return advantage, advantage + state_value


def _td_lambda(gamma, lmbda, next_state_value, reward, done, terminated, dim):
    """G[t] = r[t] + gamma[t] * ((1 - lmbda nd[t]) V'[t] + lmbda nd[t] G[t+1]).

    ``V'`` is the bootstrap (zero where terminated) and ``nd`` is "not done", forced to zero at
    the last step, where the return bootstraps from ``V'`` alone.
    """
    length = done.shape[dim]
    bootstrap = _bootstrap(next_state_value, terminated)
    if isinstance(gamma, torch.Tensor):
        base = reward + gamma * bootstrap
    else:
        base = torch.add(reward, bootstrap, alpha=gamma)
    coef = _discounts(gamma, lmbda, done, base.dtype)
    if length:
        coef.narrow(dim, length - 1, 1).fill_(0.0)
    # gamma * (1 - lmbda * nd) * V' = gamma * V' - coef * V'
    base = torch.addcmul(base, coef, bootstrap, value=-1.0)
    return reverse_scan_(coef, base, dim=dim)


def _td_lambda_fixed_gamma(gamma, lmbda, next_state_value, reward, done, terminated, dim):
    """``rolling_gamma=False``: the return at step k discounts every later step by gamma[k]
    (and mixes by lmbda[k])."""
    shape = reward.shape
    length = shape[dim]

    def at(x, k):
        return x.expand(shape).narrow(dim, k, 1) if isinstance(x, torch.Tensor) else x

    pieces = []
    for k in range(length):
        tail = [x.narrow(dim, k, length - k) for x in (next_state_value, reward, done, terminated)]
        pieces.append(_td_lambda(at(gamma, k), at(lmbda, k), *tail, dim).narrow(dim, 0, 1))
    if not pieces:
        return torch.empty_like(reward)
    return torch.cat(pieces, dim)


_NOT_VECTORIZED = (
    "The vectorized version of TD(lambda) with rolling_gamma=False is currently not available. "
    "To use this feature, use the non-vectorized version of TD(lambda) ({name})."
)
_SPANS_TRAJECTORIES = (
    "When using rolling_gamma=False and vectorized TD(lambda) with time-dependent gamma, make sure "
    "that consecutive trajectories are separated as different batch items (a step follows a "
    "terminated one here); or use the non-vectorized version ({name})."
)


def _is_scalar(x) -> bool:
    return not isinstance(x, torch.Tensor) or x.numel() == 1


def _returns(gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma, time_dim,
             *, vectorized: bool, name: str):
    """TD(lambda) returns with TorchRL's ``rolling_gamma`` rules: the ``vec_`` functions refuse
    ``False`` with tensor coefficients (``NotImplementedError``), the plain ones need a gamma
    (or, for TD(lambda), lmbda) of the inputs' shape for it (``RuntimeError``)."""
    tensors, dim, shape = _prepare(
        gamma,
        lmbda,
        time_dim,
        {
            "next_state_value": next_state_value,
            "reward": reward,
            "done": done,
            "terminated": terminated,
        },
    )
    args = (
        tensors["next_state_value"],
        tensors["reward"],
        tensors["done"],
        tensors["terminated"],
        dim,
    )
    if rolling_gamma is False:
        plain = name.removeprefix("vec_")
        if vectorized and not (_is_scalar(gamma) and _is_scalar(lmbda)):
            term = tensors["terminated"]
            length = shape[dim]
            after = term.narrow(dim, 1, max(length - 1, 0))[term.narrow(dim, 0, max(length - 1, 0))]
            message = _NOT_VECTORIZED if bool(after.all()) else _SPANS_TRAJECTORIES
            raise NotImplementedError(message.format(name=plain))
        if not vectorized:
            per_step = [x for x in (gamma, lmbda if "lambda" in name else None)
                        if isinstance(x, torch.Tensor) and x.shape == shape]
            if not per_step:
                what = "gamma or lambda" if "lambda" in name else "gamma"
                raise RuntimeError(
                    f"{name}: rolling_gamma=False is expected only with time-sensitive {what} "
                    f"values (a tensor of the inputs' shape {tuple(shape)})"
                )
            return _td_lambda_fixed_gamma(gamma, lmbda, *args)
    return _td_lambda(gamma, lmbda, *args)


# --------------------------------------------------------------------------- GAE


def vec_generalized_advantage_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimate; returns ``(advantage, value_target)``.

    ``advantage[t] = delta[t] + gamma * lmbda * (1 - done[t]) * advantage[t + 1]`` with
    ``delta[t] = reward[t] + gamma * (1 - terminated[t]) * next_state_value[t] - state_value[t]``
    and ``value_target = advantage + state_value``. ``gamma`` and ``lmbda`` may be per-step
    tensors, in which case the values at step ``t`` are used there.

    Examples:
        >>> import torch
        >>> v = torch.zeros(2, 4, 1)
        >>> r = torch.ones(2, 4, 1)
        >>> d = torch.zeros(2, 4, 1, dtype=torch.bool)
        >>> adv, target = vec_generalized_advantage_estimate(0.5, 1.0, v, v, r, d)
        >>> adv[0].flatten()
        tensor([1.8750, 1.7500, 1.5000, 1.0000])
        >>> adv.shape == r.shape
        True
    """
    tensors, dim, _ = _prepare(
        gamma,
        lmbda,
        time_dim,
        {
            "state_value": state_value,
            "next_state_value": next_state_value,
            "reward": reward,
            "done": done,
            "terminated": terminated,
        },
    )
    return _gae(
        gamma,
        lmbda,
        tensors["state_value"],
        tensors["next_state_value"],
        tensors["reward"],
        tensors["done"],
        tensors["terminated"],
        dim,
    )


def generalized_advantage_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimate; the same as :func:`vec_generalized_advantage_estimate`.

    Examples:
        >>> import torch
        >>> v = torch.zeros(3, 1)
        >>> adv, target = generalized_advantage_estimate(
        ...     1.0, 1.0, v, v, torch.ones(3, 1), torch.zeros(3, 1, dtype=torch.bool)
        ... )
        >>> adv.flatten()
        tensor([3., 2., 1.])
    """
    return vec_generalized_advantage_estimate(
        gamma, lmbda, state_value, next_state_value, reward, done, terminated, time_dim=time_dim
    )


# --------------------------------------------------------------------------- TD(0)


def td0_return_estimate(
    gamma: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    done: torch.Tensor | None = None,
) -> torch.Tensor:
    """TD(0) return: ``reward + gamma * (1 - terminated) * next_state_value``.

    ``done`` is only used in place of a missing ``terminated`` (with TorchRL's deprecation warning).

    Examples:
        >>> import torch
        >>> td0_return_estimate(
        ...     0.5, torch.full((2, 1), 2.0), torch.ones(2, 1), torch.tensor([[False], [True]])
        ... )
        tensor([[2.],
                [1.]])
    """
    if terminated is None:
        if done is None:
            raise ValueError("td0_return_estimate needs terminated (or done)")
        warnings.warn("done for td0_return_estimate is deprecated. Pass ``terminated`` instead.", stacklevel=2)
        terminated = done
    tensors = check_tensors(
        {"next_state_value": next_state_value, "reward": reward, "terminated": terminated}
    )
    check_coefficient("gamma", gamma, reward.shape)
    bootstrap = tensors["next_state_value"].masked_fill(tensors["terminated"], 0.0)
    return tensors["reward"] + gamma * bootstrap


def td0_advantage_estimate(
    gamma: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> torch.Tensor:
    """TD(0) advantage: the TD(0) return minus ``state_value``.

    Examples:
        >>> import torch
        >>> td0_advantage_estimate(
        ...     0.5, torch.ones(1, 1), torch.full((1, 1), 2.0), torch.ones(1, 1),
        ...     torch.zeros(1, 1, dtype=torch.bool),
        ... )
        tensor([[1.]])
    """
    if terminated is None:
        terminated = done
    if not isinstance(state_value, torch.Tensor) or state_value.shape != reward.shape:
        check_tensors({"reward": reward, "state_value": state_value})
    returns = td0_return_estimate(gamma, next_state_value, reward, terminated)
    return returns - state_value


# --------------------------------------------------------------------------- TD(1)


def vec_td1_return_estimate(
    gamma: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) (Monte-Carlo) return, bootstrapped at truncations and at the last step.

    ``rolling_gamma`` matters only for a ``gamma`` tensor that varies along time: ``True``
    (the default) discounts step ``t`` by ``gamma[t]``; ``False`` discounts every later step
    of the return at ``k`` by ``gamma[k]``. As in TorchRL, this vectorised form refuses
    ``rolling_gamma=False`` with a tensor ``gamma`` (``NotImplementedError``: use
    :func:`td1_return_estimate`), and ignores it with a number.

    Examples:
        >>> import torch
        >>> nv = torch.zeros(3, 1)
        >>> vec_td1_return_estimate(0.5, nv, torch.ones(3, 1), torch.zeros(3, 1, dtype=torch.bool)).flatten()
        tensor([1.7500, 1.5000, 1.0000])
    """
    return _returns(gamma, 1.0, next_state_value, reward, done, terminated, rolling_gamma, time_dim,
                    vectorized=True, name="vec_td1_return_estimate")


def td1_return_estimate(
    gamma: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) return; :func:`vec_td1_return_estimate`, and ``rolling_gamma=False`` computed for a
    ``gamma`` of the inputs' shape (a ``RuntimeError`` for any other, as in TorchRL).

    Examples:
        >>> import torch
        >>> nv = torch.full((2, 1), 4.0)
        >>> td1_return_estimate(0.5, nv, torch.ones(2, 1), torch.zeros(2, 1, dtype=torch.bool)).flatten()
        tensor([2.5000, 3.0000])
    """
    return _returns(gamma, 1.0, next_state_value, reward, done, terminated, rolling_gamma, time_dim,
                    vectorized=False, name="td1_return_estimate")


def vec_td1_advantage_estimate(
    gamma: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) advantage: :func:`vec_td1_return_estimate` minus ``state_value``.

    Examples:
        >>> import torch
        >>> z = torch.zeros(2, 1)
        >>> vec_td1_advantage_estimate(1.0, torch.ones(2, 1), z, torch.ones(2, 1), z.bool()).flatten()
        tensor([1., 0.])
    """
    _check_state_value(state_value, reward)
    returns = vec_td1_return_estimate(
        gamma, next_state_value, reward, done, terminated, rolling_gamma, time_dim
    )
    return returns - state_value


def td1_advantage_estimate(
    gamma: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) advantage: :func:`td1_return_estimate` minus ``state_value``.

    Examples:
        >>> import torch
        >>> z = torch.zeros(2, 1)
        >>> td1_advantage_estimate(1.0, z, z, torch.ones(2, 1), z.bool()).flatten()
        tensor([2., 1.])
    """
    _check_state_value(state_value, reward)
    returns = td1_return_estimate(
        gamma, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim
    )
    return returns - state_value


# --------------------------------------------------------------------------- TD(lambda)


def vec_td_lambda_return_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(lambda) return.

    ``G[t] = reward[t] + gamma * ((1 - lmbda) * V'[t] + lmbda * G[t + 1])`` inside a
    trajectory, ``G[t] = reward[t] + gamma * V'[t]`` where it ends (done) and at the last step,
    with ``V' = (1 - terminated) * next_state_value``. See :func:`vec_td1_return_estimate` for
    ``rolling_gamma``.

    Examples:
        >>> import torch
        >>> nv = torch.tensor([[0.0], [0.0], [4.0]])
        >>> d = torch.zeros(3, 1, dtype=torch.bool)
        >>> vec_td_lambda_return_estimate(0.5, 0.5, nv, torch.ones(3, 1), d).flatten()
        tensor([1.4375, 1.7500, 3.0000])
    """
    return _returns(gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma,
                    time_dim, vectorized=True, name="vec_td_lambda_return_estimate")


def td_lambda_return_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(lambda) return; :func:`vec_td_lambda_return_estimate`, and ``rolling_gamma=False``
    computed for a ``gamma`` or ``lmbda`` of the inputs' shape (a ``RuntimeError`` otherwise, as
    in TorchRL): the return at step ``k`` uses ``gamma[k]`` and ``lmbda[k]`` for every later step.

    Examples:
        >>> import torch
        >>> nv = torch.zeros(2, 1)
        >>> td_lambda_return_estimate(1.0, 0.5, nv, torch.ones(2, 1), nv.bool()).flatten()
        tensor([1.5000, 1.0000])
    """
    return _returns(gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma,
                    time_dim, vectorized=False, name="td_lambda_return_estimate")


def vec_td_lambda_advantage_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(lambda) advantage: :func:`vec_td_lambda_return_estimate` minus ``state_value``.

    Examples:
        >>> import torch
        >>> z = torch.zeros(2, 1)
        >>> vec_td_lambda_advantage_estimate(1.0, 0.5, torch.ones(2, 1), z, torch.ones(2, 1), z.bool()).flatten()
        tensor([0.5000, 0.0000])
    """
    _check_state_value(state_value, reward)
    returns = vec_td_lambda_return_estimate(
        gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim
    )
    return returns - state_value


def td_lambda_advantage_estimate(
    gamma: Coefficient,
    lmbda: Coefficient,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(lambda) advantage: :func:`td_lambda_return_estimate` minus ``state_value``.

    Examples:
        >>> import torch
        >>> z = torch.zeros(1, 1)
        >>> td_lambda_advantage_estimate(0.9, 0.9, z, z, torch.ones(1, 1), z.bool())
        tensor([[1.]])
    """
    _check_state_value(state_value, reward)
    returns = td_lambda_return_estimate(
        gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma, time_dim=time_dim
    )
    return returns - state_value


# --------------------------------------------------------------------------- V-trace


def vtrace_advantage_estimate(
    gamma: Coefficient,
    log_pi: torch.Tensor,
    log_mu: torch.Tensor,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rho_thresh: float | torch.Tensor = 1.0,
    c_thresh: float | torch.Tensor = 1.0,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace (IMPALA) off-policy targets; returns ``(advantage, value_target)``.

    With ``rho = exp(log_pi - log_mu)`` (``log_pi``: the current policy, ``log_mu``: the one
    that collected), ``v_s - V(s_t) = delta_t + gamma (1 - done_t) min(rho_t, c) (v_{s+1} -
    V(s_{t+1}))`` where ``delta_t = min(rho_t, rho_thresh) (r_t + gamma (1 - terminated_t)
    V'(s_t) - V(s_t))``; the advantage is ``min(rho_t, rho_thresh) (r_t + gamma (1 -
    terminated_t) v_{t+1} - V(s_t))``, bootstrapping from ``next_state_value`` at the last
    step and where a trajectory ends.

    Examples:
        >>> import torch
        >>> z = torch.zeros(3, 1)
        >>> adv, vs = vtrace_advantage_estimate(0.5, z, z, z, z, torch.ones(3, 1), z.bool())
        >>> vs.flatten()
        tensor([1.7500, 1.5000, 1.0000])
    """
    tensors, dim, _ = _prepare(
        gamma,
        None,
        time_dim,
        {
            "state_value": state_value,
            "next_state_value": next_state_value,
            "reward": reward,
            "log_pi": log_pi,
            "log_mu": log_mu,
            "done": done,
            "terminated": terminated,
        },
    )
    value, next_value = tensors["state_value"], tensors["next_state_value"]
    done, terminated = tensors["done"], tensors["terminated"]
    rho = (tensors["log_pi"] - tensors["log_mu"]).exp()
    clipped_rho = torch.minimum(rho, torch.as_tensor(rho_thresh, dtype=rho.dtype, device=rho.device))
    clipped_c = torch.minimum(rho, torch.as_tensor(c_thresh, dtype=rho.dtype, device=rho.device))
    bootstrap = _bootstrap(next_value, terminated)
    deltas = clipped_rho * (tensors["reward"] + gamma * bootstrap - value)
    coef = _float_not(done, rho.dtype) * gamma * clipped_c
    vs = reverse_scan(coef, deltas, dim=dim) + value
    length = value.shape[dim]
    if length:  # v_{t+1}: the next step's target, the next value at the last step and at ends
        later = torch.cat([vs.narrow(dim, 1, length - 1), next_value.narrow(dim, length - 1, 1)], dim)
        later = torch.where(done, next_value, later)
    else:
        later = next_value
    advantage = clipped_rho * (tensors["reward"] + gamma * _bootstrap(later, terminated) - value)
    return advantage, vs


def _check_state_value(state_value, reward) -> None:
    check_tensors({"reward": reward, "state_value": state_value})
