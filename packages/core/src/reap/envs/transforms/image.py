"""Image transforms (TorchRL's): ``ToTensorImage`` (``uint8`` ``(..., H, W, C)`` to float
``(..., C, H, W)`` in [0, 1]), then ``GrayScale``, ``Resize``, ``Crop`` and ``CenterCrop`` on
``(..., C, H, W)`` images.

As in TorchRL, ``w`` is the size of the height dim (``-2``) and ``h`` of the width dim (``-1``).
``Resize`` and the crops compute what torchvision's functions compute (TorchRL calls them; reap
needs no torchvision): antialiased interpolation in float, rounded back for integer images, and
zero padding where a crop reaches past the image.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.transforms import ToTensorImage
    >>> pixels = torch.full((2, 4, 4, 3), 255, dtype=torch.uint8)
    >>> out = ToTensorImage()(TensorDict(pixels=pixels, batch_size=[2]))["pixels"]
    >>> out.shape, out.dtype, out.max().item()
    (torch.Size([2, 3, 4, 4]), torch.float32, 1.0)
    >>> from reap.envs.transforms import Compose, GrayScale, Resize
    >>> t = Compose(ToTensorImage(), GrayScale(), Resize(2, 2))
    >>> t(TensorDict(pixels=pixels, batch_size=[2]))["pixels"].shape
    torch.Size([2, 1, 2, 2])
"""

from __future__ import annotations

from copy import copy

import numpy as np
import torch

from reap.envs.transforms.tensors import _Writes
from reap.envs.transforms.transform import (
    Transform,
    apply_to_composite,
    missing_tolerance,
    write_rows,
)
from reap.specs import ContinuousBox


class ToTensorImage(Transform):
    """Permute images from channels-last to channels-first, scale integers by 1/255 and cast.

    Args:
        from_int: divide by 255 (None: when the image is not floating point).
        unsqueeze: add a leading dim to an image with exactly three dims.
        dtype: the output dtype (default: torch's default dtype).
        in_keys, out_keys: default ``["pixels"]``.
        shape_tolerant: leave images whose last dim is not 3 unpermuted.
    """

    _array_hooks = True

    def __init__(self, from_int: bool | None = None, unsqueeze: bool = False, dtype=None, *, in_keys=None,
                 out_keys=None, shape_tolerant: bool = False):
        in_keys = ["pixels"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)
        self.from_int = from_int
        self.unsqueeze = unsqueeze
        self.dtype = dtype if dtype is not None else torch.get_default_dtype()
        self.shape_tolerant = shape_tolerant

    def _permutes(self, shape) -> bool:
        return not self.shape_tolerant or shape[-1] == 3

    def _should_unsqueeze(self, like) -> bool:
        three = like.ndimension() == 3 if isinstance(like, torch.FloatTensor) else len(like.shape) == 3
        return three and self.unsqueeze

    def _apply_transform(self, observation):
        if self._permutes(observation.shape):
            observation = observation.permute(*range(observation.ndim - 3), -1, -3, -2)
        if self.from_int or (self.from_int is None and not torch.is_floating_point(observation)):
            observation = observation.div(255)
        observation = observation.to(self.dtype)
        return observation.unsqueeze(0) if self._should_unsqueeze(observation) else observation

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self._call(tensordict_reset)

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        shape = list(observation_spec.shape)
        lead = [1] if self._should_unsqueeze(observation_spec) else []
        if self._permutes(shape):
            shape = [*shape[:-3], shape[-1], shape[-3], shape[-2]]
        spec = observation_spec.clone()  # the same class, as TorchRL's (a BoundedDiscrete stays one)
        if isinstance(spec.space, ContinuousBox):
            spec.space.low = self._apply_transform(spec.space.low)
            spec.space.high = self._apply_transform(spec.space.high)
        spec.shape = [*lead, *shape]
        spec.dtype = self.dtype
        return spec

    # ---- arrays --------------------------------------------------------------------------------
    def replaced_keys(self):
        return tuple(self.out_keys)

    def reads_inputs(self):
        return tuple(self.in_keys)

    def _attach(self, env):
        self._check_in_keys(env)
        specs = {**env.root_specs(), **env.next_specs()}
        self._plans = {}
        for key in self.in_keys:
            spec = specs[key]
            n = len(spec.shape)
            axes = (*range(n - 3), n - 1, n - 3, n - 2) if self._permutes(spec.shape) else tuple(range(n))
            scale = self.from_int or (self.from_int is None and not spec.dtype.is_floating_point)
            self._plans[key] = (axes, scale)

    def _write(self, arrays, t, mask):
        for src, dst in self._pairs:
            if ("in", src) not in arrays:
                continue
            axes, scale = self._plans[src]
            out = arrays[dst][t]
            value = arrays[("in", src)][t].transpose(axes).reshape(out.shape)
            if scale and out.dtype == np.float32 and (mask is None or mask.ndim == 0):
                np.divide(value, np.float32(255), out=out, dtype=np.float32)
            else:  # torch divides in float32, then casts
                write_rows(out, np.divide(value, np.float32(255), dtype=np.float32) if scale else value, mask)

    def on_reset(self, root, t, mask):
        self._write(root, t, mask)

    def on_step(self, root, nxt, t):
        self._write(nxt, t, None)


