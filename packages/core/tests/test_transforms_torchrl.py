"""reap's transforms, ``MultiStep`` and ``step_mdp`` give TorchRL's output on the same input.

Each case runs the same seeded gymnasium env under the same actions through a reap
``TransformedEnv`` and a TorchRL one, and compares every entry of the rollouts exactly (keys,
shapes, dtypes, values). CartPole under a constant action terminates every ~10 steps, so its
rollouts cross several resets. Needs TorchRL (``uv run --group bench pytest ...``).
"""

import warnings

import pytest
import torch

import reap
from reap.specs import Unbounded

torchrl_envs = pytest.importorskip("torchrl.envs")
T = pytest.importorskip("torchrl.envs.transforms")
torchrl_data = pytest.importorskip("torchrl.data")
torchrl_postprocs = pytest.importorskip("torchrl.data.postprocs")
torchrl_utils = pytest.importorskip("torchrl.envs.utils")

COPY_OBS = ({"in_keys": ["observation"], "out_keys": ["o2"], "create_copy": True},)

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
    "NoopResetEnv": (lambda: reap.NoopResetEnv(5), lambda: T.NoopResetEnv(5)),
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
        ours.set_seed(0)
        ours.reset()  # TorchRL's set_seed resets the env with the seed; reap's seeds the next reset
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
    ours.base_env.set_seed(0)
    ours.base_env.reset()  # TorchRL's set_seed resets the base env, outside the transforms
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
