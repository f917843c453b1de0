"""Transforms outside an env (``t(td)``, ``inv``, the spec hooks on their own): reap against TorchRL
on the same inputs, and the values that matter most without TorchRL."""

import warnings

import pytest
import torch
from tensordict import NonTensorData, TensorDict

import reap.envs.transforms as R
import reap.specs as reap_specs
from reap.specs import Bounded, Composite, Unbounded
from reap_testing import CountingEnv


def batch():
    torch.manual_seed(0)
    return TensorDict({
        "a": torch.randn(2, 3), "b": torch.randn(2, 3), "c": torch.randn(2, 1), "m": torch.randn(2, 3, 4),
        "d": torch.randn(2, 3, dtype=torch.float64), "reward": torch.randn(2, 1), "rv": torch.randn(2, 2),
        "pixels": torch.randint(0, 256, (2, 4, 5, 3), dtype=torch.uint8), "done": torch.zeros(2, 1, dtype=torch.bool),
    }, batch_size=[2])


FORWARD = {  # name: (constructor arguments, TensorDict keyword arguments)
    "RenameTransform": lambda T: T.RenameTransform(["a"], ["z"]),
    "RenameTransform-copy": lambda T: T.RenameTransform(["a", "b"], ["y", "z"], create_copy=True),
    "ExcludeTransform": lambda T: T.ExcludeTransform("a", "m"),
    "SelectTransform": lambda T: T.SelectTransform("a"),
    "CatTensors": lambda T: T.CatTensors(["b", "a"], "ab"),
    "CatTensors-keep": lambda T: T.CatTensors(["a", "b"], "ab", del_keys=False, sort=False),
    "Stack": lambda T: T.Stack(["a", "b"], "ab", dim=-2),
    "UnsqueezeTransform": lambda T: T.UnsqueezeTransform(-1, in_keys=["a"], out_keys=["a1"]),
    "SqueezeTransform": lambda T: T.SqueezeTransform(-1, in_keys=["c"]),
    "PermuteTransform": lambda T: T.PermuteTransform([-1, -2], in_keys=["m"]),
    "ToTensorImage": lambda T: T.ToTensorImage(),
    "ToTensorImage-unsqueeze": lambda T: T.ToTensorImage(unsqueeze=True, dtype=torch.float64, in_keys=["pixels"],
                                                         out_keys=["img"]),
    "ObservationNorm": lambda T: T.ObservationNorm(0.5, 2.0, in_keys=["a", "b"]),
    "ObservationNorm-standard_normal": lambda T: T.ObservationNorm(torch.ones(3), torch.full((3,), 3.0),
                                                                   in_keys=["a"], standard_normal=True),
    "RewardScaling": lambda T: T.RewardScaling(0.5, 2.0),
    "RewardScaling-standard_normal": lambda T: T.RewardScaling(0.5, 2.0, standard_normal=True, out_keys=["r2"]),
    "RewardClipping": lambda T: T.RewardClipping(-0.25, 0.25),
    "ClipTransform": lambda T: T.ClipTransform(in_keys=["a", "reward"], low=-0.5, high=0.5),
    "DoubleToFloat": lambda T: T.DoubleToFloat(in_keys=["d"]),
    "DoubleToFloat-all": lambda T: T.DoubleToFloat(),
    "DTypeCastTransform": lambda T: T.DTypeCastTransform(torch.float32, torch.float64, in_keys=["a"]),
    "LineariseRewards": lambda T: T.LineariseRewards(in_keys=["rv"], weights=[1.0, -2.0]),
    "LineariseRewards-sum": lambda T: T.LineariseRewards(in_keys=["rv"], out_keys=["r1"]),
    "VecNorm": lambda T: T.VecNorm(in_keys=["a", "reward"], decay=0.9),
    "Compose": lambda T: T.Compose(T.RewardScaling(0.5, 2.0), T.CatTensors(["a", "b"], "ab")),
}


def both(name):
    T = pytest.importorskip("torchrl.envs.transforms")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TorchRL's VecNorm deprecation
        return FORWARD[name](R), FORWARD[name](T)


def assert_same(a, b):
    assert set(a.keys(True, True)) == set(b.keys(True, True)), set(a.keys(True, True)) ^ set(b.keys(True, True))
    for key in b.keys(True, True):
        x, y = a.get(key), b.get(key)
        assert (x.shape, x.dtype) == (y.shape, y.dtype), key
        assert torch.equal(x, y), key


@pytest.mark.parametrize("name", list(FORWARD))
def test_forward_matches_torchrl(name):
    ours, theirs = both(name)
    for _ in range(2):  # twice: the running statistics of the VecNorms move
        data = batch()
        assert_same(ours(data.clone()), theirs(data.clone()))


