"""reap's transforms, ``MultiStep`` and ``step_mdp`` give TorchRL's output on the same input.

Each case runs the same seeded gymnasium env under the same actions through a reap
``TransformedEnv`` and a TorchRL one, and compares every entry of the rollouts exactly (keys,
shapes, dtypes, values). CartPole under a constant action terminates every ~10 steps, so its
rollouts cross several resets. Needs TorchRL (``uv run --group bench pytest ...``).
"""

import warnings

import pytest
import torch
from tensordict import TensorDict

import reap
import reap.envs.transforms as RT
import reap.specs
from reap.specs import Unbounded

torchrl_envs = pytest.importorskip("torchrl.envs")
T = pytest.importorskip("torchrl.envs.transforms")
torchrl_data = pytest.importorskip("torchrl.data")
torchrl_postprocs = pytest.importorskip("torchrl.data.postprocs")
torchrl_utils = pytest.importorskip("torchrl.envs.utils")

COPY_OBS = ({"in_keys": ["observation"], "out_keys": ["o2"], "create_copy": True},)
NESTED = ("agent", "obs")
NESTED_COPY = {"in_keys": ["observation"], "out_keys": [NESTED], "create_copy": True}

CASES = {
    "InitTracker": (lambda: reap.InitTracker(), lambda: T.InitTracker()),
    "TensorDictPrimer": (
        lambda: reap.TensorDictPrimer({"h": Unbounded(shape=(2,))}, default_value=1.5),
        lambda: T.TensorDictPrimer(h=torchrl_data.Unbounded(shape=(2,)), default_value=1.5),
    ),
    "RewardScaling": (lambda: reap.RewardScaling(1.0, 2.0), lambda: T.RewardScaling(1.0, 2.0)),
    "RewardScaling-standard_normal": (
        lambda: reap.RewardScaling(1.0, 2.0, standard_normal=True),
        lambda: T.RewardScaling(1.0, 2.0, standard_normal=True),
    ),
    "RewardClipping": (lambda: reap.RewardClipping(-5.0, -1.0), lambda: T.RewardClipping(-5.0, -1.0)),
    "RenameTransform": (
        lambda: reap.RenameTransform(["observation"], ["obs"]),
        lambda: T.RenameTransform(["observation"], ["obs"]),
    ),
    "RenameTransform-copy": (
        lambda: reap.RenameTransform(**COPY_OBS[0]), lambda: T.RenameTransform(**COPY_OBS[0]),
    ),
    "ExcludeTransform": (
        lambda: reap.Compose(reap.RenameTransform(**COPY_OBS[0]), reap.ExcludeTransform("observation")),
        lambda: T.Compose(T.RenameTransform(**COPY_OBS[0]), T.ExcludeTransform("observation")),
    ),
    "SelectTransform": (
        lambda: reap.Compose(reap.RenameTransform(**COPY_OBS[0]), reap.SelectTransform("o2")),
        lambda: T.Compose(T.RenameTransform(**COPY_OBS[0]), T.SelectTransform("o2")),
    ),
    "CatTensors": (
        lambda: reap.Compose(reap.RenameTransform(**COPY_OBS[0]), reap.CatTensors(["observation", "o2"], "vec")),
        lambda: T.Compose(T.RenameTransform(**COPY_OBS[0]), T.CatTensors(["observation", "o2"], "vec")),
    ),
    "UnsqueezeTransform": (
        lambda: reap.UnsqueezeTransform(-2, in_keys=["observation"]),
        lambda: T.UnsqueezeTransform(-2, in_keys=["observation"]),
    ),
    "CatFrames": (
        lambda: reap.CatFrames(3, -1, in_keys=["observation"]), lambda: T.CatFrames(3, -1, in_keys=["observation"]),
    ),
    "CatFrames-constant-out_keys": (
        lambda: reap.CatFrames(3, -1, in_keys=["observation"], out_keys=["stack"], padding="constant",
                               padding_value=7.0),
        lambda: T.CatFrames(3, -1, in_keys=["observation"], out_keys=["stack"], padding="constant",
                            padding_value=7.0),
    ),
    "FrameSkipTransform": (lambda: reap.FrameSkipTransform(3), lambda: T.FrameSkipTransform(3)),
    "ClipTransform-reward": (
        lambda: reap.ClipTransform(in_keys=["observation", "reward"], low=-0.5, high=0.5),
        lambda: T.ClipTransform(in_keys=["observation", "reward"], low=-0.5, high=0.5),
    ),
    "RewardScaling-out_keys": (
        lambda: reap.RewardScaling(1.0, 2.0, out_keys=["scaled"]), lambda: T.RewardScaling(1.0, 2.0, out_keys=["scaled"]),
    ),
    "VecNorm-out_keys": (
        lambda: reap.VecNorm(in_keys=["observation"], out_keys=["obs_norm"], decay=0.9),
        lambda: T.VecNorm(in_keys=["observation"], out_keys=["obs_norm"], decay=0.9),
    ),
    "VecNormV2": (
        lambda: reap.VecNorm(in_keys=["observation"], decay=0.9, new_api=True),
        lambda: T.VecNorm(in_keys=["observation"], decay=0.9, new_api=True),
    ),
    "VecNormV2-stateless": (  # the statistics are observations, "_vecnorm_loc", ..., started anew at each reset
        # (TorchRL 0.14.1's fails at the first reset when a reward is among in_keys; reap's takes it)
        lambda: reap.VecNorm(in_keys=["observation"], out_keys=["obs_norm"], decay=0.9, new_api=True, stateful=False),
        lambda: T.VecNorm(in_keys=["observation"], out_keys=["obs_norm"], decay=0.9, new_api=True, stateful=False),
    ),
    "TargetReturn": (lambda: reap.TargetReturn(10.0), lambda: T.TargetReturn(10.0)),
    "TimeMaxPool": (lambda: reap.TimeMaxPool(in_keys=["observation"], out_keys=["pooled"], T=3),
                    lambda: T.TimeMaxPool(in_keys=["observation"], out_keys=["pooled"], T=3)),
    "TrajCounter": (lambda: reap.Compose(reap.StepCounter(7), reap.TrajCounter()),
                    lambda: T.Compose(T.StepCounter(7), T.TrajCounter())),
    "FiniteTensorDictCheck": (lambda: reap.FiniteTensorDictCheck(), lambda: T.FiniteTensorDictCheck()),
    "FlattenObservation": (
        lambda: reap.Compose(reap.UnsqueezeTransform(-2, in_keys=["observation"]),
                             reap.FlattenObservation(-2, -1, in_keys=["observation"], out_keys=["flat"])),
        lambda: T.Compose(T.UnsqueezeTransform(-2, in_keys=["observation"]),
                          T.FlattenObservation(-2, -1, in_keys=["observation"], out_keys=["flat"])),
    ),
    "TargetReturn-constant": (lambda: reap.TargetReturn(5.0, mode="constant"), lambda: T.TargetReturn(5.0, mode="constant")),
    "RewardSum-reward_spec": (lambda: reap.RewardSum(reward_spec=True), lambda: T.RewardSum(reward_spec=True)),
    "Stack-Permute-Squeeze": (  # reshaping transforms in a chain, each replacing the previous array
        lambda: reap.Compose(reap.RenameTransform(**COPY_OBS[0]), reap.Stack(["observation", "o2"], "st", dim=-2),
                             reap.PermuteTransform([-1, -2], in_keys=["st"]),
                             reap.UnsqueezeTransform(-1, in_keys=["st"]), reap.SqueezeTransform(-1, in_keys=["st"])),
        lambda: T.Compose(T.RenameTransform(**COPY_OBS[0]), T.Stack(["observation", "o2"], "st", dim=-2),
                          T.PermuteTransform([-1, -2], in_keys=["st"]),
                          T.UnsqueezeTransform(-1, in_keys=["st"]), T.SqueezeTransform(-1, in_keys=["st"])),
    ),
    "subclass-of-a-shipped-transform": (  # overrides a TorchRL hook: runs through it, as TorchRL does
        lambda: shifted(reap.RewardScaling)(0.5, 2.0), lambda: shifted(T.RewardScaling)(0.5, 2.0),
    ),
    "nested-keys": (  # a copy into a sub-tensordict, then transforms reading and writing nested keys
        lambda: reap.Compose(reap.RenameTransform(**NESTED_COPY), reap.ObservationNorm(0.5, 2.0, in_keys=[NESTED]),
                             reap.CatFrames(2, -1, in_keys=[NESTED], out_keys=[("agent", "stack")]),
                             reap.RewardScaling(0.0, 3.0, out_keys=[("agent", "reward")])),
        lambda: T.Compose(T.RenameTransform(**NESTED_COPY), T.ObservationNorm(0.5, 2.0, in_keys=[NESTED]),
                          T.CatFrames(2, -1, in_keys=[NESTED], out_keys=[("agent", "stack")]),
                          T.RewardScaling(0.0, 3.0, out_keys=[("agent", "reward")])),
    ),
    "nested-keys-last": (  # the nested entry written last: each step's root keeps its own value
        lambda: reap.Compose(reap.RenameTransform(**NESTED_COPY), reap.ClipTransform(in_keys=[NESTED], low=-0.5, high=0.5),
                             reap.VecNorm(in_keys=[NESTED], out_keys=[("norm", "obs")], decay=0.9),
                             reap.RewardSum(in_keys=["reward"], out_keys=[("agent", "episode_reward")])),
        lambda: T.Compose(T.RenameTransform(**NESTED_COPY), T.ClipTransform(in_keys=[NESTED], low=-0.5, high=0.5),
                          T.VecNorm(in_keys=[NESTED], out_keys=[("norm", "obs")], decay=0.9),
                          T.RewardSum(in_keys=["reward"], out_keys=[("agent", "episode_reward")])),
    ),
    "NoopResetEnv": (lambda: reap.NoopResetEnv(5), lambda: T.NoopResetEnv(5)),
    "SignTransform-BinarizeReward": (  # the sign of the observation (a copy) and reward, then a 0/1 reward
        lambda: reap.Compose(reap.RenameTransform(**COPY_OBS[0]),
                             RT.SignTransform(in_keys=["o2", "reward"]), RT.BinarizeReward(), RT.RemoveEmptySpecs()),
        lambda: T.Compose(T.RenameTransform(**COPY_OBS[0]),
                          T.SignTransform(in_keys=["o2", "reward"]), T.BinarizeReward(), T.RemoveEmptySpecs()),
    ),
    "BinarizeReward-out_key": (
        lambda: RT.BinarizeReward(out_keys=["won"]), lambda: T.BinarizeReward(out_keys=["won"]),
    ),
    "ObservationNorm": (
        lambda: reap.ObservationNorm(loc=0.5, scale=2.0, in_keys=["observation"]),
        lambda: T.ObservationNorm(loc=0.5, scale=2.0, in_keys=["observation"]),
    ),
    "ObservationNorm-standard_normal-out_keys": (
        lambda: reap.ObservationNorm(0.5, 2.0, in_keys=["observation"], out_keys=["o2"], standard_normal=True),
        lambda: T.ObservationNorm(0.5, 2.0, in_keys=["observation"], out_keys=["o2"], standard_normal=True),
    ),
    "ClipTransform": (
        lambda: reap.ClipTransform(in_keys=["observation"], low=-0.5, high=0.5),
        lambda: T.ClipTransform(in_keys=["observation"], low=-0.5, high=0.5),
    ),
    "DoubleToFloat": (lambda: reap.DoubleToFloat(), lambda: T.DoubleToFloat()),
    "StepCounter": (lambda: reap.StepCounter(max_steps=4), lambda: T.StepCounter(max_steps=4)),
    "stack": (  # several at once, in a chain that renames, reshapes and reads earlier outputs
        lambda: reap.Compose(reap.StepCounter(), reap.InitTracker(), reap.RewardScaling(0.5, 3.0),
                             reap.CatFrames(2, -1, in_keys=["observation"]), reap.RewardSum(),
                             reap.RenameTransform(["observation"], ["pixels"])),
        lambda: T.Compose(T.StepCounter(), T.InitTracker(), T.RewardScaling(0.5, 3.0),
                          T.CatFrames(2, -1, in_keys=["observation"]), T.RewardSum(),
                          T.RenameTransform(["observation"], ["pixels"])),
    ),
}

