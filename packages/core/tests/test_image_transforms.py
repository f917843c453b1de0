"""Image transforms (``GrayScale``, ``Resize``, ``Crop``, ``CenterCrop``, ``FlattenObservation``,
``ObservationTransform``): exact values, dtypes, specs, and the same frames in an env, a collector
and offline."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from reap.collectors import Collector
from reap.envs import GymEnv, SerialEnv
from reap.envs.transforms import (
    CatFrames,
    CenterCrop,
    Compose,
    Crop,
    FlattenObservation,
    GrayScale,
    ObservationTransform,
    Resize,
    ToTensorImage,
    TransformedEnv,
)
from reap.envs.utils import check_env_specs
from reap.specs import Bounded


class NoiseFrames(gym.Env):
    """Random 10 x 12 RGB frames; episodes of 3 to 6 steps."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(3, 7))
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), 0.0, self.t >= self.length, False, {}

    def render(self):
        return self.np_random.integers(0, 256, (10, 12, 3), dtype=np.uint8)


gym.register("ReapTest/NoiseFrames-v0", entry_point=NoiseFrames)


def image(td=None, **entries):
    return TensorDict(entries, batch_size=next(iter(entries.values())).shape[:1] if td is None else td)


def test_grayscale_weights_and_dtype():
    pixels = torch.tensor([[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255]], dtype=torch.uint8)
    pixels = pixels.T.reshape(3, 4, 1)  # channels first, 4 x 1 pixels
    out = GrayScale()(TensorDict(pixels=pixels))["pixels"]
    assert out.dtype == torch.uint8 and out.shape == (1, 4, 1)
    assert out.flatten().tolist() == [76, 149, 29, 254]  # 0.2989, 0.587, 0.114 of 255, truncated
    floats = GrayScale()(TensorDict(pixels=pixels.float() / 255))["pixels"].flatten()
    assert torch.allclose(floats, torch.tensor([0.2989, 0.587, 0.114, 0.9999]))
    with pytest.raises(TypeError, match=r"GrayScale: images must have 3 channels at dim -3 \(apply ToTensorImage "
                                        r"first for channels-last images\), got shape \(4, 4, 3\)"):
        GrayScale()(TensorDict(pixels=torch.zeros(4, 4, 3)))


def test_resize_values_rounding_and_leading_dims():
    row = torch.tensor([0.0, 4.0]).view(1, 1, 2)
    up = Resize(1, 4)(TensorDict(pixels=row))["pixels"]
    assert up.flatten().tolist() == [0.0, 1.0, 3.0, 4.0]  # bilinear, half-pixel centres
    grid = torch.arange(16.0).view(1, 4, 4)
    assert Resize(2, interpolation="nearest")(TensorDict(pixels=grid))["pixels"].flatten().tolist() == [0, 2, 8, 10]
    # a downsampled uint8 image is the float result rounded; 5-dim batches keep their leading dims
    torch.manual_seed(0)
    frames = torch.randint(0, 256, (2, 3, 3, 17, 13), dtype=torch.uint8)
    small = Resize(8, 6)(TensorDict(pixels=frames, batch_size=[2]))["pixels"]
    as_float = Resize(8, 6)(TensorDict(pixels=frames.float(), batch_size=[2]))["pixels"]
    assert small.shape == (2, 3, 3, 8, 6) and small.dtype == torch.uint8
    assert torch.equal(small, as_float.round().to(torch.uint8))
    assert Resize((8, 6)).h == 6 and Resize(5).h == 5
    # antialiased: a 2x downsample of a checkerboard is flat grey, not the checkerboard's samples
    board = (torch.arange(8).view(8, 1) + torch.arange(8)).remainder(2).float().view(1, 8, 8)
    assert torch.allclose(Resize(4)(TensorDict(pixels=board))["pixels"], torch.full((1, 4, 4), 0.5), atol=0.13)
    with pytest.raises(ValueError, match=r"Resize: interpolation must be one of \('nearest', 'nearest-exact', "
                                         r"'bilinear', 'bicubic'\), got 'area'"):
        Resize(4, interpolation="area")


