"""Side by side with TorchRL, when it is installed (the bench dependency group): the functions'
signatures, values and refusals, and the estimator classes' keywords, outputs, keyword dispatch,
key handling and error cases on the same batches and the same value network.

The main exactness tests compare with the plain loops in ``value_reference``. TorchRL computes
some paths in float32 even for float64 inputs, hence the looser tolerances.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
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
    "vtrace_advantage_estimate",
    "reward2go",
]
ESTIMATORS = [("GAE", {"lmbda": 0.8}), ("TD0Estimator", {}), ("TD1Estimator", {}),
              ("TDLambdaEstimator", {"lmbda": 0.8})]
NAMES = [name for name, _ in ESTIMATORS]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_same_parameters(name):
    ours = inspect.signature(getattr(rv, name)).parameters
    theirs = inspect.signature(getattr(torchrl_functional, name)).parameters
    assert [(p.name, p.kind, p.default) for p in ours.values()] == [
        (p.name, p.kind, p.default) for p in theirs.values()
    ]


@pytest.mark.parametrize("name", [*NAMES, "MultiAgentGAE", "VTrace"])
def test_estimators_take_torchrl_keywords(name):
    ours = inspect.signature(getattr(rv, name)).parameters
    theirs = inspect.signature(getattr(torchrl_value, name)).parameters
    assert set(theirs) <= set(ours)
    for key in theirs:
        assert ours[key].kind == theirs[key].kind and ours[key].default == theirs[key].default, key


@pytest.mark.parametrize("shape", [(3, 17, 1), (2, 1, 1), (2, 3, 9, 2)])
def test_same_values(shape):
    v, nv, r, d, t = make_batch(shape, dtype=torch.float64)
    gamma = 0.5 + 0.5 * torch.rand(shape, dtype=torch.float64)
    lmbda = torch.rand(shape, dtype=torch.float64)
    log_pi, log_mu = 0.3 * torch.randn(shape, dtype=torch.float64), 0.3 * torch.randn(shape, dtype=torch.float64)
    cases = [
        ("vec_generalized_advantage_estimate", (0.9, 0.8, v, nv, r, d, t)),
        ("vec_generalized_advantage_estimate", (gamma, 0.8, v, nv, r, d, t)),
        ("generalized_advantage_estimate", (0.9, 0.8, v, nv, r, d, t)),
        ("vec_td_lambda_return_estimate", (0.9, 0.8, nv, r, d, t)),
        ("vec_td_lambda_return_estimate", (gamma, 0.8, nv, r, d, t)),
        ("td_lambda_return_estimate", (gamma, 0.8, nv, r, d, t, False)),
        ("td_lambda_return_estimate", (gamma, lmbda, nv, r, d, t, False)),
        ("td_lambda_return_estimate", (0.9, lmbda, nv, r, d, t, False)),
        ("vec_td1_return_estimate", (0.9, nv, r, d)),
        ("td1_return_estimate", (gamma, nv, r, d, t, False)),
        ("vec_td1_advantage_estimate", (0.9, v, nv, r, d, t)),
        ("vec_td_lambda_advantage_estimate", (0.9, 0.7, v, nv, r, d, t)),
        ("td0_return_estimate", (0.9, nv, r, t)),
        ("vtrace_advantage_estimate", (0.9, log_pi, log_mu, v, nv, r, d, t)),
        ("vtrace_advantage_estimate", (0.9, log_pi, log_mu, v, nv, r, d, t, 0.7, 1.3)),
        ("vtrace_advantage_estimate", (0.9, log_pi, log_mu, v, nv, r, d)),
    ]
    for name, args in cases:
        torch.testing.assert_close(
            getattr(rv, name)(*args), getattr(torchrl_functional, name)(*args), **TOL
        )
    moved = [x.transpose(0, -2) for x in (log_pi, log_mu, v, nv, r, d, t)]
    torch.testing.assert_close(rv.vtrace_advantage_estimate(0.9, *moved, time_dim=0),
                               torchrl_functional.vtrace_advantage_estimate(0.9, *moved, time_dim=0), **TOL)


def test_same_refusals():
    """TorchRL's rolling_gamma rules: the same exception types and messages."""
    shape = (2, 12, 1)
    _, nv, r, d, t = make_batch(shape, seed=6)
    gamma = torch.full(shape, 0.9)
    follows = torch.zeros_like(t)
    follows[:, 3] = True
    ended = torch.zeros_like(t)
    ended[:, 3:] = True
    cases = [
        (RuntimeError, "time-sensitive gamma or lambda", "td_lambda_return_estimate", (0.9, 0.6, nv, r, d, t, False)),
        (RuntimeError, "time-sensitive gamma values", "td1_return_estimate", (0.9, nv, r, d, t, False)),
        (NotImplementedError, "When using rolling_gamma=False", "vec_td_lambda_return_estimate",
         (gamma, 0.6, nv, r, d | follows, follows, False)),
        (NotImplementedError, "The vectorized version of TD", "vec_td1_return_estimate",
         (gamma, nv, r, d | ended, ended, False)),
    ]
    for exc, match, name, args in cases:
        for lib in (rv, torchrl_functional):
            with pytest.raises(exc, match=match):
                getattr(lib, name)(*args)