def shifted(scaling_class):
    """A user's subclass of ``RewardScaling`` that overrides ``_apply_transform``."""

    class Shifted(scaling_class):
        def _apply_transform(self, reward):
            return super()._apply_transform(reward) + 1

    return Shifted


ENVS = {
    "Pendulum-v1": ([torch.tensor([v]) for v in torch.linspace(-2, 2, 30).tolist()], {}),
    "CartPole-v1": ([torch.tensor(1)] * 40, {"categorical_action_encoding": True}),
}


def rollout_both(make_reap, make_torchrl, env_id):
    actions, env_kwargs = ENVS[env_id]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = reap.TransformedEnv(reap.GymEnv(env_id, **env_kwargs), make_reap())
        theirs = torchrl_envs.TransformedEnv(torchrl_envs.GymEnv(env_id, **env_kwargs), make_torchrl())
        ours.set_seed(0)  # resets the base env with the seed, as TorchRL's
        theirs.set_seed(0)
        torch.manual_seed(1)  # NoopResetEnv draws from torch's generator
        a = ours.rollout(len(actions), actions=actions, break_when_any_done=False)
        torch.manual_seed(1)
        b = theirs.rollout(len(actions), actions=actions, break_when_any_done=False)
    ours.close(), theirs.close()
    return a, b


