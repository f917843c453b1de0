"""TorchRL's own test envs (``torchrl.testing.mocking_classes``) with their imports pointed at
reap, as a TorchRL user switches imports, against the same classes on TorchRL: the same specs,
keys, resets, rollouts (stopping at a done step or not, all envs done), ``step_and_maybe_reset``,
``fake_tensordict`` and a passing ``check_env_specs``. Nested keys, several actions and rewards,
done groups, lazy stacks of heterogeneous agents and class-level specs are all in there."""

import pathlib
import sys
import types

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from reap.envs.utils import check_env_specs

mocking = pytest.importorskip("torchrl.testing.mocking_classes")

CASES = [
    ("CountingEnv", {}),
    ("CountingEnv", {"batch_size": (3,), "max_steps": 2}),
    ("NestedCountingEnv", {}),
    ("NestedCountingEnv", {"nest_done": False}),
    ("NestedCountingEnv", {"has_root_done": True, "nest_reward": False}),
    ("NestedCountingEnv", {"batch_size": (2,), "nest_obs_action": False}),
    ("MultiKeyCountingEnv", {}),
    ("CountingBatchedEnv", {"batch_size": (3,), "max_steps": torch.tensor([1, 3, 5])}),
    ("ContinuousActionVecMockEnv", {}),
    ("DiscreteActionVecMockEnv", {}),
    ("MockBatchedLockedEnv", {}),
    ("EnvWithScalarAction", {}),
    ("HeterogeneousCountingEnv", {}),
    ("MultiAgentCountingEnv", {"n_agents": 3}),
    ("IncrementingEnv", {}),
    ("MockSerialEnv", {"device": "cpu"}),
]
KEY_LISTS = ("action_keys", "reward_keys", "done_keys", "observation_keys", "reset_keys", "done_keys_groups",
             "batch_size")
SPECS = ("full_action_spec", "full_observation_spec", "full_reward_spec", "full_done_spec", "full_state_spec")


