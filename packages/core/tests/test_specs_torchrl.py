"""TorchRL's modules and losses take reap's specs as they are (``reap.specs_torchrl``).

Each module runs on data from a reap env, once with the env's reap spec and once with the same
spec as TorchRL's (``spec.to_torchrl()``), under the same seed: the outputs must be equal.
"""

import os
import subprocess
import sys

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential

import reap
from reap import Collector, GymEnv
from reap.specs import Binary, Bounded, Categorical, Composite, OneHot, Unbounded

torchrl_data = pytest.importorskip("torchrl.data")
torchrl_modules = pytest.importorskip("torchrl.modules")
torchrl_objectives = pytest.importorskip("torchrl.objectives")


def both(spec):
    """The reap spec and TorchRL's equivalent."""
    return [spec, spec.to_torchrl()]


def assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert torch.equal(a.get(key), b.get(key)), key


def test_reap_specs_pass_torchrl_type_checks_and_action_space_lookup():
    from torchrl.data.utils import _find_action_space

    for ours in (Unbounded(shape=(1,)), Bounded(-1.0, 1.0, shape=(1,)), Categorical(3), OneHot(3), Binary(2),
                 Composite(action=OneHot(3))):
        theirs = getattr(torchrl_data, type(ours).__name__)
        assert isinstance(ours, theirs) and isinstance(ours, torchrl_data.TensorSpec), type(ours)
        assert ours == ours.to_torchrl()  # reap's __eq__ takes TorchRL's equivalent
    assert not isinstance(Categorical(3), torchrl_data.OneHot)
    assert not isinstance(Bounded(-1.0, 1.0, shape=(1,)), torchrl_data.Composite)
    assert [_find_action_space(s) for s in (OneHot(3), Categorical(3), Binary(2), Composite(action=OneHot(3)))] == [
        "one_hot", "categorical", "binary", "one_hot"]


@pytest.mark.slow
@pytest.mark.parametrize("first", ["reap", "torchrl"])
def test_registration_whichever_is_imported_first(first):
    """reap imports no TorchRL; TorchRL imported later (an import hook) or earlier takes reap's specs."""
    imports = "import reap\nassert 'torchrl' not in sys.modules\nimport torchrl.data" if first == "reap" else \
        "import torchrl.data\nimport reap"
    code = f"""import sys
{imports}
from torchrl.data.utils import ACTION_SPACE_MAP
from torchrl.modules import QValueModule
assert isinstance(reap.OneHot(2), torchrl.data.OneHot) and ACTION_SPACE_MAP[reap.Categorical] == "categorical"
print(QValueModule(spec=reap.OneHot(2)).action_space)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "REAP_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "one_hot"


@pytest.fixture(scope="module")
def cartpole_batch():
    """A batch of one-hot CartPole (TorchRL's default encoding) from a Q-network with e-greedy exploration."""
    env = GymEnv("CartPole-v1", num_envs=4)
    torch.manual_seed(0)
    qnet = TensorDictModule(torch.nn.Linear(4, 2), in_keys=["observation"], out_keys=["action_value"])
    greedy = TensorDictSequential(qnet, torchrl_modules.QValueModule(spec=env.action_spec_unbatched))
    policy = TensorDictSequential(greedy, torchrl_modules.EGreedyModule(env.action_spec, eps_init=0.5))
    with Collector(env, policy, frames_per_batch=64, total_frames=64) as collector:
        collector.set_seed(0)
        (batch,) = list(collector)
    return env, greedy, batch


@pytest.mark.parametrize("categorical", [False, True])
def test_qvalue_module_and_egreedy_on_a_reap_env(categorical):
    env = GymEnv("CartPole-v1", num_envs=3, categorical_action_encoding=categorical)
    env.set_seed(0)
    root = env.reset()
    values = torch.tensor([[0.1, 0.9], [0.7, 0.2], [0.4, 0.5]])
    picks = torch.tensor([1, 0, 1])
    expected = picks if categorical else torch.nn.functional.one_hot(picks, 2)
    outputs = []
    for unbatched, batched in zip(both(env.action_spec_unbatched), both(env.action_spec)):
        out = torchrl_modules.QValueModule(spec=unbatched)(root.clone().set("action_value", values))
        assert torch.equal(out["action"], expected)
        torch.manual_seed(5)  # epsilon 1: every action is drawn from the spec
        outputs.append(torchrl_modules.EGreedyModule(batched, eps_init=1.0)(out.clone())["action"])
    assert env.action_spec.is_in(outputs[0])
    assert torch.equal(outputs[0], outputs[1])


def test_dqn_loss_on_a_collected_batch(cartpole_batch):
    env, greedy, batch = cartpole_batch
    assert env.action_spec_unbatched.is_in(batch["action"][0, 0])
    losses = []
    for spec in both(env.action_spec):
        loss = torchrl_objectives.DQNLoss(greedy, action_space=spec, delay_value=False)
        losses.append(loss(batch.reshape(-1))["loss"])
    named = torchrl_objectives.DQNLoss(greedy, action_space="one-hot", delay_value=False)(batch.reshape(-1))["loss"]
    assert losses[0].item() > 0 and torch.equal(losses[0], losses[1]) and torch.equal(losses[0], named)


@pytest.mark.parametrize("name,spec,value", [
    ("Bounded", Bounded(-2.0, 2.0, shape=(1,)), torch.tensor([[-3.0], [0.5], [7.0]])),
    ("Categorical", Categorical(3), torch.tensor([-1.0, 1.4, 5.0])),
    ("OneHot", OneHot(3, dtype=torch.int64), torch.tensor([[0.0, 1.0, 3.0], [1.0, 0.0, 0.0], [2.0, 2.0, 0.0]])),
])
def test_safe_module_projects_into_a_reap_spec_as_into_torchrl_s(name, spec, value):
    outputs = []
    for s in both(spec):
        module = torchrl_modules.SafeModule(lambda x: value, in_keys=["observation"], out_keys=["action"],
                                            spec=s, safe=True)
        torch.manual_seed(3)  # OneHot projects by drawing in proportion to the entries
        outputs.append(module(TensorDict(observation=torch.zeros(3, 1), batch_size=[3]))["action"])
    assert torch.equal(outputs[0], outputs[1])
    assert spec.is_in(outputs[0].to(spec.dtype)) if name != "Categorical" else outputs[0].tolist() == [0, 1, 2]


def test_probabilistic_actor_clip_ppo_and_sac_losses_on_a_reap_env():
    env = GymEnv("Pendulum-v1", num_envs=2)
    torch.manual_seed(0)
    net = TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor()),
                           in_keys=["observation"], out_keys=["loc", "scale"])
    critic = torchrl_modules.ValueOperator(torch.nn.Linear(3, 1), in_keys=["observation"])
    qvalue = torchrl_modules.ValueOperator(torch.nn.Linear(4, 1), in_keys=["observation", "action"])
    low, high = env.action_spec_unbatched.space.low, env.action_spec_unbatched.space.high
    results = []
    for spec in both(env.action_spec_unbatched):
        actor = torchrl_modules.ProbabilisticActor(
            net, spec=spec, in_keys=["loc", "scale"], distribution_class=torchrl_modules.TanhNormal,
            distribution_kwargs={"low": low, "high": high}, return_log_prob=True, safe=True)
        with Collector(env, actor, frames_per_batch=32, total_frames=32) as collector:
            collector.set_seed(0)
            torch.manual_seed(1)
            (batch,) = list(collector)
        reap.GAE(gamma=0.99, lmbda=0.95, value_network=critic)(batch)
        torch.manual_seed(2)  # the entropy of a TanhNormal is estimated by sampling
        ppo = torchrl_objectives.ClipPPOLoss(actor, critic)(batch.reshape(-1))
        sac = torchrl_objectives.SACLoss(actor, qvalue, action_spec=spec)
        results.append((batch, ppo, sac.target_entropy))
    (batch, ppo, entropy), (ref_batch, ref_ppo, ref_entropy) = results
    assert env.action_spec_unbatched.is_in(batch["action"][0, 0])
    assert_same(batch, ref_batch)
    assert_same(ppo, ref_ppo)
    assert entropy.item() == ref_entropy.item() == -1.0
    sac = torchrl_objectives.SACLoss(actor, qvalue, action_spec=env.full_action_spec_unbatched)
    assert sac.target_entropy.item() == -1.0