def assert_same(a, b):
    keys = set(a.keys(True, True))
    assert keys == set(b.keys(True, True)), keys ^ set(b.keys(True, True))
    for key in keys:
        x, y = a.get(key), b.get(key)
        assert (x.shape, x.dtype) == (y.shape, y.dtype), key
        assert torch.equal(x, y), (key, x, y)


@pytest.mark.parametrize("env_id", list(ENVS))
@pytest.mark.parametrize("name", list(CASES))
def test_transform_matches_torchrl_step_by_step(name, env_id):
    a, b = rollout_both(*CASES[name], env_id)
    assert_same(a, b)
    if env_id == "CartPole-v1":
        assert a["next", "done"].sum() >= 2  # the comparison crossed resets


def toy_env_class(base, specs):
    """A TorchRL-style env (the same code on TorchRL's ``EnvBase`` or reap's) with float64 values and
    uint8 pixels."""

    class Toy(base):
        def __init__(self):
            super().__init__(batch_size=[])
            self.observation_spec = specs.Composite(
                observation=specs.Unbounded(shape=(3,), dtype=torch.float64),
                pixels=specs.Bounded(0, 255, shape=(4, 5, 3), dtype=torch.uint8))
            self.action_spec = specs.Bounded(-1.0, 1.0, shape=(1,), dtype=torch.float64)
            self.reward_spec = specs.Composite(reward=specs.Unbounded(shape=(1,)), rv=specs.Unbounded(shape=(2,)))
            flag = specs.Categorical(2, shape=(1,), dtype=torch.bool)
            self.done_spec = specs.Composite(done=flag, terminated=flag.clone(), truncated=flag.clone())

        def _reset(self, tensordict):
            self.count = 0
            self.state = torch.linspace(0, 1, 3, dtype=torch.float64)
            return self._out()

        def _out(self, reward=None):
            pixels = ((torch.arange(60).reshape(4, 5, 3) + 7 * self.count) % 256).to(torch.uint8)
            done = torch.tensor([self.count >= 5])
            out = TensorDict(observation=self.state.clone(), pixels=pixels, done=done, terminated=done.clone(),
                             truncated=torch.zeros(1, dtype=torch.bool))
            if reward is not None:
                out["reward"] = reward
            return out

        def _step(self, tensordict):
            self.count += 1
            self.state = self.state * 0.5 + tensordict["action"]
            out = self._out(reward=-self.state.abs().sum(-1, keepdim=True).float())
            out["rv"] = self.state[:2].float()
            return out

        def _set_seed(self, seed):
            pass

    return Toy


