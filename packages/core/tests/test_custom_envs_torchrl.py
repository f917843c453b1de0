"""Custom envs written the TorchRL way: spec setters, ``__new__``, ``repr``, run by reap's Collector."""

import math

import pytest
import torch
from tensordict import NonTensorStack, TensorDict
from tensordict.nn import TensorDictModule

import reap
import reap.specs
from reap import Collector, EnvBase
from reap.specs import Binary, Bounded, Categorical, Composite, OneHot, Unbounded


def make_pendulum_class(base, specs):
    """TorchRL's pendulum tutorial env (flat keys, a private generator), on ``base`` with ``specs``."""

    class Pendulum(base):
        def __new__(cls, *args, **kwargs):
            return super().__new__(cls, *args, **kwargs)

        def __init__(self, seed=0, device="cpu"):
            super().__init__(device=device, batch_size=[])
            self.observation_spec = specs.Composite(
                th=specs.Bounded(low=-math.pi, high=math.pi, shape=(), dtype=torch.float32),
                thdot=specs.Bounded(low=-8.0, high=8.0, shape=(), dtype=torch.float32), shape=())
            self.state_spec = self.observation_spec.clone()
            self.action_spec = specs.Bounded(low=-2.0, high=2.0, shape=(1,), dtype=torch.float32)
            self.reward_spec = specs.Unbounded(shape=(1,))
            self.done_spec = specs.Binary(1, dtype=torch.bool)
            self.set_seed(seed)

        def _reset(self, tensordict):
            th = torch.rand((), generator=self.rng) * 2 * math.pi - math.pi
            thdot = torch.rand((), generator=self.rng) * 2 - 1
            return TensorDict({"th": th, "thdot": thdot}, batch_size=[])

        def _step(self, tensordict):
            th, thdot = tensordict["th"], tensordict["thdot"]
            u = tensordict["action"].squeeze(-1).clamp(-2.0, 2.0)
            costs = ((th + math.pi) % (2 * math.pi) - math.pi) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
            new_thdot = (thdot + (15.0 * th.sin() + 3.0 * u) * 0.05).clamp(-8.0, 8.0)
            reward = -costs.view(1)
            return TensorDict({"th": th + new_thdot * 0.05, "thdot": new_thdot, "reward": reward,
                               "done": torch.zeros_like(reward, dtype=torch.bool)}, batch_size=tensordict.shape)

        def _set_seed(self, seed):
            self.rng = torch.Generator().manual_seed(seed)

    return Pendulum


class PD(torch.nn.Module):
    def forward(self, th, thdot):
        return (-2.0 * th - 0.5 * thdot).clamp(-2.0, 2.0).unsqueeze(-1)


def test_tutorial_env_through_the_collector_matches_torchrl():
    policy = TensorDictModule(PD(), in_keys=["th", "thdot"], out_keys=["action"])
    env = make_pendulum_class(EnvBase, reap.specs)(seed=3)
    assert repr(env) == "Pendulum()"  # TorchRL's (an nn.Module's repr)
    assert sorted(env.state_spec.keys()) == ["th", "thdot"] and env.full_state_spec is env.state_spec
    assert env.done_spec == Composite({k: Binary(1, dtype=torch.bool) for k in ("done", "terminated")}, device="cpu")
    with reap.Collector(env, policy, frames_per_batch=50, total_frames=50, max_frames_per_traj=20) as c:
        (ours,) = list(c)
    assert ours["next", "truncated"].flatten().nonzero().flatten().tolist() == [19, 39]

    torchrl_envs = pytest.importorskip("torchrl.envs")
    torchrl_collectors = pytest.importorskip("torchrl.collectors")
    torchrl_data = pytest.importorskip("torchrl.data")
    theirs_env = make_pendulum_class(torchrl_envs.EnvBase, torchrl_data)(seed=3)
    collector = torchrl_collectors.Collector(theirs_env, policy, frames_per_batch=50, total_frames=50,
                                             max_frames_per_traj=20, auto_register_policy_transforms=False)
    theirs = next(iter(collector))
    collector.shutdown()
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    for key in theirs.keys(True, True):
        x, y = ours.get(key), theirs.get(key)
        assert (x.shape, x.dtype) == (y.shape, y.dtype) and torch.equal(x, y), key