INTERPOLATIONS = ("nearest", "nearest-exact", "bilinear", "bicubic")


class _ImageTransform(_Writes):
    """An image transform of ``in_keys`` (default ``["pixels"]``) into ``out_keys``: the step arrays
    go through ``_apply_transform`` (as tensors over the same memory) and the specs through it too."""

    _array_hooks = True

    def __init__(self, in_keys=None, out_keys=None):
        in_keys = ["pixels"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        spec = observation_spec.clone()
        if isinstance(spec.space, ContinuousBox):
            spec.space.low = self._apply_transform(spec.space.low)
            spec.space.high = self._apply_transform(spec.space.high)
            spec.shape = spec.space.low.shape
        else:
            spec.shape = self._apply_transform(torch.zeros(spec.shape, dtype=spec.dtype)).shape
        return spec

    def _array(self, value, shape):
        return self._apply_transform(torch.from_numpy(value)).numpy()


class GrayScale(_ImageTransform):
    """RGB images ``(..., 3, H, W)`` to one channel, ``0.2989 R + 0.587 G + 0.114 B`` cast back to
    the image's dtype (TorchRL's ``GrayScale``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import GrayScale
        >>> GrayScale()(TensorDict(pixels=torch.ones(3, 2, 2)))["pixels"].shape
        torch.Size([1, 2, 2])
    """

    def _apply_transform(self, observation):
        if observation.ndim < 3:
            raise TypeError(f"GrayScale: an image needs at least 3 dims (..., C, H, W), got shape "
                            f"{tuple(observation.shape)}")
        if observation.shape[-3] != 3:
            raise TypeError(f"GrayScale: images must have 3 channels at dim -3 (apply ToTensorImage first for "
                            f"channels-last images), got shape {tuple(observation.shape)}")
        r, g, b = observation.unbind(-3)
        return (0.2989 * r + 0.587 * g + 0.114 * b).to(observation.dtype).unsqueeze(-3)


def _pad_to(image, top: int, left: int, height: int, width: int):
    """``image[..., top:top + height, left:left + width]``, zeros where that reaches past it."""
    rows, cols = image.shape[-2:]
    bottom, right = top + height, left + width
    if top >= 0 and left >= 0 and bottom <= rows and right <= cols:
        return image[..., top:bottom, left:right]
    inside = image[..., max(top, 0):max(bottom, 0), max(left, 0):max(right, 0)]
    pads = (max(-left, 0), width - inside.shape[-1] - max(-left, 0),
            max(-top, 0), height - inside.shape[-2] - max(-top, 0))
    return torch.nn.functional.pad(inside, pads, value=0)


class Crop(_ImageTransform):
    """The ``w`` x ``h`` window whose top-left pixel is (``top``, ``left``), zero-padded where it
    reaches past the image (TorchRL's ``Crop``; ``w`` counts rows).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import Crop
        >>> Crop(2, 3, top=1)(TensorDict(pixels=torch.arange(16.).view(1, 4, 4)))["pixels"]
        tensor([[[ 4.,  5.,  6.],
                 [ 8.,  9., 10.]]])
    """

    def __init__(self, w: int, h: int | None = None, top: int = 0, left: int = 0, in_keys=None, out_keys=None):
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.w = w
        self.h = h if h else w
        self.top = top
        self.left = left

    def _apply_transform(self, observation):
        return _pad_to(observation, self.top, self.left, self.w, self.h)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(w={float(self.w):4.4f}, h={float(self.h):4.4f}, top={float(self.top):4.4f}, "
                f"left={float(self.left):4.4f}, ")


class CenterCrop(_ImageTransform):
    """The centred ``w`` x ``h`` window, zero-padded around an image smaller than it (TorchRL's
    ``CenterCrop``; ``w`` counts rows).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import CenterCrop
        >>> CenterCrop(2)(TensorDict(pixels=torch.arange(16.).view(1, 4, 4)))["pixels"]
        tensor([[[ 5.,  6.],
                 [ 9., 10.]]])
    """

    def __init__(self, w: int, h: int | None = None, in_keys=None, out_keys=None):
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.w = w
        self.h = h if h else w

    def _apply_transform(self, observation):
        rows, cols = observation.shape[-2:]
        if self.w > rows or self.h > cols:  # padded first, centred on the padded image
            top_pad = (self.w - rows) // 2 if self.w > rows else 0
            left_pad = (self.h - cols) // 2 if self.h > cols else 0
            observation = _pad_to(observation, -top_pad, -left_pad, max(rows, self.w), max(cols, self.h))
            rows, cols = observation.shape[-2:]
        top, left = int(round((rows - self.w) / 2.0)), int(round((cols - self.h) / 2.0))
        return observation[..., top:top + self.w, left:left + self.h]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(w={float(self.w):4.4f}, h={float(self.h):4.4f}, "


class Resize(_ImageTransform):
    """Images resized to ``w`` x ``h`` (rows x columns; ``h`` defaults to ``w``; ``w`` may be the
    pair), antialiased for ``"bilinear"`` and ``"bicubic"`` (TorchRL's ``Resize``).

    Args:
        w, h: the output size.
        interpolation: one of ``"nearest"``, ``"nearest-exact"``, ``"bilinear"``, ``"bicubic"``.
        in_keys, out_keys: default ``["pixels"]``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import Resize
        >>> Resize(2, 3)(TensorDict(pixels=torch.ones(5, 3, 8, 8), batch_size=[5]))["pixels"].shape
        torch.Size([5, 3, 2, 3])
    """

    def __init__(self, w: int, h: int | None = None, interpolation: str = "bilinear", in_keys=None, out_keys=None):
        if isinstance(w, (list, tuple)):
            w, h = w
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.w = int(w)
        self.h = int(w if h is None else h)
        interpolation = getattr(interpolation, "value", interpolation)  # torchvision's InterpolationMode
        if interpolation not in INTERPOLATIONS:
            raise ValueError(f"Resize: interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}")
        self.interpolation = interpolation

    def _apply_transform(self, observation):
        if observation.shape[-2:] == torch.Size([self.w, self.h]):
            return observation
        lead = observation.shape[:-3]
        image = observation.reshape(-1, *observation.shape[-3:])
        dtype = image.dtype
        if dtype not in (torch.float32, torch.float64):
            image = image.to(torch.float32)
        smooth = self.interpolation in ("bilinear", "bicubic")
        image = torch.nn.functional.interpolate(image, size=[self.w, self.h], mode=self.interpolation,
                                                align_corners=False if smooth else None, antialias=smooth)
        if image.dtype != dtype:
            if self.interpolation == "bicubic" and dtype == torch.uint8:
                image = image.clamp(0, 255)
            if not dtype.is_floating_point:
                image = image.round()
            image = image.to(dtype)
        return image.reshape(*lead, *image.shape[-3:])

    def __repr__(self) -> str:
        mode = self.interpolation.upper().replace("-", "_")  # shown as torchvision's enum, as TorchRL's
        return f"{type(self).__name__}(w={self.w}, h={self.h}, interpolation=InterpolationMode.{mode}, keys={self.in_keys})"
