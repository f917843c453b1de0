"""``ToTensorImage``: ``uint8`` images ``(..., H, W, C)`` as float ``(..., C, H, W)`` in [0, 1] (TorchRL's).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.transforms import ToTensorImage
    >>> pixels = torch.full((2, 4, 4, 3), 255, dtype=torch.uint8)
    >>> out = ToTensorImage()(TensorDict(pixels=pixels, batch_size=[2]))["pixels"]
    >>> out.shape, out.dtype, out.max().item()
    (torch.Size([2, 3, 4, 4]), torch.float32, 1.0)
"""

from __future__ import annotations

from copy import copy

import numpy as np
import torch

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