@pytest.fixture(scope="module")
def on_reap():
    """TorchRL's mocking_classes run with reap's ``EnvBase`` and specs."""
    source = pathlib.Path(mocking.__file__).read_text()
    source = source.replace("from torchrl.data import (\n", "from torchrl.data import NonTensor\nfrom reap.data import (\n")
    source = source.replace("    NonTensor,\n    OneHot,", "    OneHot,")
    source = source.replace("from torchrl.envs.common import EnvBase", "from reap.envs import EnvBase")
    assert "from reap.envs import EnvBase" in source and "from reap.data import (" in source
    module = types.ModuleType("reap_mocking_classes")
    sys.modules[module.__name__] = module  # tensorclasses look their module up
    try:
        exec(compile(source, mocking.__file__, "exec"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


def assert_same_td(a, b, where=""):
    """Equal TensorDicts, a lazy stack compared member by member."""
    assert isinstance(a, TensorDictBase) and a.batch_size == b.batch_size, (where, a.batch_size, b.batch_size)
    for lazy in (a, b):
        if isinstance(lazy, LazyStackedTensorDict):
            for i, (x, y) in enumerate(zip(a.unbind(lazy.stack_dim), b.unbind(lazy.stack_dim))):
                assert_same_td(x, y, f"{where}[{i}]")
            return
    assert set(a.keys()) == set(b.keys()), (where, set(a.keys()) ^ set(b.keys()))
    for key in b.keys():
        x, y = a.get(key), b.get(key)
        if isinstance(y, TensorDictBase):
            assert_same_td(x, y, f"{where}.{key}")
        else:
            assert (x.shape, x.dtype) == (y.shape, y.dtype) and torch.equal(x, y), (f"{where}.{key}", x, y)


def outcomes(env) -> dict:
    """What an env gives under torch seeds, with random actions drawn from its spec."""
    out = {}
    for name, kwargs in [("nonstop", {"break_when_any_done": False}), ("stop", {}),
                         ("all-done", {"break_when_all_done": True})]:
        torch.manual_seed(0)
        env.set_seed(1)
        out["reset"] = env.reset()
        torch.manual_seed(2)
        env.set_seed(1)
        out[name] = env.rollout(8, **kwargs)
    torch.manual_seed(3)
    env.set_seed(1)
    stepped, following = env.step_and_maybe_reset(env.rand_action(env.reset()))
    out["stepped"], out["following"], out["fake"] = stepped, following, env.fake_tensordict()
    return out


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_torchrl_test_env_behaves_the_same_on_reap(on_reap, name, kwargs):
    ours, theirs = getattr(on_reap, name)(**kwargs), getattr(mocking, name)(**kwargs)
    for attr in KEY_LISTS:
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    for attr in SPECS:
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours.is_spec_locked and theirs.is_spec_locked
    ours_out, theirs_out = outcomes(ours), outcomes(theirs)
    for key in theirs_out:
        assert_same_td(ours_out[key], theirs_out[key], key)
    check_env_specs(ours)


def test_partial_reset_of_a_batched_env_updates_the_given_tensordict(on_reap):
    results = []
    for module in (on_reap, mocking):
        env = module.CountingEnv(batch_size=(3,), max_steps=1)
        torch.manual_seed(0)
        td = env.rollout(3, break_when_any_done=False)[..., -1]
        root = env.step_mdp(td)
        root["_reset"] = torch.tensor([[True], [False], [True]])
        out = env.reset(root)
        assert out is root and "_reset" not in out.keys()
        assert out["observation"].flatten().tolist() == [0, 1, 0]  # the env not reset keeps its count
        results.append(out)
    assert_same_td(*results)


def test_specs_stay_locked_and_the_setters_unlock_them(on_reap):
    env = on_reap.CountingEnv()
    with pytest.raises(RuntimeError, match="Cannot modify a locked Composite."):
        env.observation_spec["extra"] = on_reap.Unbounded(shape=(1,))
    env.observation_spec = on_reap.Composite(observation=on_reap.Unbounded(shape=(2,)))
    assert env.is_spec_locked and env.observation_spec["observation"].shape == (2,)
    env.set_spec_lock_(False)
    env.observation_spec["extra"] = on_reap.Unbounded(shape=(1,))
    assert env.observation_keys == ["extra", "observation"]
    unlocked = on_reap.CountingEnv(spec_locked=False)
    assert not unlocked.is_spec_locked and not unlocked.output_spec.is_locked


def test_a_custom_env_torchrl_style_errors_as_torchrl(on_reap):
    class SameTensordict(on_reap.CountingEnv):
        def _reset(self, tensordict, **kwargs):
            return tensordict

    class DoneAtReset(on_reap.CountingEnv):
        def _reset(self, tensordict, **kwargs):
            out = super()._reset(tensordict, **kwargs)
            out["done"] = torch.ones_like(out["done"])
            return out

    with pytest.raises(RuntimeError, match="EnvBase._reset should return outplace changes to the input tensordict"):
        SameTensordict().reset(TensorDict())
    with pytest.raises(RuntimeError, match=r"The done entry 'done' was \(partially\) True after a call to reset\(\)"):
        DoneAtReset().reset()
    assert DoneAtReset(allow_done_after_reset=True).reset()["done"].all()
    with pytest.raises(RuntimeError, match=r"Expected a tensordict with shape==env.batch_size, got torch.Size\(\[2\]\)"):
        on_reap.CountingEnv().step(TensorDict(action=torch.zeros(2, 1), batch_size=[2]))


def test_auto_specs_finds_the_specs_of_an_env_as_torchrl(on_reap):
    import torchrl.data

    outcomes = []
    for module, specs in ((on_reap, on_reap), (mocking, torchrl.data)):
        env = module.CountingEnv()
        td = env.reset()
        action_spec = env.full_action_spec.clone()

        def policy(td, action_spec=action_spec):
            return td.update(action_spec.rand())

        shape = env.batch_size
        env.full_observation_spec = specs.Composite(shape=shape)
        env.full_action_spec = specs.Composite(action=specs.Unbounded((0,)), shape=shape)
        env.full_reward_spec = specs.Composite(shape=shape)
        env.full_done_spec = specs.Composite(shape=shape)
        env.full_state_spec = specs.Composite(shape=shape)
        assert env.auto_specs_(policy, tensordict=td.copy(), observation_key="observation") is env
        env.check_env_specs(tensordict=td.copy())
        outcomes.append(env)
    ours, theirs = outcomes
    for name in SPECS:
        assert getattr(ours, name) == getattr(theirs, name), name
    with pytest.raises(RuntimeError, match=r"Keys \['observation'\] are unaccounted for"):
        on_reap.CountingEnv().auto_specs_(lambda td: td.set("action", torch.ones(1, dtype=torch.int8)),
                                          observation_key=[])


def test_rollout_wraps_a_policy_on_tensors_as_torchrl():
    from torchrl.envs import GymEnv as TorchRLGymEnv

    from reap import GymEnv

    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 2), _ArgMax())
    ours = GymEnv("CartPole-v1", categorical_action_encoding=True)
    ours.set_seed(3)  # both reset with the seed now: the rollouts start from the next episode
    theirs = TorchRLGymEnv("CartPole-v1", categorical_action_encoding=True)
    theirs.set_seed(3)
    a = ours.rollout(20, policy, break_when_any_done=False)
    b = theirs.rollout(20, policy, break_when_any_done=False)
    assert_same_td(a, b)
    with pytest.raises(TypeError, match="torch.nn.linear"):  # trusted, the module gets the TensorDict itself
        ours.rollout(2, policy, trust_policy=True)


class _ArgMax(torch.nn.Module):
    def forward(self, values):
        return values.argmax(-1)


def test_a_pickled_env_keeps_its_locked_specs(on_reap):
    import pickle

    env = pickle.loads(pickle.dumps(on_reap.NestedCountingEnv()))
    assert env.is_spec_locked and env.output_spec.is_locked and env.output_spec["full_done_spec", "data"].is_locked
    with pytest.raises(RuntimeError, match="Cannot modify a locked Composite."):
        env.input_spec["full_action_spec", "action"] = on_reap.Unbounded(())
    assert env.rollout(2)["next", "data", "states"].shape == (2, 3, 1)


@pytest.mark.parametrize("kwargs", [{}, {"break_when_all_done": True}, {"break_when_any_done": False}])
def test_serial_env_of_torchrl_test_envs_matches_torchrl_s(on_reap, kwargs):
    from functools import partial

    from torchrl.envs import SerialEnv as TorchRLSerialEnv

    from reap.envs import SerialEnv

    def policy(td):  # a new TensorDict, merged into the root by the rollout
        return td.empty().set("action", torch.ones(td.shape + (1,), dtype=torch.int8))

    ours = SerialEnv(4, [partial(on_reap.CountingEnv, 10 + i) for i in range(4)]).rollout(40, policy, **kwargs)
    theirs = TorchRLSerialEnv(4, [partial(mocking.CountingEnv, 10 + i) for i in range(4)]).rollout(40, policy, **kwargs)
    assert "truncated" not in ours["next"].keys()  # TorchRL's CountingEnv has none
    assert_same_td(ours, theirs)