class Bare(EnvBase):
    def __init__(self, batch_size=()):
        super().__init__(batch_size=batch_size)


def test_setters_follow_torchrl_rules():
    env = Bare(batch_size=(2,))
    env.observation_spec = Unbounded(shape=(2, 3))  # a leaf is the "observation" entry
    assert list(env.observation_spec.keys()) == ["observation"] and env.observation_spec.shape == (2,)
    env.full_action_spec = Composite(action=OneHot(4, shape=(2, 4)), shape=(2,))
    assert env.action_spec == OneHot(4, shape=(2, 4))
    env.action_spec_unbatched = Categorical(3)
    assert env.action_spec == Categorical(3, shape=(2,))
    env.reward_spec_unbatched = Unbounded(shape=(1,))
    assert env.reward_spec.shape == (2, 1)
    env.full_reward_spec = Composite(reward=Unbounded(shape=(2, 1), dtype=torch.float64), shape=(2,))
    assert env.reward_spec.dtype == torch.float64
    # a single done spec stands for every flag; a Composite's missing flags copy "done"
    env.done_spec = Categorical(2, shape=(2, 1), dtype=torch.bool)
    assert list(env.done_spec.keys()) == ["done", "terminated"]
    assert all(spec == Categorical(2, shape=(2, 1), dtype=torch.bool) for spec in env.done_spec.values())
    env.full_done_spec = Composite(terminated=Binary(shape=(2, 1), dtype=torch.bool), shape=(2,))
    assert env.done_keys == ["done", "terminated"]  # "done" from "terminated", as TorchRL's
    env.full_state_spec = Composite(observation=Unbounded(shape=(2, 3)), shape=(2,))
    assert list(env.input_spec["full_state_spec"].keys()) == ["observation"]
    env.state_spec = None
    assert env.state_spec.is_empty()


@pytest.mark.parametrize("name,value,error,match", [
    ("action_spec", Bounded(-1.0, 1.0, shape=(1,)), ValueError,
     r"The value of spec.shape \(torch.Size\(\[1\]\)\) must match the env batch size \(torch.Size\(\[2\]\)\). "
     r"Please use `env.action_spec_unbatched = value` to set unbatched versions instead."),
    ("reward_spec", Unbounded(shape=()), ValueError, r"Please use `env.reward_spec_unbatched = value`"),
    ("done_spec", Binary(shape=(2, 2), dtype=torch.bool), ValueError,
     r"done_spec: the 'done' flag must be a torch.bool spec of shape \(2, 1\)"),
    ("state_spec", Unbounded(shape=(2, 1)), TypeError, "The type of an state_spec must be Composite."),
    ("observation_spec", {"observation": 1}, TypeError, "observation_spec must be a reap spec, got dict"),
])
def test_setters_refuse_what_reap_cannot_run(name, value, error, match):
    env = Bare(batch_size=(2,))
    with pytest.raises(error, match=match):
        setattr(env, name, value)


def test_unbatched_reward_without_dims_and_torchrl_specs_are_refused():
    with pytest.raises(RuntimeError, match=r"the reward_spec's leaves shape cannot be empty"):
        Bare().reward_spec = Unbounded(shape=())
    torchrl_data = pytest.importorskip("torchrl.data")
    with pytest.raises(TypeError, match=r"must be a reap spec \(import specs from reap.data, not torchrl.data\)"):
        Bare().action_spec = torchrl_data.Bounded(-1.0, 1.0, shape=(1,))


