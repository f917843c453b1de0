"""``ActionDiscretizer``: TorchRL's transform, its bins' values and specs, against TorchRL's."""

import pytest
import torch
from tensordict import TensorDict

import reap.envs
import reap.specs
from reap.collectors import Collector
from reap.envs import ActionDiscretizer, GymEnv, SerialEnv
from reap.envs.utils import check_env_specs

Sampling = ActionDiscretizer.SamplingStrategy


def make_env_class(envs, specs, shape=(3,)):
    """A TorchRL-style env whose observation is the action it was stepped with."""
    low, high = torch.tensor([-1.0, 0.0, -3.0]), torch.tensor([1.0, 2.0, 5.0])
    if shape == ():
        low, high = low[0], high[0]

    class Echo(envs.EnvBase):
        def __init__(self):
            super().__init__()
            self.observation_spec = specs.Composite(observation=specs.Unbounded(shape))
            self.action_spec = specs.Bounded(low=low, high=high, shape=shape)
            self.reward_spec = specs.Unbounded((1,))

        def _reset(self, tensordict):
            return TensorDict(observation=torch.zeros(shape))

        def _step(self, tensordict):
            return TensorDict(observation=tensordict["action"].clone(), reward=torch.zeros(1),
                              done=torch.zeros(1, dtype=torch.bool))

        def _set_seed(self, seed):
            pass

    return Echo


@pytest.mark.parametrize("sampling, fractions", [
    (Sampling.LOW, [0.0, 0.25, 0.5, 0.75]), (Sampling.HIGH, [0.25, 0.5, 0.75, 1.0]),
    (Sampling.MEDIAN, [0.125, 0.375, 0.625, 0.875]), (None, [0.125, 0.375, 0.625, 0.875]),
])
@pytest.mark.parametrize("categorical", [True, False])
def test_each_bin_steps_the_env_at_its_place_in_the_range(sampling, fractions, categorical):
    env = make_env_class(reap.envs, reap.specs)().append_transform(
        ActionDiscretizer(4, sampling=sampling, categorical=categorical))
    check_env_specs(env)
    assert type(env.action_spec) is (reap.specs.MultiCategorical if categorical else reap.specs.MultiOneHot)
    low, high = torch.tensor([-1.0, 0.0, -3.0]), torch.tensor([1.0, 2.0, 5.0])
    for k, fraction in enumerate(fractions):
        index = torch.full((3,), k)
        action = index if categorical else torch.nn.functional.one_hot(index, 4).reshape(-1)
        td = env.step(env.reset().set("action", action))
        torch.testing.assert_close(td["next", "observation"], low + fraction * (high - low))


def test_random_sampling_lands_inside_the_bin():
    env = make_env_class(reap.envs, reap.specs)().append_transform(ActionDiscretizer(4, sampling=Sampling.RANDOM))
    low, width = torch.tensor([-1.0, 0.0, -3.0]), torch.tensor([2.0, 2.0, 8.0]) / 4
    values = torch.stack([env.step(env.reset().set("action", torch.full((3,), 2)))["next", "observation"]
                          for _ in range(50)])
    assert bool(((values >= low + 2 * width) & (values <= low + 3 * width)).all())
    assert values.std(0).min() > 0  # drawn, not fixed


def test_counts_per_entry_a_scalar_action_and_a_separate_discrete_key():
    env = make_env_class(reap.envs, reap.specs)().append_transform(
        ActionDiscretizer(torch.tensor([2, 3, 5]), out_action_key="action_disc", categorical=False))
    assert env.full_action_spec["action_disc"].nvec == [2, 3, 5] and "action" in env.full_state_spec.keys()
    check_env_specs(env)
    rollout = env.rollout(4)
    assert rollout["action_disc"].shape == (4, 10) and rollout["action"].shape == (4, 3)
    torch.testing.assert_close(rollout["next", "observation"], rollout["action"])
    scalar = make_env_class(reap.envs, reap.specs, shape=())().append_transform(ActionDiscretizer(4))
    assert type(scalar.action_spec) is reap.specs.Categorical and scalar.action_spec.space.n == 4
    check_env_specs(scalar)
    assert float(scalar.step(scalar.reset().set("action", torch.tensor(3)))["next", "observation"]) == 0.75


