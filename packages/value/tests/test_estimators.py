"""Module estimators: keys, one value-network call, results equal to the functional forms."""

from __future__ import annotations

import pytest
import torch
import value_reference as ref
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from value_reference import make_batch

import reap_value as rv


class CountingLinear(torch.nn.Linear):
    """A linear layer that counts its calls."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return super().forward(x)


def _network(obs_key="obs", value_key="state_value", seed=0):
    torch.manual_seed(seed)
    return TensorDictModule(CountingLinear(3, 1), in_keys=[obs_key], out_keys=[value_key])


def _batch(batch=(3, 11), seed=0, names=None):
    gen = torch.Generator().manual_seed(seed)
    shape = (*batch, 1)
    done = torch.rand(shape, generator=gen) < 0.25
    done[..., -1, :] = True
    terminated = done & (torch.rand(shape, generator=gen) < 0.5)
    td = TensorDict(
        {
            "obs": torch.randn(*batch, 3, generator=gen),
            "next": {
                "obs": torch.randn(*batch, 3, generator=gen),
                "reward": torch.randn(shape, generator=gen),
                "done": done,
                "terminated": terminated,
            },
        },
        batch_size=batch,
        names=names,
    )
    return td


def _values(net, td):
    with torch.no_grad():
        return net.module(td["obs"]), net.module(td["next", "obs"])


def test_gae_one_call_and_matches_functional():
    net = _network()
    td = _batch()
    v, nv = _values(net, td)
    net.module.calls = 0
    out = rv.GAE(gamma=0.97, lmbda=0.9, value_network=net)(td)
    assert out is td
    assert net.module.calls == 1
    adv, target = ref.gae(
        0.97, 0.9, v, nv, td["next", "reward"], td["next", "done"], td["next", "terminated"]
    )
    torch.testing.assert_close(td["advantage"], adv)
    torch.testing.assert_close(td["value_target"], target)
    torch.testing.assert_close(td["state_value"], v)
    torch.testing.assert_close(td["next", "state_value"], nv)
    assert not td["advantage"].requires_grad and not td["state_value"].requires_grad


def test_gae_average_and_set_keys():
    net = _network(obs_key="o", value_key="v")
    td = _batch()
    td.rename_key_("obs", "o")
    td["next"].rename_key_("obs", "o")
    td["next"].rename_key_("reward", "r")
    gae = rv.GAE(gamma=0.9, lmbda=0.9, value_network=net, average_gae=True)
    assert gae.set_keys(value="v", reward="r", advantage="adv", value_target=("t", "x")) is gae
    gae(td)
    adv = td["adv"]
    assert abs(adv.mean().item()) < 1e-6
    assert abs(adv.std().item() - 1.0) < 1e-5
    assert ("t", "x") in td.keys(True)
    assert gae.tensor_keys.value == "v"
    assert gae.out_keys == ["adv", ("t", "x")] and ("next", "r") in gae.in_keys


@pytest.mark.parametrize("name", ["advantage_key", "value_target_key", "value_key"])
def test_deprecated_key_arguments_are_refused(name):
    """As in TorchRL: the keys are set with set_keys, which the error names."""
    fix = name.removesuffix("_key")
    with pytest.raises(RuntimeError, match=rf"'{name}' via constructor is deprecated, use \.set_keys\({fix}="):
        rv.GAE(gamma=0.9, lmbda=0.9, value_network=None, **{name: "a"})


def test_no_value_network_reads_values():
    td = _batch()
    v, nv = torch.randn(3, 11, 1), torch.randn(3, 11, 1)
    td["state_value"], td["next", "state_value"] = v, nv
    rv.TDLambdaEstimator(gamma=0.9, lmbda=0.5, value_network=None)(td)
    expected = ref.td_lambda(
        0.9, 0.5, nv, td["next", "reward"], td["next", "done"], td["next", "terminated"]
    )
    torch.testing.assert_close(td["value_target"], expected)
    torch.testing.assert_close(td["advantage"], expected - v)


def test_skip_existing_reuses_values():
    net = _network()
    td = _batch()
    td["state_value"] = torch.zeros(3, 11, 1)
    td["next", "state_value"] = torch.zeros(3, 11, 1)
    net.module.calls = 0
    rv.GAE(gamma=0.9, lmbda=0.9, value_network=net, skip_existing=True)(td)
    assert net.module.calls == 0
    rv.GAE(gamma=0.9, lmbda=0.9, value_network=net)(td)
    assert net.module.calls == 1
    assert not torch.equal(td["state_value"], torch.zeros(3, 11, 1))


@pytest.mark.parametrize("estimator", ["td0", "td1", "tdl"])
@pytest.mark.parametrize("average_rewards", [False, True])
def test_return_estimators(estimator, average_rewards):
    net = _network()
    td = _batch(seed=1)
    v, nv = _values(net, td)
    reward = td["next", "reward"]
    if average_rewards:
        reward = (reward - reward.mean()) / reward.std()
    done, term = td["next", "done"], td["next", "terminated"]
    if estimator == "td0":
        module = rv.TD0Estimator(gamma=0.9, value_network=net, average_rewards=average_rewards)
        expected = ref.td0(0.9, nv, reward, term)
    elif estimator == "td1":
        module = rv.TD1Estimator(gamma=0.9, value_network=net, average_rewards=average_rewards)
        expected = ref.td_lambda(0.9, 1.0, nv, reward, done, term)
    else:
        module = rv.TDLambdaEstimator(
            gamma=0.9, lmbda=0.8, value_network=net, average_rewards=average_rewards
        )
        expected = ref.td_lambda(0.9, 0.8, nv, reward, done, term)
    net.module.calls = 0
    module(td)
    assert net.module.calls == 1
    torch.testing.assert_close(td["value_target"], expected)
    torch.testing.assert_close(td["advantage"], expected - v)
    torch.testing.assert_close(module.value_estimate(td.clone()), expected)


def test_time_dim_from_names_argument_and_call():
    net = _network()
    td = _batch(batch=(7, 4), names=["time", None])
    v, nv = _values(net, td)
    flags = td["next", "reward"], td["next", "done"], td["next", "terminated"]
    expected = ref.gae(0.9, 0.8, v, nv, *flags, time_dim=0)[0]
    rv.GAE(gamma=0.9, lmbda=0.8, value_network=net)(td)
    torch.testing.assert_close(td["advantage"], expected)
    td2 = _batch(batch=(7, 4))
    rv.GAE(gamma=0.9, lmbda=0.8, value_network=net, time_dim=0)(td2)
    torch.testing.assert_close(td2["advantage"], expected)
    td3 = _batch(batch=(7, 4))
    rv.GAE(gamma=0.9, lmbda=0.8, value_network=net)(td3, time_dim=-2)
    torch.testing.assert_close(td3["advantage"], expected)
    # default: the last batch dimension is time
    td4 = _batch(batch=(7, 4))
    rv.GAE(gamma=0.9, lmbda=0.8, value_network=net)(td4)
    torch.testing.assert_close(td4["advantage"], ref.gae(0.9, 0.8, v, nv, *flags)[0])


def test_terminated_defaults_to_done():
    td = _batch(seed=3)
    del td["next", "terminated"]
    td["state_value"], td["next", "state_value"] = torch.randn(3, 11, 1), torch.randn(3, 11, 1)
    rv.GAE(gamma=0.9, lmbda=0.8, value_network=None)(td)
    expected = ref.gae(
        0.9,
        0.8,
        td["state_value"],
        td["next", "state_value"],
        td["next", "reward"],
        td["next", "done"],
    )[0]
    torch.testing.assert_close(td["advantage"], expected)


def test_differentiable_and_params():
    """differentiable: gradients reach the batch's tensors, never the value network's parameters
    (TorchRL holds the network out), and the next value is detached."""
    net = _network()
    td = _batch()
    td["next", "reward"].requires_grad_()
    rv.GAE(gamma=0.9, lmbda=0.8, value_network=net, differentiable=True)(td)
    td["advantage"].sum().backward()
    assert net.module.weight.grad is None and td["next", "reward"].grad.abs().sum() > 0
    assert not td["next", "state_value"].requires_grad
    td = td.clone()
    with torch.no_grad():  # differentiable turns grad mode on inside the call, as TorchRL's
        out = rv.TD1Estimator(gamma=0.9, value_network=None, differentiable=True)(td)
    assert out["advantage"].requires_grad
    from tensordict import TensorDict as TD

    params = TD.from_module(net).detach().clone().apply(torch.zeros_like)
    td2 = _batch()
    rv.GAE(gamma=0.9, lmbda=0.8, value_network=net)(td2, params=params)
    assert torch.equal(td2["state_value"], torch.zeros(3, 11, 1))
    # distinct target parameters: next values come from them (two calls)
    td3 = _batch()
    net.module.calls = 0
    rv.GAE(gamma=0.9, lmbda=0.8, value_network=net)(td3, params=None, target_params=params)
    assert net.module.calls == 2
    assert torch.equal(td3["next", "state_value"], torch.zeros(3, 11, 1))
    assert not torch.equal(td3["state_value"], torch.zeros(3, 11, 1))


def test_multiagent_gae_team_reward():
    n_agents = 4
    torch.manual_seed(0)
    net = TensorDictModule(
        torch.nn.Linear(3, 1), in_keys=[("agents", "obs")], out_keys=[("agents", "state_value")]
    )
    v_, nv_, r, d, t = make_batch((2, 9, 1), seed=9)
    td = TensorDict(
        {
            "agents": TensorDict({"obs": torch.randn(2, 9, n_agents, 3)}, [2, 9, n_agents]),
            "next": {
                "agents": TensorDict({"obs": torch.randn(2, 9, n_agents, 3)}, [2, 9, n_agents]),
                "reward": r,
                "done": d,
                "terminated": t,
            },
        },
        [2, 9],
    )
    gae = rv.MultiAgentGAE(gamma=0.9, lmbda=0.8, value_network=net, average_gae=True)
    gae.set_keys(value=("agents", "state_value"), advantage=("agents", "advantage"))
    gae(td)
    adv = td["agents", "advantage"]
    assert adv.shape == (2, 9, n_agents, 1)
    with torch.no_grad():
        v = net.module(td["agents", "obs"])
        nv = net.module(td["next", "agents", "obs"])
    expand = lambda x: x.unsqueeze(-2).expand(2, 9, n_agents, 1)  # noqa: E731
    raw, target = ref.gae(0.9, 0.8, v, nv, expand(r), expand(d), expand(t), time_dim=1)
    torch.testing.assert_close(td["value_target"], target)
    # standardized per agent: every agent has mean 0 and std 1 on its own
    dims = (0, 1, 3)
    expected = (raw - raw.mean(dims, keepdim=True)) / raw.std(dims, keepdim=True)
    torch.testing.assert_close(adv, expected)
    assert torch.allclose(adv.mean(dims), torch.zeros(n_agents), atol=1e-5)


def test_multiagent_per_agent_reward_and_errors():
    v = torch.randn(2, 5, 3, 1)
    reward = torch.randn(2, 5, 3, 1)
    done = torch.zeros(2, 5, 3, 1, dtype=torch.bool)
    td = TensorDict(
        {"sv": v, "next": {"sv": v.clone(), "reward": reward, "done": done}}, batch_size=[2, 5]
    )
    gae = rv.MultiAgentGAE(gamma=0.9, lmbda=0.8, value_network=None).set_keys(value="sv")
    gae(td)
    torch.testing.assert_close(
        td["advantage"], ref.gae(0.9, 0.8, v, v, reward, done, time_dim=1)[0]
    )
    with pytest.raises(ValueError, match="agent_dim=-3 is the time dimension"):
        rv.MultiAgentGAE(gamma=0.9, lmbda=0.8, value_network=None, agent_dim=-3).set_keys(
            value="sv"
        )(td)
    with pytest.raises(ValueError, match="agent_dim=7 is out of range"):
        rv.MultiAgentGAE(gamma=0.9, lmbda=0.8, value_network=None, agent_dim=7).set_keys(
            value="sv"
        )(td)
    td["next", "reward"] = torch.randn(2, 5)
    with pytest.raises(ValueError, match="reward of shape"):
        gae(td)
    with pytest.raises(TypeError, match="agent_dim must be an int"):
        rv.MultiAgentGAE(gamma=0.9, lmbda=0.8, value_network=None, agent_dim="agents")


# ------------------------------------------------------------------------------- errors


def test_construction_errors():
    with pytest.raises(ValueError, match="lmbda must lie in"):
        rv.GAE(gamma=0.9, lmbda=1.1, value_network=None)
    with pytest.raises(ValueError, match="gamma must lie in"):
        rv.TDLambdaEstimator(gamma=-1.0, lmbda=0.5, value_network=None)
    with pytest.raises(ValueError, match="gamma must lie in"):
        rv.TD0Estimator(gamma=2.0, value_network=None)
    with pytest.raises(TypeError, match="value_network must be"):
        rv.TD1Estimator(gamma=0.9, value_network=lambda x: x)
    with pytest.raises(TypeError, match="in_keys"):
        rv.TD1Estimator(gamma=0.9, value_network=torch.nn.Linear(3, 1))
    with pytest.raises(TypeError, match="time_dim must be"):
        rv.GAE(gamma=0.9, lmbda=0.9, value_network=None, time_dim="time")
    with pytest.raises(TypeError):
        rv.GAE(0.9, 0.9, None)  # keyword-only, as in TorchRL
    gae = rv.GAE(gamma=0.9, lmbda=0.9, value_network=None)
    with pytest.raises(KeyError, match="values is not an accepted tensordict key"):
        gae.set_keys(values="x")
    with pytest.raises(ValueError, match="key name must be of type NestedKey"):
        gae.set_keys(value=3)
    with pytest.raises(ValueError, match="tensordict keys cannot be None"):
        gae.set_keys(value=None)
    with pytest.raises(ValueError, match="shifted must be a boolean"):
        rv.GAE(gamma=0.9, lmbda=0.9, value_network=None, shifted="yes")
    with pytest.raises(ValueError, match="shifted_budget must be >= 1"):
        rv.GAE(gamma=0.9, lmbda=0.9, value_network=None, shifted_budget=0)
    with pytest.raises(ValueError, match="value_chunk_size and num_chunks cannot both be set"):
        rv.TD0Estimator(gamma=0.9, value_network=None, value_chunk_size=3, num_chunks=2)
    with pytest.raises(ValueError, match="num_chunks and num_chunk cannot both be set"):
        rv.TD0Estimator(gamma=0.9, value_network=None, num_chunks=2, num_chunk=3)
    with pytest.raises(ValueError, match="num_chunks must be >= 1"):
        rv.TD0Estimator(gamma=0.9, value_network=None, num_chunks=0)


def test_call_errors():
    net = _network()
    gae = rv.GAE(gamma=0.9, lmbda=0.9, value_network=net)
    td = _batch()
    with pytest.raises(ValueError, match="time_dim=5 is out of range"):
        gae(td, time_dim=5)
    del td["next", "obs"]
    with pytest.raises(KeyError, match="the value network reads 'obs'"):
        gae(td)
    td = _batch()
    del td["next", "reward"]
    with pytest.raises(KeyError, match="reward"):
        gae(td)
    with pytest.raises(KeyError, match="value_network is None"):
        rv.GAE(gamma=0.9, lmbda=0.9, value_network=None)(_batch())
    with pytest.raises(KeyError, match="value key 'v' not found in value network out_keys"):
        rv.GAE(gamma=0.9, lmbda=0.9, value_network=net).set_keys(value="v")
    with pytest.raises(RuntimeError, match="at least one dimension"):
        rv.TD0Estimator(gamma=0.9, value_network=None)(_batch()[0, 0])
    with pytest.raises(KeyError, match="the batch has no 'next' entry"):
        gae({"obs": torch.zeros(3)})  # a positional non-TensorDict is taken as the first in_key's value


# --------------------------------------------------------------- TorchRL's behaviours, plain


def test_keyword_dispatch_returns_advantage_and_target():
    net = _network()
    td = _batch()
    gae = rv.GAE(gamma=0.9, lmbda=0.8, value_network=net)
    adv, target = gae(obs=td["obs"], next_obs=td["next", "obs"], next_reward=td["next", "reward"],
                      next_done=td["next", "done"], next_terminated=td["next", "terminated"])
    expected = gae(td.clone())
    torch.testing.assert_close(adv, expected["advantage"])
    torch.testing.assert_close(target, expected["value_target"])


def test_nan_next_observation_is_replaced_by_the_root():
    net = _network()
    td = _batch()
    td["next", "obs"][:, -1] = float("nan")
    out = rv.TDLambdaEstimator(gamma=0.9, lmbda=0.7, value_network=net)(td.clone())
    with torch.no_grad():
        nv = net.module(torch.where(td["next", "obs"].isnan(), td["obs"], td["next", "obs"]))
    expected = ref.td_lambda(0.9, 0.7, nv, td["next", "reward"], td["next", "done"], td["next", "terminated"])
    torch.testing.assert_close(out["value_target"], expected)
    assert not td["next", "obs"][:, :-1].isnan().any()  # the batch is not changed


def test_steps_to_next_obs_raise_gamma():
    td = _batch()
    td["state_value"], td["next", "state_value"] = torch.randn(3, 11, 1), torch.randn(3, 11, 1)
    td["steps_to_next_obs"] = torch.randint(1, 4, (3, 11))
    out = rv.GAE(gamma=0.9, lmbda=0.8, value_network=None)(td.clone())
    gamma = 0.9 ** td["steps_to_next_obs"].unsqueeze(-1).float()
    expected = ref.gae(gamma, 0.8, td["state_value"], td["next", "state_value"], td["next", "reward"],
                       td["next", "done"], td["next", "terminated"])[0]
    torch.testing.assert_close(out["advantage"], expected)


def test_group_key_standardizes_within_groups():
    td = _batch(batch=(4, 6))
    task = torch.tensor([0, 1, 1, 0]).view(4, 1, 1).expand(4, 6, 1)
    td["next", "reward"] = td["next", "reward"] * torch.where(task == 1, 10.0, 1.0)
    td["task"] = task.clone()
    net = _network()
    out = rv.GAE(gamma=0.9, lmbda=0.95, value_network=net, average_gae=True, group_key="task")(td.clone())
    assert "task" in rv.GAE(gamma=0.9, lmbda=0.95, value_network=net, group_key="task").in_keys
    for group in (0, 1):
        adv = out["advantage"][task == group]
        torch.testing.assert_close(adv.mean(), torch.zeros(()), atol=1e-5, rtol=0)
        torch.testing.assert_close(adv.std(), torch.ones(()), atol=1e-4, rtol=0)
    rewards = rv.TD0Estimator(gamma=0.9, value_network=net, average_rewards=True, group_key="task")(td.clone())
    for group in (0, 1):  # the standardized rewards are written back, as TorchRL's
        torch.testing.assert_close(rewards["next", "reward"][task == group].mean(), torch.zeros(()), atol=1e-5, rtol=0)
    with pytest.raises(KeyError, match="group_key 'missing' is missing"):
        rv.GAE(gamma=0.9, lmbda=0.95, value_network=net, average_gae=True, group_key="missing")(td.clone())


def test_auto_reset_env_bootstraps_truncations_from_the_step_value():
    td = _batch()
    v, nv = torch.randn(3, 11, 1), torch.randn(3, 11, 1)
    td["state_value"], td["next", "state_value"] = v, nv
    done, term = td["next", "done"], td["next", "terminated"]
    td["next", "truncated"] = done & ~term
    out = rv.GAE(gamma=0.9, lmbda=0.8, value_network=None, auto_reset_env=True)(td.clone())
    reward = td["next", "reward"] + 0.9 * v * td["next", "truncated"]
    torch.testing.assert_close(out["advantage"], ref.gae(0.9, 0.8, v, nv, reward, done, done)[0])


@pytest.mark.parametrize("chunks", [{"value_chunk_size": 2}, {"num_chunks": 3, "value_chunk_dim": 1}])
def test_chunked_network_calls_give_the_same_values(chunks):
    net = _network()
    plain = rv.TDLambdaEstimator(gamma=0.9, lmbda=0.8, value_network=net)(_batch())
    net.module.calls = 0
    chunked = rv.TDLambdaEstimator(gamma=0.9, lmbda=0.8, value_network=net, **chunks)
    out = chunked(_batch())
    assert net.module.calls == 3
    torch.testing.assert_close(out["advantage"], plain["advantage"])
    with pytest.raises(ValueError, match="value_chunk_dim=2 is out of bounds"):
        rv.GAE(gamma=0.9, lmbda=0.8, value_network=net, num_chunks=2, value_chunk_dim=2)(_batch())


def test_shifted_takes_missing_next_inputs_from_the_following_step():
    net = _network()
    td = _batch(batch=(2, 6))
    td["next", "done"][:] = False
    td["next", "done"][:, 2] = td["next", "done"][:, -1] = True
    td["next", "terminated"] = torch.zeros_like(td["next", "done"])  # truncations
    following = torch.cat([td["obs"][:, 1:], td["obs"][:, -1:]], 1)
    following[:, 2] = td["obs"][:, 2]  # at a truncation: the step's own observation
    complete = td.clone()
    complete["next", "obs"] = following
    out = rv.GAE(gamma=0.9, lmbda=0.8, value_network=net, shifted=True)(td.exclude(("next", "obs")))
    torch.testing.assert_close(out["advantage"], rv.GAE(gamma=0.9, lmbda=0.8, value_network=net)(complete)["advantage"])
    assert out["shifted_valid"].all() and out["shifted_valid"].shape == (2, 6)


def test_value_network_is_not_a_submodule_and_coefficients_are_buffers():
    net = _network()
    gae = rv.GAE(gamma=0.9, lmbda=0.8, value_network=net)
    assert set(gae.state_dict()) == {"gamma", "lmbda"} and not list(gae.parameters())
    assert gae.gamma.dtype == torch.get_default_dtype() and float(gae.lmbda) == pytest.approx(0.8)
    td0 = rv.TD0Estimator.for_loss(type("Loss", (), {"critic_network": net})(), gamma=0.5)
    assert td0.value_network is net


def test_vtrace_module_is_the_function_with_the_actors_log_prob():
    from tensordict.nn import ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential

    torch.manual_seed(0)
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(torch.nn.Linear(3, 4), in_keys=["obs"], out_keys=["logits"]),
        ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"],
                                      distribution_class=torch.distributions.Categorical))
    net = _network()
    td = _batch()
    vtrace = rv.VTrace(gamma=0.9, actor_network=actor, value_network=net, rho_thresh=0.8).set_keys(
        sample_log_prob="sample_log_prob")
    with pytest.raises(KeyError, match="the batch has no 'sample_log_prob'"):
        vtrace(td.clone())
    td["sample_log_prob"] = torch.randn(3, 11, 1)
    out = vtrace(td.clone())
    with torch.no_grad():
        v, nv = _values(net, td)
        dist = actor.get_dist(td)
        log_pi = dist.log_prob(dist.mode).unsqueeze(-1)  # the deterministic action, as TorchRL's
    expected = rv.vtrace_advantage_estimate(0.9, log_pi, td["sample_log_prob"], v, nv, td["next", "reward"],
                                            td["next", "done"], td["next", "terminated"], rho_thresh=0.8)
    torch.testing.assert_close(out["advantage"], expected[0])
    torch.testing.assert_close(out["value_target"], expected[1])
    assert "sample_log_prob" in vtrace.in_keys
