"""Plain reference loops over time, written from the definitions, for the exactness tests.

Each takes tensors of shape ``[*B, T, *F]`` with time at ``time_dim`` and per-step
coefficients (already broadcast to that shape), and walks backwards one step at a time.
"""

from __future__ import annotations

import torch


def _per_step(x, like):
    if isinstance(x, torch.Tensor):
        return x.expand(like.shape)
    return torch.full_like(like, float(x))


def gae(gamma, lmbda, value, next_value, reward, done, terminated=None, time_dim=-2):
    terminated = done if terminated is None else terminated
    done = done.bool() | terminated.bool()
    gamma, lmbda = _per_step(gamma, reward), _per_step(lmbda, reward)
    dims = [reward.ndim + time_dim if time_dim < 0 else time_dim]
    moved = [
        t.movedim(dims[0], 0)
        for t in (gamma, lmbda, value, next_value, reward, done, terminated.bool())
    ]
    g, lm, v, nv, r, d, term = moved
    adv = torch.zeros_like(r)
    running = torch.zeros_like(r[0])
    for t in reversed(range(r.shape[0])):
        bootstrap = torch.where(term[t], torch.zeros_like(nv[t]), nv[t])
        delta = r[t] + g[t] * bootstrap - v[t]
        running = delta + g[t] * lm[t] * torch.where(d[t], torch.zeros_like(running), running)
        adv[t] = running
    adv = adv.movedim(0, dims[0])
    return adv, adv + value


def td_lambda(gamma, lmbda, next_value, reward, done, terminated=None, time_dim=-2):
    terminated = done if terminated is None else terminated
    done = done.bool() | terminated.bool()
    gamma, lmbda = _per_step(gamma, reward), _per_step(lmbda, reward)
    dim = reward.ndim + time_dim if time_dim < 0 else time_dim
    g, lm, nv, r, d, term = (
        t.movedim(dim, 0) for t in (gamma, lmbda, next_value, reward, done, terminated.bool())
    )
    out = torch.zeros_like(r)
    length = r.shape[0]
    later = None
    for t in reversed(range(length)):
        bootstrap = torch.where(term[t], torch.zeros_like(nv[t]), nv[t])
        if t == length - 1:
            ret = r[t] + g[t] * bootstrap
        else:
            blended = (1 - lm[t]) * bootstrap + lm[t] * later
            ret = r[t] + g[t] * torch.where(d[t], bootstrap, blended)
        out[t] = ret
        later = ret
    return out.movedim(0, dim)


def td_lambda_fixed_gamma(gamma, lmbda, next_value, reward, done, terminated=None, time_dim=-2):
    """``rolling_gamma=False``: the return at step k uses gamma[k] and lmbda[k] for every later step."""
    dim = reward.ndim + time_dim if time_dim < 0 else time_dim
    gamma, lmbda = _per_step(gamma, reward), _per_step(lmbda, reward)
    length = reward.shape[dim]
    pieces = []
    for k in range(length):

        def tail(x, k=k):
            return x.expand(reward.shape).narrow(dim, k, length - k)

        def fixed(x, k=k):
            return x.narrow(dim, k, 1).expand_as(x).narrow(dim, k, length - k)

        ret = td_lambda(
            fixed(gamma),
            fixed(lmbda),
            tail(next_value),
            tail(reward),
            tail(done),
            tail(terminated if terminated is not None else done),
            time_dim=dim,
        )
        pieces.append(ret.narrow(dim, 0, 1))
    return torch.cat(pieces, dim)


def vtrace(gamma, log_pi, log_mu, value, next_value, reward, done, terminated, rho_thresh=1.0, c_thresh=1.0):
    """V-trace targets and advantages, time at -2, walking backwards one step at a time."""
    rho = (log_pi - log_mu).exp()
    crho, cc = rho.clamp(max=rho_thresh), rho.clamp(max=c_thresh)
    going_on, alive = (~done.bool()).to(value.dtype), (~terminated.bool()).to(value.dtype)
    vs = torch.zeros_like(value)
    acc = torch.zeros_like(value[..., 0, :])
    for t in reversed(range(value.shape[-2])):
        delta = crho[..., t, :] * (reward[..., t, :] + gamma * alive[..., t, :] * next_value[..., t, :] - value[..., t, :])
        acc = delta + gamma * going_on[..., t, :] * cc[..., t, :] * acc
        vs[..., t, :] = acc + value[..., t, :]
    later = torch.where(done.bool(), next_value, torch.cat([vs[..., 1:, :], next_value[..., -1:, :]], -2))
    return crho * (reward + gamma * alive * later - value), vs


def td0(gamma, next_value, reward, terminated):
    return reward + gamma * torch.where(terminated.bool(), torch.zeros_like(next_value), next_value)


def make_batch(shape, *, dtype=torch.float32, seed=0, p_done=0.2, time_dim=-2):
    """Random values, rewards and flags with dones, truncations and terminations scattered,
    plus a done at the first and at the last step of every trajectory row."""
    gen = torch.Generator().manual_seed(seed)
    value = torch.randn(shape, generator=gen, dtype=dtype)
    next_value = torch.randn(shape, generator=gen, dtype=dtype)
    reward = torch.randn(shape, generator=gen, dtype=dtype)
    done = torch.rand(shape, generator=gen) < p_done
    terminated = done & (torch.rand(shape, generator=gen) < 0.5)
    length = shape[time_dim]
    done.narrow(time_dim, 0, 1).fill_(True)
    done.narrow(time_dim, length - 1, 1).fill_(True)
    return value, next_value, reward, done, terminated