def test_crops_slice_and_pad_with_zeros():
    grid = torch.arange(1.0, 17.0).view(1, 4, 4)
    assert torch.equal(Crop(2, 3, top=1, left=1)(TensorDict(pixels=grid))["pixels"], grid[:, 1:3, 1:4])
    corner = Crop(3, top=2, left=3)(TensorDict(pixels=grid))["pixels"]  # reaches past the bottom right
    assert corner.tolist() == [[[12.0, 0.0, 0.0], [16.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]
    before = Crop(2, top=-1, left=-1)(TensorDict(pixels=grid))["pixels"]
    assert before.tolist() == [[[0.0, 0.0], [0.0, 1.0]]]
    assert torch.equal(CenterCrop(2)(TensorDict(pixels=grid))["pixels"], grid[:, 1:3, 1:3])
    assert torch.equal(CenterCrop(3, 2)(TensorDict(pixels=grid))["pixels"], grid[:, 0:3, 1:3])  # round(0.5) = 0
    padded = CenterCrop(6, 5)(TensorDict(pixels=grid))["pixels"]  # larger than the image: centred in zeros
    assert padded.shape == (1, 6, 5) and torch.equal(padded[:, 1:5, 0:4], grid) and padded.sum() == grid.sum()


def test_flatten_observation_dims():
    td = TensorDict(pixels=torch.arange(24.0).view(2, 3, 4), batch_size=[2])
    assert torch.equal(FlattenObservation(-2, -1)(td.clone())["pixels"], torch.arange(24.0).view(2, 12))
    with pytest.raises(ValueError, match="first_dim should be smaller than 0 to accommodate for envs of different "
                                         "batch_sizes"):
        FlattenObservation(0, -1)
    positive = TransformedEnv(GymEnv("ReapTest/NoiseFrames-v0", from_pixels=True, pixels_only=True),
                              Compose(ToTensorImage(), FlattenObservation(1, 2, allow_positive_dim=True)))
    assert positive.observation_spec["pixels"].shape == (3, 120)


def pipeline(**kwargs):
    """TorchRL's DQN pixel pipeline, small; ``out_keys`` elsewhere to keep the raw frames beside."""
    return Compose(ToTensorImage(in_keys=["pixels"], out_keys=["image"]), GrayScale(in_keys=["image"]),
                   Resize(6, 5, in_keys=["image"]), CenterCrop(4, in_keys=["image"]),
                   Crop(3, 4, top=1, in_keys=["image"]), FlattenObservation(-2, -1, in_keys=["image"]), **kwargs)


def offline(pixels: torch.Tensor) -> torch.Tensor:
    return pipeline()(TensorDict(pixels=pixels, batch_size=pixels.shape[:1]))["image"]


def test_pipeline_specs_and_rollout_frames_equal_the_transforms_applied_offline():
    env = TransformedEnv(GymEnv("ReapTest/NoiseFrames-v0", from_pixels=True, pixels_only=True), pipeline())
    spec = env.observation_spec["image"]
    assert isinstance(spec, Bounded) and spec.shape == (1, 12) and spec.dtype == torch.float32
    check_env_specs(env)
    rollout = env.rollout(12, break_when_any_done=False)
    assert rollout["image"].shape == (12, 1, 12)
    assert torch.equal(rollout["image"], offline(rollout["pixels"]))
    assert torch.equal(rollout["next", "image"], offline(rollout["next", "pixels"]))
    assert not torch.equal(rollout["image"][0], rollout["image"][1])


def test_collector_batches_of_a_serial_env_with_resets_at_different_steps():
    def make():
        return TransformedEnv(SerialEnv(2, lambda: GymEnv("ReapTest/NoiseFrames-v0", from_pixels=True,
                                                          pixels_only=True)), pipeline())
    with Collector(make, None, frames_per_batch=40, total_frames=80) as collector:
        for batch in collector:
            done = batch["next", "done"].squeeze(-1)
            assert batch.shape == (2, 20) and done.any(-1).all() and not torch.equal(done[0], done[1])  # partial resets
            for key in ("pixels", ("next", "pixels")):
                image_key = ("next", "image") if key != "pixels" else "image"
                flat = batch[key].flatten(0, 1)
                assert torch.equal(batch[image_key].flatten(0, 1), offline(flat))


def test_catframes_over_grayscale_resized_frames():
    env = TransformedEnv(GymEnv("ReapTest/NoiseFrames-v0", from_pixels=True, pixels_only=True),
                         Compose(ToTensorImage(), GrayScale(), Resize(5, 6), CatFrames(3, dim=-3)))
    assert env.observation_spec["pixels"].shape == (3, 5, 6)
    rollout = env.rollout(4, break_when_any_done=False)
    assert torch.equal(rollout["next", "pixels"][1, :2], rollout["next", "pixels"][0, 1:])


def test_a_torchrl_style_observation_transform_subclass():
    class Negate(ObservationTransform):
        def _apply_transform(self, obs):
            return -obs

    assert Negate().in_keys == ["observation", "pixels"]
    env = TransformedEnv(GymEnv("Pendulum-v1"), Negate(in_keys=["observation"], out_keys=["observation"]))
    base = GymEnv("Pendulum-v1")
    actions = [torch.full((1,), 0.5)] * 3
    ours = env.rollout(3, tensordict=env.reset(seed=1), actions=actions)
    theirs = base.rollout(3, tensordict=base.reset(seed=1), actions=actions)
    # steps go through _call; the reset does not (no _reset coded), as in TorchRL
    assert torch.equal(ours["next", "observation"], -theirs["next", "observation"])
    assert torch.equal(ours["observation"][0], theirs["observation"][0])


def test_grayscale_of_a_channels_last_env_is_refused_at_construction():
    with pytest.raises(TypeError, match="GrayScale: images must have 3 channels at dim -3"):
        TransformedEnv(GymEnv("ReapTest/NoiseFrames-v0", from_pixels=True, pixels_only=True), GrayScale())


def test_reprs_are_torchrls():
    assert repr(Resize(8, 6)) == "Resize(w=8, h=6, interpolation=InterpolationMode.BILINEAR, keys=['pixels'])"
    assert repr(Crop(5, 4)) == "Crop(w=5.0000, h=4.0000, top=0.0000, left=0.0000, "
    assert repr(CenterCrop(5)) == "CenterCrop(w=5.0000, h=5.0000, "
    assert repr(FlattenObservation(-2, -1)) == ("FlattenObservation(first_dim=-2, last_dim=-1, in_keys=['pixels'], "
                                                "out_keys=['pixels'])")