INVERSE = {
    "DoubleToFloat": lambda T: T.DoubleToFloat(in_keys=[], in_keys_inv=["a"]),
    "UnsqueezeTransform": lambda T: T.UnsqueezeTransform(-1, in_keys_inv=["c"]),
    "RenameTransform": lambda T: T.RenameTransform([], [], in_keys_inv=["a"], out_keys_inv=["x"]),
    "Stack": lambda T: T.Stack(["p", "q"], "pq", in_key_inv="m", out_keys_inv=["m0", "m1", "m2"], dim=-2),
    "ObservationNorm": lambda T: T.ObservationNorm(0.5, 2.0, in_keys=["b"], in_keys_inv=["a"]),
    "PermuteTransform": lambda T: T.PermuteTransform([-1, -2], in_keys_inv=["m"]),
    "ExcludeTransform-inverse": lambda T: T.ExcludeTransform("a", inverse=True),
    "Reward2GoTransform": lambda T: T.Reward2GoTransform(gamma=0.9, in_keys=["rewards"], out_keys=["r2go"]),
    "Reward2GoTransform-nested": lambda T: T.Reward2GoTransform(gamma=1.0),
}


def trajectories():
    torch.manual_seed(1)
    done = torch.zeros(3, 7, 1, dtype=torch.bool)
    done[0, 2], done[1, 5], done[:, -1] = True, True, True
    data = batch().expand(3, 7, 2).clone()
    data = TensorDict({"x": data, "rewards": torch.randn(3, 7, 1), ("next", "reward"): torch.randn(3, 7, 1),
                       ("next", "done"): done, "a": torch.randn(3, 7, 3), "m": torch.randn(3, 7, 3, 4),
                       "c": torch.randn(3, 7, 1)}, batch_size=[3, 7])
    return data


@pytest.mark.parametrize("name", list(INVERSE))
def test_inv_matches_torchrl(name):
    T = pytest.importorskip("torchrl.envs.transforms")
    ours, theirs = INVERSE[name](R), INVERSE[name](T)
    data = trajectories()
    assert_same(ours.inv(data.clone()), theirs.inv(data.clone()))


@pytest.mark.parametrize("padding", ["same", "constant"])
def test_catframes_unfolds_trajectories_as_torchrl(padding):
    T = pytest.importorskip("torchrl.envs.transforms")
    data = trajectories().refine_names(None, "time")
    kwargs = {"N": 3, "dim": -1, "in_keys": ["a", ("next", "reward")], "padding": padding, "padding_value": -9.0}
    ours, theirs = R.CatFrames(**kwargs)(data.clone()), T.CatFrames(**kwargs)(data.clone())
    assert_same(ours, theirs)
    with_next = {**kwargs, "in_keys": ["c", ("next", "c")]}
    data.set(("next", "c"), data["c"] + 100)
    assert_same(R.CatFrames(**with_next)(data.clone()), T.CatFrames(**with_next)(data.clone()))


def test_reward_sum_forward_and_primer_match_torchrl():
    T = pytest.importorskip("torchrl.envs.transforms")
    torchrl_data = pytest.importorskip("torchrl.data")
    data = trajectories().refine_names(None, "time")
    assert_same(R.RewardSum(in_keys=["rewards"])(data.clone()), T.RewardSum(in_keys=["rewards"])(data.clone()))
    ours = R.TensorDictPrimer(h=Unbounded(shape=(3, 7, 2)), default_value=2.0)(data.clone())
    theirs = T.TensorDictPrimer(h=torchrl_data.Unbounded(shape=(3, 7, 2)), default_value=2.0)(data.clone())
    assert_same(ours, theirs)


@pytest.mark.parametrize("name", ["StepCounter", "InitTracker", "FrameSkipTransform", "TargetReturn", "VecNormV2"])
def test_transforms_that_need_an_env_refuse_forward_as_torchrl(name):
    T = pytest.importorskip("torchrl.envs.transforms")
    args = {"TargetReturn": (1.0,), "VecNormV2": (["a"],)}.get(name, ())
    with pytest.raises(Exception) as theirs:
        getattr(T, name)(*args)(batch())
    with pytest.raises(type(theirs.value)):
        getattr(R, name)(*args)(batch())


SPECS = {  # observation spec hooks of keyed transforms on their own
    "UnsqueezeTransform": lambda T: T.UnsqueezeTransform(-2, in_keys=["a"]),
    "SqueezeTransform": lambda T: T.SqueezeTransform(-1, in_keys=["c"]),
    "PermuteTransform": lambda T: T.PermuteTransform([-1, -2], in_keys=["m"]),
    "ObservationNorm": lambda T: T.ObservationNorm(0.5, 2.0, in_keys=["a"]),
    "ClipTransform": lambda T: T.ClipTransform(in_keys=["a"], low=-0.5, high=0.5),
    "CatFrames": lambda T: T.CatFrames(2, -1, in_keys=["a", "m"]),
    "CatTensors": lambda T: T.CatTensors(["a", "b"], "ab"),
    "ToTensorImage": lambda T: T.ToTensorImage(),
    "Stack": lambda T: T.Stack(["a", "b"], "ab"),
}