def test_specs_set_before_super_init_and_unlocked_batches():
    class Early(EnvBase):
        def __init__(self):
            self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
            super().__init__()

    assert Early().action_spec == Bounded(-1.0, 1.0, shape=(1,))  # TorchRL's envs may (see the end of the file)
    assert not Bare.__new__(Bare, _batch_locked=False).batch_locked  # test_stateless_env.py runs such envs

    class Checked(EnvBase):
        def __init__(self, **kwargs):
            super().__init__(batch_size=[], device=None, allow_done_after_reset=True, spec_locked=False, **kwargs)

    assert Checked().allow_done_after_reset and Checked().device is None  # TorchRL's: no device given
    assert Checked(run_type_checks=True).run_type_checks and not Checked().run_type_checks


def _sloppy_env_class(base, specs):
    """A TorchRL-style env whose step writes ``wrong`` (``"observation"``: float64, ``"reward"``:
    int64, ``"done"``: uint8) in place of its specs' dtype."""

    class Sloppy(base):
        def __init__(self, wrong=None, **kwargs):
            super().__init__(**kwargs)
            self.wrong = wrong
            self.observation_spec = specs.Composite(observation=specs.Unbounded((2,)))
            self.action_spec = specs.Unbounded((1,))
            self.reward_spec = specs.Unbounded((1,))

        def _reset(self, td):
            return TensorDict(observation=torch.zeros(2), done=torch.zeros(1, dtype=torch.bool),
                              terminated=torch.zeros(1, dtype=torch.bool))

        def _step(self, td):
            out = TensorDict(observation=torch.ones(2), reward=torch.ones(1),
                             done=torch.zeros(1, dtype=torch.bool), terminated=torch.zeros(1, dtype=torch.bool))
            wrong = {"observation": torch.ones(2, dtype=torch.float64), "reward": torch.ones(1, dtype=torch.int64),
                     "done": torch.zeros(1, dtype=torch.uint8)}
            if self.wrong is not None:
                out[self.wrong] = wrong[self.wrong]
            return out

        def _set_seed(self, seed):
            pass

    return Sloppy


@pytest.mark.parametrize("wrong, match", [
    ("observation", r"value.dtype=torch.float64 but .*dtype=torch.float32"),
    ("reward", r"expected reward.dtype to be torch.float32 but got torch.int64"),
    ("done", r"expected done.dtype to be torch.bool but got torch.uint8"),
])
def test_run_type_checks_refuses_a_step_output_of_another_dtype_as_torchrl(wrong, match):
    sloppy = _sloppy_env_class(EnvBase, reap.specs)
    env = sloppy(wrong, run_type_checks=True)
    with pytest.raises(TypeError, match=match):
        env.rollout(2)
    assert sloppy(None, run_type_checks=True).rollout(2)["next", "reward"].tolist() == [[1.0], [1.0]]
    sloppy(wrong).rollout(2)  # unchecked by default
    torchrl_envs = pytest.importorskip("torchrl.envs")
    theirs = _sloppy_env_class(torchrl_envs.EnvBase, pytest.importorskip("torchrl.data"))(wrong, run_type_checks=True)
    with pytest.raises(TypeError, match=match.split(" but")[0].split(" to be")[0]):  # its message shows the spec
        theirs.rollout(2)


def _early_env(base, specs, batch=()):
    """TorchRL's test envs' way (EnvThatErrorsAfter10Iters): the specs set before ``super().__init__()``."""

    class Early(base):
        def __init__(self):
            self.action_spec = specs.Composite(action=specs.Unbounded((*batch, 1)), shape=batch)
            self.reward_spec = specs.Composite(reward=specs.Unbounded((*batch, 1)), shape=batch)
            self.done_spec = specs.Composite(done=specs.Unbounded((*batch, 1), dtype=torch.bool), shape=batch)
            self.observation_spec = specs.Composite(observation=specs.Unbounded((*batch, 1)), shape=batch)
            super().__init__(batch_size=batch)

        def _reset(self, tensordict, **kwargs):
            return self.full_observation_spec.zero().update(self.full_done_spec.zero())

        def _step(self, tensordict, **kwargs):
            obs = tensordict["observation"] + tensordict["action"]
            return TensorDict(observation=obs, reward=obs.clone(), done=obs > 2.5, terminated=obs > 2.5,
                              batch_size=self.batch_size)

        def _set_seed(self, seed):
            pass

    return Early()