TOY_CASES = {
    "DoubleToFloat": (lambda R: R.DoubleToFloat()),  # observation, and the action on the way in
    "DoubleToFloat-in_keys": (lambda R: R.DoubleToFloat(in_keys=["observation"], in_keys_inv=["action"])),
    "DTypeCastTransform-out_keys": (lambda R: R.DTypeCastTransform(torch.float64, torch.float32, in_keys=["observation"],
                                                                 out_keys=["obs32"])),
    "ToTensorImage": (lambda R: R.ToTensorImage()),
    "GrayScale": (lambda R: R.Compose(R.ToTensorImage(), R.GrayScale())),
    "GrayScale-uint8-out_keys": (lambda R: R.Compose(R.PermuteTransform([-1, -3, -2], in_keys=["pixels"]),
                                                     R.GrayScale(in_keys=["pixels"], out_keys=["gray"]))),
    "ToTensorImage-unsqueeze-out_keys": (lambda R: R.ToTensorImage(unsqueeze=True, in_keys=["pixels"], out_keys=["img"])),
    "ObservationNorm-inverse": (lambda R: R.ObservationNorm(0.5, 2.0, in_keys=["observation"], in_keys_inv=["action"])),
    "LineariseRewards": (lambda R: R.LineariseRewards(in_keys=["rv"], weights=[1.0, -2.0])),
    "LineariseRewards-out_keys": (lambda R: R.LineariseRewards(in_keys=["rv"], out_keys=["r1"])),
}