def test_one_hot_and_categorical_methods_match_torchrl():
    ours, theirs = OneHot(3, shape=(2, 3)), torchrl_data.OneHot(3, shape=(2, 3))
    torch.manual_seed(0)
    draw = ours.rand((4,))
    torch.manual_seed(0)
    assert torch.equal(draw, theirs.rand((4,))) and ours.is_in(draw)
    assert not ours.is_in(torch.ones(2, 3, dtype=torch.bool))
    assert torch.equal(ours.to_categorical(draw), theirs.to_categorical(draw))
    assert ours.to_categorical_spec() == theirs.to_categorical_spec()
    assert ours.expand(5, 2, 3) == theirs.expand(5, 2, 3)
    assert torch.equal(ours.encode([2, 0]), theirs.encode([2, 0]))
    assert (ours.to_numpy(draw) == theirs.to_numpy(draw)).all()
    table = torch.arange(6.0).reshape(2, 3)
    one = torch.tensor([False, True, False])
    assert torch.equal(OneHot(3).index(one, table), torchrl_data.OneHot(3).index(one, table))
    cat, their_cat = Categorical(3, shape=(2,)), torchrl_data.Categorical(3, shape=(2,))
    index = torch.tensor([2, 0])
    assert torch.equal(cat.to_one_hot(index), their_cat.to_one_hot(index))
    assert cat.to_one_hot_spec() == their_cat.to_one_hot_spec()
    assert torch.equal(cat.index(index.unsqueeze(-1), table), their_cat.index(index.unsqueeze(-1), table))
    assert Bounded(-1.0, 1.0, shape=(1,)).expand(4, 1) == torchrl_data.Bounded(-1.0, 1.0, shape=(1,)).expand(4, 1)
    with pytest.raises(ValueError, match=r"The last 1 of the expanded shape torch.Size\(\[4, 2\]\) must match the "
                                         r"shape of the BoundedContinuous spec in expand\(\)."):
        Bounded(-1.0, 1.0, shape=(3,)).expand(4, 2)
    masked, their_masked = OneHot(3), torchrl_data.OneHot(3)
    for spec in (masked, their_masked):
        spec.update_mask(torch.tensor([True, False, True]))
    torch.manual_seed(0)
    draws = masked.rand((50,))
    torch.manual_seed(0)
    assert torch.equal(draws, their_masked.rand((50,))) and not draws[:, 1].any()
    assert masked == their_masked and masked.is_in(draws)