@pytest.mark.parametrize("batch", [(), (2,)])
def test_specs_set_before_super_init_as_torchrl(batch):
    env = _early_env(EnvBase, reap.specs, batch)
    assert env.batch_size == batch and env.full_done_spec.shape == batch and env.observation_spec.shape == batch
    assert env.done_keys == ["done", "terminated"] and env.is_spec_locked
    policy = TensorDictModule(lambda obs: torch.ones_like(obs), in_keys=["observation"], out_keys=["action"])
    out = env.rollout(4, policy)
    assert out["next", "observation"].flatten().tolist() == [1.0, 2.0, 3.0] * max(1, math.prod(batch))
    torchrl_envs, torchrl_data = pytest.importorskip("torchrl.envs"), pytest.importorskip("torchrl.data")
    theirs = _early_env(torchrl_envs.EnvBase, torchrl_data, batch)
    for name in ("full_action_spec", "full_observation_spec", "full_reward_spec", "full_done_spec", "full_state_spec"):
        assert repr(getattr(env, name)) == repr(getattr(theirs, name)).replace("torchrl", "reap"), name
    assert (out == theirs.rollout(4, policy)).all()


def test_specs_set_before_super_init_errors():
    class WrongBatch(EnvBase):
        def __init__(self):
            self.action_spec = Unbounded((1,))
            super().__init__(batch_size=(3,))

    with pytest.raises(ValueError, match=r"WrongBatch: the specs set before super\(\).__init__\(\) must have the "
                                         r"env's batch size \(3,\) as leading dims"):
        WrongBatch()

    class NoInit(EnvBase):
        def __init__(self):
            self.action_spec = Unbounded((1,))

    with pytest.raises(RuntimeError, match=r"NoInit.__init__ must call super\(\).__init__\(batch_size=..., "
                                           r"device=...\) \(EnvBase's\)"):
        NoInit()



class FloatDone(EnvBase):
    """TorchRL's EnvThatErrorsAfter10Iters's specs: float done flags, written as 0.0 / 1.0."""

    def __init__(self):
        self.action_spec = Composite(action=Unbounded((1,)))
        self.done_spec = Composite(done=Unbounded((1,)))
        self.observation_spec = Composite(observation=Unbounded((1,)))
        super().__init__()
        self.t = 0

    def _reset(self, tensordict, **kwargs):
        self.t = 0
        return self.full_observation_spec.zero().update(self.full_done_spec.zero())

    def _step(self, tensordict):
        self.t += 1
        return TensorDict(observation=torch.full((1,), float(self.t)), reward=torch.zeros(1),
                          done=torch.full((1,), float(self.t % 3 == 0)))

    def _set_seed(self, seed):
        pass


def test_float_done_flags_are_kept_as_bools_with_a_warning():
    # TorchRL takes done flags of any dtype; reap's batches hold bools there, and says so
    with pytest.warns(UserWarning, match=r"FloatDone: done flags \{'done': torch.float32, 'terminated': "
                                         r"torch.float32\} are not torch.bool; reap keeps them as torch.bool \(a "
                                         r"nonzero value is True\)"):
        env = FloatDone()
    assert all(spec.dtype == torch.bool and spec.shape == (1,) for spec in env.full_done_spec.values())
    rollout = env.rollout(7, break_when_any_done=False)
    assert rollout["next", "done"].dtype == torch.bool
    assert rollout["next", "done"].flatten().tolist() == [False, False, True, False, False, True, False]
    with pytest.warns(UserWarning, match="FloatDone: done flags"):
        collector = Collector(FloatDone, frames_per_batch=6, total_frames=6)
    batch = next(iter(collector))
    collector.shutdown()
    assert batch["next", "terminated"].flatten().tolist() == [False, False, True, False, False, True]
    assert batch["collector", "traj_ids"].tolist() == [0, 0, 0, 1, 1, 1]