@pytest.mark.parametrize("name", list(TOY_CASES))
def test_transform_matches_torchrl_on_a_torchrl_style_env(name):
    from tensordict import TensorDict  # noqa: F401  (the toy env's module global)

    actions = [torch.tensor([v], dtype=torch.float32 if "Float" in name else torch.float64)
               for v in (0.5, -0.25, 1.0, 0.0, -1.0, 0.75, 0.25)]
    ours = reap.TransformedEnv(toy_env_class(reap.EnvBase, reap.specs)(), TOY_CASES[name](reap))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torchrl_envs.TransformedEnv(toy_env_class(torchrl_envs.EnvBase, torchrl_data)(), TOY_CASES[name](T))
    assert_same(ours.rollout(7, actions=actions, break_when_any_done=False),
                theirs.rollout(7, actions=actions, break_when_any_done=False))
    assert ours.full_action_spec["action"].dtype == theirs.full_action_spec["action"].dtype


def test_transformed_specs_match_torchrl():
    make_reap, make_torchrl = CASES["stack"]
    ours = reap.TransformedEnv(reap.GymEnv("Pendulum-v1"), make_reap())
    theirs = torchrl_envs.TransformedEnv(torchrl_envs.GymEnv("Pendulum-v1"), make_torchrl())
    fake, ref = ours.fake_tensordict(), theirs.fake_tensordict()
    assert set(fake.keys(True, True)) == set(ref.keys(True, True))
    for key in ref.keys(True, True):
        assert (fake.get(key).shape, fake.get(key).dtype) == (ref.get(key).shape, ref.get(key).dtype), key
    assert ours.observation_spec["pixels"].shape == theirs.observation_spec["pixels"].shape == (6,)


@pytest.mark.parametrize("n_steps", [1, 3, 5])
def test_multistep_matches_torchrl(n_steps):
    env = reap.TransformedEnv(reap.GymEnv("CartPole-v1", num_envs=2), reap.StepCounter())
    with reap.Collector(env, None, frames_per_batch=80, total_frames=80) as collector:
        collector.set_seed(0)
        (batch,) = list(collector)
    assert batch["next", "done"].sum() >= 2
    assert_same(reap.MultiStep(0.9, n_steps)(batch.clone()),
                torchrl_postprocs.MultiStep(0.9, n_steps)(batch.clone()))


@pytest.mark.parametrize("kwargs", [{}, {"keep_other": False}, {"exclude_reward": False},
                                    {"exclude_done": True}, {"exclude_action": False}])
