"""``TimeMaxPool``: each entry as the element-wise maximum over its last ``T`` values (TorchRL's).

As TorchRL's, the window starts as zeros at each reset (so an entry that is negative reads 0
until ``T`` steps have filled it), and the transform needs an env: ``forward`` raises.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import TimeMaxPool, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), TimeMaxPool(in_keys=["observation"], T=3))
    >>> bool((env.rollout(2)["observation"] >= 0).all())  # zeros in the window's empty slots
    True
"""

from __future__ import annotations

from copy import copy

import numpy as np
import torch

from reap.envs.transforms.tensors import _Writes
from reap.envs.transforms.transform import apply_to_composite, expand_right, reset_flags


class TimeMaxPool(_Writes):
    """The maximum of each of ``in_keys`` (default ``["observation"]``) over its last ``T`` values,
    written to ``out_keys``; the window is kept in a buffer per key (``_maxpool_buffer_<key>``,
    ``T`` first, in the state dict), newest first.

    Args:
        in_keys, out_keys: the entries pooled and where the maxima go.
        T: the window's length (at least 1).
        reset_key: accepted as TorchRL's; the env's reset flags are used.
    """

    _array_hooks = True

    def __init__(self, in_keys=None, out_keys=None, T: int = 1, reset_key=None):  # noqa: N803 (TorchRL's name)
        in_keys = ["observation"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)
        if not isinstance(T, int) or T < 1:
            raise ValueError(f"TimeMaxPool: T (the window's length) must be an int >= 1, got {T!r}")
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(f"TimeMaxPool: in_keys {self.in_keys} and out_keys {self.out_keys} must be as many")
        self.buffer_size = T
        self.reset_key = reset_key
        for in_key in self.in_keys:
            self.register_buffer(self._buffer_name(in_key), nn_uninitialized())

    @staticmethod
    def _buffer_name(in_key) -> str:
        return "_maxpool_buffer_" + ("_".join(in_key) if isinstance(in_key, tuple) else in_key)

    def _window(self, in_key, like: torch.Tensor) -> torch.Tensor:
        """The window of ``in_key``, made (zeros) on first use from a value ``like``."""
        name = self._buffer_name(in_key)
        buffer = getattr(self, name)
        if isinstance(buffer, torch.nn.parameter.UninitializedBuffer) or buffer.shape[1:] != like.shape:
            buffer = torch.zeros(self.buffer_size, *like.shape, dtype=like.dtype, device=like.device)
            setattr(self, name, buffer)
        return buffer

    def _pool(self, tensordict, reset=None):
        for in_key, out_key in zip(self.in_keys, self.out_keys, strict=True):
            value = tensordict.get(in_key)
            window = self._window(in_key, value)
            if reset is None:
                window.copy_(window.roll(1, 0))
                window[0] = value
                tensordict.set(out_key, window.max(0).values)
            else:
                rows = expand_right(reset, value)
                window[:, rows] = 0
                window[0][rows] = value[rows]
                tensordict.set(out_key, torch.where(rows, window.max(0).values, torch.zeros_like(value)))
        return tensordict

    def _call(self, next_tensordict):
        return self._pool(next_tensordict)

    def _reset(self, tensordict, tensordict_reset):
        for in_key in self.in_keys:  # an entry the reset does not write is the step's before it, as TorchRL's
            if tensordict_reset.get(in_key, None) is None:
                previous = None if tensordict is None else tensordict.get(in_key, None)
                if previous is None:
                    raise KeyError(f"Could not find {in_key} in the reset data.")
                tensordict_reset.set(in_key, previous)
        return self._pool(tensordict_reset, reset_flags(tensordict if tensordict is not None else tensordict_reset))

    def forward(self, tensordict):
        raise NotImplementedError(
            "TimeMaxPool cannot be called independently, only its step and reset methods are functional: "
            "it pools over an env's successive steps, which a batch of replay data does not hold")

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        return observation_spec

    # ---- arrays (the in/out plumbing is _Writes') -------------------------------------------------
    def _attach(self, env):
        super()._attach(env)
        specs = env.next_specs()
        for in_key in self.in_keys:
            spec = specs[in_key]
            self._window(in_key, torch.zeros(spec.shape, dtype=spec.dtype))
        self._bind_buffers()
        self._windows = [(self._np_buffers[self._buffer_name(i)], i, o) for i, o in self._pairs]

    def on_reset(self, root, t, mask):
        for window, in_key, out_key in self._windows:
            value, out = root[("in", in_key)][t], root[out_key][t]
            if mask is None or mask.ndim == 0:
                window[...] = 0
                window[0] = value
                np.max(window, axis=0, out=out)
            else:
                window[:, mask] = 0
                window[0][mask] = value[mask]
                out[mask] = window[:, mask].max(0)

    def on_step(self, root, nxt, t):
        for window, in_key, out_key in self._windows:
            window[1:] = window[:-1].copy()
            window[0] = nxt[("in", in_key)][t]
            np.max(window, axis=0, out=nxt[out_key][t])


def nn_uninitialized():
    """A buffer made on first use (TorchRL's lazy buffers)."""
    return torch.nn.parameter.UninitializedBuffer(device=torch.device("cpu"), dtype=torch.get_default_dtype())