def test_a_collector_runs_a_discrete_policy_on_pendulum():
    make = lambda: GymEnv("Pendulum-v1", num_envs=2).append_transform(  # noqa: E731
        ActionDiscretizer(5, out_action_key="action_disc"))
    with Collector(make, None, frames_per_batch=20, total_frames=20) as collector:
        data = next(iter(collector))
    bins = torch.tensor([-1.6, -0.8, 0.0, 0.8, 1.6])
    torch.testing.assert_close(data["action"], bins[data["action_disc"]])
    serial = SerialEnv(2, lambda: GymEnv("Pendulum-v1").append_transform(
        ActionDiscretizer(5, out_action_key="action_disc")))
    rollout = serial.rollout(6)  # the sub-envs' records reach the batched env's steps too
    assert rollout["action"].shape == (2, 6, 1) and rollout["action"].abs().sum() > 0
    torch.testing.assert_close(rollout["action"], bins[rollout["action_disc"]])


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="num_intervals must be a positive int or a tensor of them, got 0"):
        ActionDiscretizer(0)
    with pytest.raises(TypeError, match="The action spec type must be Bounded"):
        reap.envs.GymEnv("CartPole-v1").append_transform(ActionDiscretizer(3))
    with pytest.raises(ValueError, match="num_intervals has 2 counts but the action 'action' has 3 entries"):
        make_env_class(reap.envs, reap.specs)().append_transform(ActionDiscretizer(torch.tensor([2, 3])))
    with pytest.raises(RuntimeError, match="Cannot execute transform ActionDiscretizer without a parent env"):
        ActionDiscretizer(3)._init()


@pytest.mark.parametrize("kwargs", [dict(num_intervals=4), dict(num_intervals=torch.tensor([2, 3, 5])),
                                    dict(num_intervals=4, out_action_key="action_disc")])
@pytest.mark.parametrize("sampling", [Sampling.MEDIAN, Sampling.LOW, Sampling.HIGH])
@pytest.mark.parametrize("categorical", [True, False])
def test_the_same_specs_and_values_as_torchrls(kwargs, sampling, categorical):
    torchrl_envs = pytest.importorskip("torchrl.envs")
    torchrl_data = pytest.importorskip("torchrl.data")
    key = kwargs.get("out_action_key", "action")
    envs = []
    for lib, specs in ((torchrl_envs, torchrl_data), (reap.envs, reap.specs)):
        transform = lib.ActionDiscretizer(categorical=categorical, sampling=sampling, **kwargs)
        envs.append(make_env_class(lib, specs)().append_transform(transform))
    theirs, ours = (env.full_action_spec[key] for env in envs)
    assert (type(theirs).__name__, theirs.shape, theirs.dtype) == (type(ours).__name__, ours.shape, ours.dtype)
    torch.manual_seed(0)
    actions = [theirs.rand() for _ in range(8)]
    values = [[env.transform.inv(env.reset().set(key, a.clone()))["action"] for a in actions] for env in envs]
    assert torch.equal(torch.stack(values[1]), torch.stack(values[0]))  # the same floats
    buffers = [{k: v for k, v in env.transform.state_dict().items()} for env in envs]
    assert buffers[0].keys() == buffers[1].keys() and all(torch.equal(buffers[0][k], buffers[1][k]) for k in buffers[0])


def test_state_dict_holds_torchrls_buffers_and_loads_back():
    env = reap.envs.GymEnv("Pendulum-v1").append_transform(ActionDiscretizer(5))
    state = env.transform.state_dict()
    assert sorted(state) == ["intervals", "nvec"] and state["nvec"].tolist() == [5]
    assert state["intervals"].shape == (1, 5)
    torch.testing.assert_close(state["intervals"][0], torch.tensor([-1.6, -0.8, 0.0, 0.8, 1.6]))
    other = reap.envs.GymEnv("Pendulum-v1").append_transform(ActionDiscretizer(5))
    other.transform.load_state_dict(state)
    per_entry = reap.envs.GymEnv("Pendulum-v1").append_transform(ActionDiscretizer(torch.tensor([3])))
    assert sorted(per_entry.transform.state_dict()) == ["num_intervals", "nvec"]  # no intervals buffer, as TorchRL's