def test_step_mdp_matches_torchrl(kwargs):
    td = reap.GymEnv("Pendulum-v1").rollout(3)[1]
    td["loc"] = torch.zeros(1)
    assert_same(reap.step_mdp(td.clone(), **kwargs), torchrl_utils.step_mdp(td.clone(), **kwargs))


VECNORM_CASES = {  # env id, num_envs, VecNorm keyword arguments (TorchRL's defaults: observation and reward)
    "Pendulum-defaults": ("Pendulum-v1", None, {}),
    "Pendulum-decay-eps": ("Pendulum-v1", None, {"in_keys": ["observation"], "decay": 0.9, "eps": 1e-4}),
    "Pendulum-large-eps": ("Pendulum-v1", None, {"decay": 0.99, "eps": 1e-2}),
    "CartPole-resets": ("CartPole-v1", None, {"in_keys": ["observation"], "decay": 0.95}),
    "Pendulum-4-envs": ("Pendulum-v1", 4, {"decay": 0.9}),
}


@pytest.mark.parametrize("case", list(VECNORM_CASES))
def test_vec_norm_matches_torchrl_step_by_step(case):
    env_id, num_envs, kwargs = VECNORM_CASES[case]
    actions, env_kwargs = ENVS[env_id]
    batch = {} if num_envs is None else {"num_envs": num_envs}
    if num_envs is not None:
        actions = [a.expand(num_envs, *a.shape).clone() for a in actions]
    with pytest.warns(FutureWarning, match="VecNormV2"):  # 0.14.1's VecNorm is the old class
        theirs_norm = T.VecNorm(**kwargs)
    assert type(theirs_norm).__name__ == "VecNorm"
    ours_norm = reap.VecNorm(**kwargs)
    ours = reap.TransformedEnv(reap.GymEnv(env_id, **env_kwargs, **batch), ours_norm)
    theirs = torchrl_envs.TransformedEnv(torchrl_envs.GymEnv(env_id, **env_kwargs, **batch), theirs_norm)
    ours.set_seed(0)  # resets the base env with the seed, as TorchRL's
    theirs.set_seed(0)
    a = ours.rollout(len(actions), actions=actions, break_when_any_done=False)
    b = theirs.rollout(len(actions), actions=actions, break_when_any_done=False)
    ours.close(), theirs.close()
    assert_same(a, b)
    if env_id == "CartPole-v1":
        assert a["next", "done"].sum() >= 2  # the comparison crossed resets
    assert ours_norm.in_keys == theirs_norm.in_keys
    ours_stats, theirs_stats = ours_norm.get_extra_state(), theirs_norm.get_extra_state()
    assert ours_stats.keys() == theirs_stats.keys()
    for name, value in theirs_stats.items():
        assert (ours_stats[name].shape, ours_stats[name].dtype) == (value.shape, value.dtype), name
        assert torch.equal(ours_stats[name], value), name
    ours_fixed, theirs_fixed = ours_norm.to_observation_norm(), theirs_norm.to_observation_norm()
    if len(kwargs.get("in_keys", "ab")) == 1:
        ours_fixed, theirs_fixed = [ours_fixed], [theirs_fixed]
    for ours_t, theirs_t in zip(ours_fixed, theirs_fixed, strict=True):
        assert torch.equal(ours_t.loc, theirs_t.loc) and torch.equal(ours_t.scale, theirs_t.scale)


def through_torchrl_hooks(transform):
    """``transform`` (each of a ``Compose``) made to run through its TorchRL hooks, not the arrays."""
    for t in (transform if isinstance(transform, reap.Compose) else [transform]):
        cls = type(t)
        t.__class__ = type(f"Hooked{cls.__name__}", (cls,), {"_step": lambda self, td, nxt, cls=cls: cls._step(self, td, nxt)})
    return transform