class _Silent(EnvBase):
    """Writes nothing: no reward although reap gave it one (TorchRL's EnvThatDoesNothing)."""

    def _reset(self, tensordict, **kwargs):
        return TensorDict(batch_size=self.batch_size)

    def _step(self, tensordict):
        return TensorDict(batch_size=self.batch_size)

    def _set_seed(self, seed):
        return seed


def test_an_env_that_declares_no_reward_gets_zero_rewards_one_that_does_must_write_them():
    # TorchRL's env without a reward spec has no reward; reap's batches keep a zero one
    rollout = _Silent().rollout(2)
    assert rollout["next", "reward"].tolist() == [[0.0], [0.0]]
    declared = _Silent()
    declared.reward_spec = Unbounded((1,))
    with pytest.raises(KeyError, match=r"_Silent._step returned no 'reward', which its reward spec declares"):
        declared.rollout(2)


def test_specs_made_from_data_describe_strings_as_non_tensor():
    from reap.envs.utils import make_composite_from_td
    from reap.specs import NonTensor

    data = TensorDict(obs=torch.zeros(2, 3), text=NonTensorStack("a", "b"), batch_size=[2])
    spec = make_composite_from_td(data)
    assert spec["text"] == NonTensor(shape=(2,), example_data="a") and spec["obs"].shape == (2, 3)
    torchrl_utils = pytest.importorskip("torchrl.envs.utils")
    theirs = torchrl_utils.make_composite_from_td(data)["text"]
    assert (theirs.shape, theirs.example_data) == (spec["text"].shape, spec["text"].example_data)


class _Params(EnvBase):
    """An input the env reads but does not observe (``state_spec`` only): ``scale``, set at reset."""

    def __init__(self, write_next: bool = True):
        super().__init__()
        self.write_next = write_next
        self.observation_spec = Composite(observation=Unbounded(shape=(3,)))
        self.action_spec = Unbounded(shape=(1,))
        self.reward_spec = Unbounded(shape=(1,))
        self.state_spec = Composite(scale=Unbounded(shape=(4,)))

    def _reset(self, td):
        return TensorDict(observation=torch.zeros(3), scale=torch.ones(4))

    def _step(self, td):
        scale = td["scale"]
        out = TensorDict(observation=torch.full((3,), float(scale.sum())), reward=torch.zeros(1),
                         done=torch.zeros(1, dtype=torch.bool), terminated=torch.zeros(1, dtype=torch.bool))
        return out.set("scale", scale * 2) if self.write_next else out  # TorchRL ignores the new value

    def _set_seed(self, seed):
        pass


@pytest.mark.parametrize("write_next", [True, False])
def test_a_state_entry_that_is_not_observed_is_kept_from_the_root_as_in_torchrl(write_next):
    # TorchRL's step_mdp takes state entries from the root: each step reads scale == 1, whatever
    # the env's _step writes in "next" (were refused: reap required state entries to be observations)
    from reap.envs import SerialEnv, StepCounter, TransformedEnv
    from reap.envs.utils import check_env_specs

    env = _Params(write_next)
    check_env_specs(env)
    rollout = env.rollout(3)
    assert rollout["scale"][:, 0].tolist() == [1.0] * 3 and rollout["next", "observation"][:, 0].tolist() == [4.0] * 3
    assert (("next", "scale") in rollout.keys(True)) == write_next  # the env's output, as TorchRL's
    for make in (lambda: _Params(write_next), lambda: SerialEnv(2, lambda: _Params(write_next)),
                 lambda: TransformedEnv(_Params(write_next), StepCounter())):
        with reap.Collector(make(), None, frames_per_batch=6, total_frames=6) as collector:
            batch = next(iter(collector))
        assert batch["scale"].eq(1).all() and batch["next", "observation"].eq(4).all()
        assert batch["next", "scale"].eq(1).all()  # reap's batches carry it in "next" too (the root's)