# ------------------------------------------------------------------------------ estimators


def _net(in_dim=3, seed=0, bias=True):
    torch.manual_seed(seed)
    return TensorDictModule(torch.nn.Linear(in_dim, 1, bias=bias), in_keys=["obs"], out_keys=["state_value"])


def _batch(shape=(3, 7), seed=4, names=None):
    _, _, r, d, t = make_batch((*shape, 1), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    return TensorDict({"obs": torch.randn(*shape, 3, generator=gen),
                       "next": {"obs": torch.randn(*shape, 3, generator=gen), "reward": r, "done": d,
                                "terminated": t, "truncated": d & ~t}}, list(shape), names=names)


def _pair(name, kwargs, **extra):
    net = extra.pop("value_network", _net())
    ours = getattr(rv, name)(gamma=0.9, value_network=net, **kwargs, **extra)
    theirs = getattr(torchrl_value, name)(gamma=0.9, value_network=net, **kwargs, **extra)
    return ours, theirs


def _assert_same(a, b, keys=("advantage", "value_target", "state_value", ("next", "state_value"))):
    for key in keys:
        torch.testing.assert_close(a[key], b[key], **TOL, msg=lambda m, key=key: f"{key}: {m}")


EXTRAS = {
    "plain": {},
    "chunks": {"value_chunk_size": 2},
    "num-chunks-time": {"num_chunks": 2, "value_chunk_dim": 1},
    "no-vmap": {"deactivate_vmap": True},
    "differentiable": {"differentiable": True},
}


@pytest.mark.parametrize("extra", list(EXTRAS))
@pytest.mark.parametrize("name,kwargs", ESTIMATORS, ids=NAMES)
def test_modules_same_values(name, kwargs, extra):
    ours, theirs = _pair(name, kwargs, **EXTRAS[extra])
    _assert_same(ours(_batch()), theirs(_batch()))


@pytest.mark.parametrize("name,kwargs", ESTIMATORS, ids=NAMES)
def test_modules_same_with_multistep_gammas_and_standardized_rewards(name, kwargs):
    td = _batch()
    td["steps_to_next_obs"] = torch.randint(1, 4, (3, 7), generator=torch.Generator().manual_seed(0))
    td["task"] = torch.tensor([0, 1, 1]).view(3, 1, 1).expand(3, 7, 1).clone()
    ours, theirs = _pair(name, kwargs)
    _assert_same(ours(td.clone()), theirs(td.clone()))
    for extra in ({}, {"group_key": "task"}):
        flag = {"average_gae": True} if name == "GAE" else {"average_rewards": True}
        ours, theirs = _pair(name, kwargs, **flag, **extra)
        keys = ["advantage", "value_target"] + ([] if name == "GAE" else [("next", "reward")])
        _assert_same(ours(td.clone()), theirs(td.clone()), keys)


def test_gae_auto_reset_env_same():
    ours, theirs = _pair("GAE", {"lmbda": 0.8}, auto_reset_env=True)
    _assert_same(ours(_batch()), theirs(_batch()))


@pytest.mark.parametrize("name,kwargs", ESTIMATORS, ids=NAMES)
def test_keyword_dispatch_same(name, kwargs):
    td = _batch()
    inputs = {"obs": td["obs"], "next_obs": td["next", "obs"], "next_reward": td["next", "reward"],
              "next_done": td["next", "done"], "next_terminated": td["next", "terminated"]}
    ours, theirs = _pair(name, kwargs)
    assert ours.in_keys == theirs.in_keys and ours.out_keys == theirs.out_keys
    for a, b in zip(ours(**inputs), theirs(**inputs)):
        torch.testing.assert_close(a, b, **TOL)


@pytest.mark.parametrize("shifted", [False, True])
@pytest.mark.parametrize("name,kwargs", ESTIMATORS, ids=NAMES)
def test_nan_next_observation_at_done_same(name, kwargs, shifted):
    """TorchRL replaces NaN next inputs by the root's; the terminated step gets r - V(s)."""
    td = _batch((2, 5))
    td["next", "obs"][:, :-1] = td["obs"][:, 1:]
    td["next", "obs"][:, -1] = float("nan")
    td["next", "done"][:] = td["next", "terminated"][:] = False
    td["next", "done"][:, -1] = td["next", "terminated"][:, -1] = True
    ours, theirs = _pair(name, kwargs, value_network=_net(bias=False), shifted=shifted)
    a, b = ours(td.clone()), theirs(td.clone())
    assert torch.isfinite(a["advantage"]).all() and torch.isfinite(a["value_target"]).all()
    _assert_same(a, b, ["advantage", "value_target"])


@pytest.mark.parametrize("name,kwargs", ESTIMATORS, ids=NAMES)
def test_shifted_same_where_torchrl_keeps_every_step(name, kwargs):
    """On a rollout (next obs = the following obs except at a reset) TorchRL's single call with
    a large enough budget is exact, and so is reap's at any budget; without next observations
    both take them from the following step."""
    T = 6
    td = _batch((2, T))
    td["next", "obs"][:, :-1] = td["obs"][:, 1:]
    ours, theirs = _pair(name, kwargs, shifted=True)
    theirs.shifted_budget = T
    a, b = ours(td.clone()), theirs(td.clone())
    assert a["shifted_valid"].all() and b["shifted_valid"].all()
    _assert_same(a, b, ["advantage", "value_target"])
    missing = td.exclude(("next", "obs"))
    _assert_same(ours(missing.clone()), theirs(missing.clone()), ["advantage", "value_target"])


@pytest.mark.parametrize("name,kwargs", ESTIMATORS, ids=NAMES)
def test_differentiable_same_gradients(name, kwargs):
    grads = []
    for lib in (rv, torchrl_value):
        net = _net()
        td = _batch((1, 10))
        td["next", "reward"].requires_grad_()
        out = getattr(lib, name)(gamma=0.98, value_network=net, differentiable=True, **kwargs)(td)
        out["advantage"].sum().backward()
        assert all(p.grad is None for p in net.parameters())
        grads.append(td["next", "reward"].grad)
    torch.testing.assert_close(*grads, **TOL)


@pytest.mark.parametrize("name,kwargs", ESTIMATORS, ids=NAMES)
def test_skip_existing_same(name, kwargs):
    net = TensorDictModule(lambda x: torch.zeros(*x.shape[:-1], 1), in_keys=["obs"], out_keys=["state_value"])
    for skip in (True, False, None):
        results = []
        for lib in (rv, torchrl_value):
            td = _batch((1, 10))
            td["state_value"], td["next", "state_value"] = torch.ones(1, 10, 1), torch.ones(1, 10, 1)
            results.append(getattr(lib, name)(gamma=0.98, value_network=net, skip_existing=skip, **kwargs)(td))
        _assert_same(*results)


@pytest.mark.parametrize("name,kwargs", [e for e in ESTIMATORS if e[0] != "TD0Estimator"],
                         ids=[n for n in NAMES if n != "TD0Estimator"])
def test_time_dim_and_value_estimate_same(name, kwargs):
    td = _batch((4, 7), names=[None, "time"])
    for time_dim in (None, 1, -1):
        ours, theirs = _pair(name, kwargs, time_dim=time_dim)
        _assert_same(ours(td.clone()), theirs(td.clone()))
        torch.testing.assert_close(ours.value_estimate(td.clone()), theirs.value_estimate(td.clone()), **TOL)
    ours, theirs = _pair(name, kwargs, time_dim=0)
    _assert_same(ours(td.transpose(0, 1).clone()), theirs(td.transpose(0, 1).clone()))
    torch.testing.assert_close(ours.value_estimate(td.clone(), time_dim=1),
                               theirs.value_estimate(td.clone(), time_dim=1), **TOL)


@pytest.mark.parametrize("name,kwargs", ESTIMATORS, ids=NAMES)
def test_keys_and_errors_same(name, kwargs):
    ours, theirs = _pair(name, kwargs, value_network=TensorDictModule(
        torch.nn.Linear(3, 1), in_keys=["obs"], out_keys=["v"]))
    for module in (ours, theirs):
        module.set_keys(value="v", advantage=("a", "b"))
        assert module.tensor_keys.value == "v" and module.advantage_key == ("a", "b")
        with pytest.raises(KeyError):
            module.set_keys(unknown_key="x")
        with pytest.raises(KeyError, match="not found in value network out_keys"):
            module.set_keys(value="w")
        with pytest.raises(ValueError, match="cannot be None"):
            module.set_keys(value=None)
    assert ours.in_keys == theirs.in_keys and ours.out_keys == theirs.out_keys
    assert ours.tensor_keys.sample_log_prob == theirs.tensor_keys.sample_log_prob
    for lib in (rv, torchrl_value):
        with pytest.raises(RuntimeError, match="via constructor is deprecated"):
            getattr(lib, name)(gamma=0.9, value_network=_net(), value_key="x", **kwargs)
        with pytest.raises(ValueError, match="shifted must be a boolean"):
            getattr(lib, name)(gamma=0.9, value_network=_net(), shifted="yes", **kwargs)
        with pytest.raises(ValueError, match="value_chunk_size and num_chunks"):
            getattr(lib, name)(gamma=0.9, value_network=_net(), value_chunk_size=2, num_chunks=2, **kwargs)
        with pytest.raises(RuntimeError, match="at least one dimension"):
            getattr(lib, name)(gamma=0.9, value_network=_net(), **kwargs)(_batch()[0, 0])
    assert set(ours.state_dict()) == set(theirs.state_dict())


def test_multiagent_gae_same():
    n_agents = 3
    net = TensorDictModule(torch.nn.Linear(3, 1), in_keys=[("agents", "obs")], out_keys=[("agents", "state_value")])
    _, _, r, d, t = make_batch((2, 9, 1), seed=9)
    gen = torch.Generator().manual_seed(0)
    td = TensorDict({"agents": TensorDict({"obs": torch.randn(2, 9, n_agents, 3, generator=gen)}, [2, 9, n_agents]),
                     "next": {"agents": TensorDict({"obs": torch.randn(2, 9, n_agents, 3, generator=gen)}, [2, 9, n_agents]),
                              "reward": r, "done": d, "terminated": t},
                     "task": torch.tensor([0, 1]).view(2, 1, 1).expand(2, 9, 1).clone()}, [2, 9])
    for extra in ({}, {"average_gae": True}, {"average_gae": True, "group_key": "task"}):
        results = []
        for lib in (rv, torchrl_value):
            gae = lib.MultiAgentGAE(gamma=0.9, lmbda=0.8, value_network=net, **extra)
            gae.set_keys(value=("agents", "state_value"), advantage=("agents", "advantage"))
            results.append(gae(td.clone()))
        _assert_same(*results, [("agents", "advantage"), "value_target"])


def _actor():
    modules = pytest.importorskip("torchrl.modules")
    torch.manual_seed(1)
    return modules.ProbabilisticActor(
        module=TensorDictModule(torch.nn.Linear(3, 4), in_keys=["obs"], out_keys=["logits"]),
        in_keys=["logits"], out_keys=["action"], distribution_class=modules.OneHotCategorical,
        return_log_prob=True)


def test_vtrace_takes_torchrl_keywords():
    ours = inspect.signature(rv.VTrace).parameters
    theirs = inspect.signature(torchrl_value.VTrace).parameters
    assert [(p.name, p.kind, p.default) for p in ours.values()] == [(p.name, p.kind, p.default) for p in theirs.values()]


@pytest.mark.parametrize("extra", [{}, {"average_adv": True}, {"average_adv": True, "group_key": "task"},
                                   {"rho_thresh": 0.5, "c_thresh": 2.0}, {"value_chunk_size": 1}])
def test_vtrace_same(extra):
    from tensordict.nn import set_composite_lp_aggregate

    actor, net = _actor(), _net()
    td = _batch((2, 10))
    td["task"] = torch.tensor([0, 1]).view(2, 1, 1).expand(2, 10, 1).clone()
    with set_composite_lp_aggregate(False):
        td["action_log_prob"] = torch.log(torch.rand(2, 10, 1, generator=torch.Generator().manual_seed(2)))
        ours = rv.VTrace(gamma=0.98, actor_network=actor, value_network=net, **extra)
        theirs = torchrl_value.VTrace(gamma=0.98, actor_network=actor, value_network=net, **extra)
        assert ours.in_keys == theirs.in_keys and set(ours.state_dict()) == set(theirs.state_dict())
        _assert_same(ours(td.clone()), theirs(td.clone()))
        inputs = {"obs": td["obs"], "action_log_prob": td["action_log_prob"], "next_obs": td["next", "obs"],
                  "next_reward": td["next", "reward"], "next_done": td["next", "done"],
                  "next_terminated": td["next", "terminated"], **({"task": td["task"]} if "group_key" in extra else {})}
        for a, b in zip(ours(**inputs), theirs(**inputs)):
            torch.testing.assert_close(a, b, **TOL)
    for lib in (rv, torchrl_value):
        with pytest.raises(NotImplementedError, match="Per-value gamma is not supported"):
            lib.VTrace(gamma=torch.full((2,), 0.9), actor_network=actor, value_network=net)


@pytest.mark.parametrize("shape", [(1, 10), (2, 6, 1), (2, 6, 2), (3, 4, 5, 1)])
def test_reward2go_same_values(shape):
    generator = torch.Generator().manual_seed(sum(shape))
    reward = torch.randn(shape, generator=generator)
    done = torch.rand(shape, generator=generator) < 0.2
    ours = rv.reward2go(reward, done.clone(), 0.7)
    torch.testing.assert_close(ours, torchrl_functional.reward2go(reward, done.clone(), 0.7), **TOL)