@pytest.mark.parametrize("name", list(CASES))
def test_tensordict_hooks_of_reap_transforms_match_torchrl(name):
    """The TorchRL hooks of reap's transforms (what a subclass that overrides one runs, and what
    ``t._call``/``t._step`` give) are TorchRL's too: the same rollouts without the array hooks."""
    make_reap, make_torchrl = CASES[name]
    from reap.envs.transforms.transform import runs_on_arrays

    hooked = through_torchrl_hooks(make_reap())
    assert not any(runs_on_arrays(t) for t in (hooked if isinstance(hooked, reap.Compose) else [hooked]))
    a, b = rollout_both(lambda: hooked, make_torchrl, "CartPole-v1")
    assert_same(a, b)


def _empty_specs_env_class(base, composite, unbounded):
    """An env (of any batch size) with empty Composites in its observation, reward and state
    specs; each step adds the action to its observation, whose sum is the reward."""

    class WithEmpty(base):
        def __init__(self, batch_size=()):
            super().__init__(batch_size=batch_size)
            b = tuple(self.batch_size)
            self.observation_spec = composite(observation=unbounded((*b, 3)), shape=b,
                                              other=composite(inner=composite(shape=b), shape=b))
            self.action_spec = unbounded((*b, 3))
            self.reward_spec = composite(reward=unbounded((*b, 1)), other_reward=composite(shape=b), shape=b)
            self.state_spec = composite(state=composite(sub=composite(shape=b), shape=b), shape=b)
            self.count = torch.zeros(*b, 3)

        def _reset(self, tensordict):
            self.count = torch.zeros_like(self.count)
            return self.full_done_spec.zero().set("observation", self.count.clone())

        def _step(self, tensordict):
            self.count = self.count + tensordict["action"]
            out = self.full_done_spec.zero().set("observation", self.count.clone())
            return out.set("reward", self.count.sum(-1, keepdim=True))

        def _set_seed(self, seed):
            return seed

    return WithEmpty


@pytest.mark.parametrize("layout", ["batch_size", "serial", "serial_of_transformed"])
def test_remove_empty_specs_on_batched_envs_matches_torchrl(layout):
    ours_cls = _empty_specs_env_class(reap.envs.EnvBase, reap.specs.Composite, Unbounded)
    theirs_cls = _empty_specs_env_class(torchrl_envs.EnvBase, torchrl_data.Composite, torchrl_data.Unbounded)
    ref = torchrl_envs.SerialEnv(2, lambda: torchrl_envs.TransformedEnv(theirs_cls(), T.RemoveEmptySpecs()))
    if layout == "batch_size":
        env = RT.TransformedEnv(ours_cls((2,)), RT.RemoveEmptySpecs())
        ref = torchrl_envs.TransformedEnv(theirs_cls((2,)), T.RemoveEmptySpecs())
    elif layout == "serial":  # TorchRL's SerialEnv refuses an env with empty specs; reap's takes it
        env = RT.TransformedEnv(reap.envs.SerialEnv(2, ours_cls), RT.RemoveEmptySpecs())
    else:
        env = reap.envs.SerialEnv(2, lambda: RT.TransformedEnv(ours_cls(), RT.RemoveEmptySpecs()))
    for spec in ("full_observation_spec", "full_reward_spec", "full_state_spec", "full_done_spec"):
        assert sorted(map(str, getattr(env, spec).keys(True))) == sorted(map(str, getattr(ref, spec).keys(True)))
    assert list(env.full_observation_spec.keys(True)) == ["observation"]
    actions = torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    ours = env.rollout(3, lambda td: td.set("action", actions.clone()))
    theirs = ref.rollout(3, lambda td: td.set("action", actions.clone()))
    ours = ours.exclude("truncated", ("next", "truncated"))  # the flag reap's array envs always carry
    assert sorted(map(str, ours.keys(True))) == sorted(map(str, theirs.keys(True)))
    for key in theirs.keys(True, True):
        assert torch.equal(ours[key], theirs[key]), key
    assert ours["next", "reward"][:, :, 0].tolist() == [[3.0, 6.0, 9.0], [1.0, 2.0, 3.0]]
    if layout != "serial_of_transformed":  # the inverse gives the base env its empty inputs back
        assert ("state", "sub") in env.transform.inv(TensorDict(batch_size=[2])).keys(True)