def specs(module):
    bounded = lambda shape, dtype=torch.float32: module.Bounded(-1.0, 1.0, shape=shape, dtype=dtype)  # noqa: E731
    return module.Composite(a=bounded((3,)), b=bounded((3,)), c=bounded((3, 1)), m=module.Unbounded(shape=(2, 3, 4)),
                            pixels=module.Bounded(0, 255, shape=(4, 5, 3), dtype=torch.uint8))


@pytest.mark.parametrize("name", list(SPECS))
def test_observation_spec_hooks_match_torchrl(name):
    T = pytest.importorskip("torchrl.envs.transforms")
    torchrl_data = pytest.importorskip("torchrl.data")
    ours = SPECS[name](R).transform_observation_spec(specs(reap_specs))
    theirs = SPECS[name](T).transform_observation_spec(specs(torchrl_data))
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    for key in theirs.keys(True, True):
        a, b = ours[key], theirs[key]
        assert (type(a).__name__, a.shape, a.dtype, a.domain) == (type(b).__name__, b.shape, b.dtype, b.domain), key
        if hasattr(b.space, "low"):
            assert torch.equal(a.space.low, b.space.low) and torch.equal(a.space.high, b.space.high), key


# ---- without TorchRL: the values that matter most ------------------------------------------------
def test_images_scaling_and_reshaping_values():
    data = batch()
    image = R.ToTensorImage()(data.clone())["pixels"]
    assert image.shape == (2, 3, 4, 5) and image.dtype == torch.float32
    assert torch.equal(image, data["pixels"].permute(0, 3, 1, 2).div(255))
    assert R.PermuteTransform([-1, -2], in_keys=["m"])(data.clone())["m"].shape == (2, 4, 3)
    assert R.SqueezeTransform(-1, in_keys=["c"])(data.clone())["c"].shape == (2,)
    stacked = R.Stack(["a", "b"], "ab")(data.clone())
    assert "a" not in stacked.keys() and torch.equal(stacked["ab"], torch.stack([data["a"], data["b"]], -1))
    linear = R.LineariseRewards(in_keys=["rv"], weights=[1.0, -2.0])(data.clone())["rv"]
    assert torch.equal(linear, data["rv"][:, :1] - 2 * data["rv"][:, 1:])
    spec = R.LineariseRewards(in_keys=["rv"], weights=[1.0, -2.0]).transform_reward_spec(
        Composite(rv=Bounded(0.0, 1.0, shape=(2,))))["rv"]
    assert spec.shape == (1,) and spec.space.low.item() == -2.0 and spec.space.high.item() == 1.0


def test_reward_to_go_and_catframes_values():
    reward = torch.ones(1, 10, 1)
    done = torch.zeros(1, 10, 1, dtype=torch.bool)
    done[:, [3, 7]] = True
    data = TensorDict({("next", "reward"): reward, ("next", "done"): done}, [1, 10])
    expected = [3.9404, 2.9701, 1.99, 1.0, 3.9404, 2.9701, 1.99, 1.0, 1.99, 1.0]  # TorchRL's docstring example
    out = R.Reward2GoTransform(gamma=0.99).inv(data)["next", "reward"].flatten()
    torch.testing.assert_close(out, torch.tensor(expected), rtol=0, atol=1e-4)
    with pytest.raises(ValueError, match="only an inverse transform and can only be applied to the replay buffer"):
        R.TransformedEnv(CountingEnv(), R.Reward2GoTransform())
    frames = torch.arange(5.0).reshape(1, 5, 1)
    ends = torch.tensor([[False, True, False, False, True]]).unsqueeze(-1)
    data = TensorDict({"x": frames, ("next", "done"): ends}, [1, 5], names=[None, "time"])
    stacked = R.CatFrames(N=3, dim=-1, in_keys=["x"])(data)["x"][0].tolist()
    assert stacked == [[0, 0, 0], [0, 0, 1], [2, 2, 2], [2, 2, 3], [2, 3, 4]]  # cut at each trajectory's start


def test_hash_and_primer_values():
    data = TensorDict(text=NonTensorData("hello"))
    hashed = R.Hash(in_keys=["text"], out_keys=["hash"], in_keys_inv=["text"], out_keys_inv=["hash"])
    out = hashed(data)["hash"]
    assert out.dtype == torch.uint8 and out.shape == (32,)
    assert bytes(out.tolist()).hex().startswith("2cf24dba")  # sha256("hello")
    assert hashed.get_input_from_hash(out) == "hello"
    primed = R.TensorDictPrimer(h=Unbounded(shape=(2, 3)), default_value=1.5)(TensorDict(batch_size=[2]))
    assert primed["h"].shape == (2, 3) and (primed["h"] == 1.5).all()
    with pytest.raises(RuntimeError, match="The leading shape of the spec must match the tensordict's"):
        R.TensorDictPrimer(h=Unbounded(shape=(3,)))(TensorDict(batch_size=[2]))
