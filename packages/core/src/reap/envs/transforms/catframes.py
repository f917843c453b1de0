"""``CatFrames``: the last ``N`` values of an entry, concatenated (TorchRL's).

In an env, the stack lives in the step arrays: a reset fills it with the first observation
(``padding="same"``) or ``padding_value`` (``"constant"``), each step shifts it by one frame and
appends the new one. Outside an env (``t(td)``, a replay buffer with ``as_inverse=True``), it
unfolds a batch of trajectories along its ``"time"`` dim, each window cut at the trajectory's
start (from ``("next", done_key)``).

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import CatFrames, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), CatFrames(N=4, dim=-1, in_keys=["observation"]))
    >>> env.rollout(3)["next", "observation"].shape
    torch.Size([3, 12])
"""

from __future__ import annotations

import warnings
from copy import copy
from functools import partial

import numpy as np
import torch
from tensordict.utils import unravel_key

from reap.envs.transforms.compose import Compose
from reap.envs.transforms.keys import ExcludeTransform
from reap.envs.transforms.tensors import along
from reap.envs.transforms.transform import (
    FailsWhenRun,
    Transform,
    apply_to_composite,
    missing_tolerance,
    reset_flags,
    write_rows,
)
from reap.specs import Bounded, Unbounded


def _slices(n: int, tensordict):
    """A sampled batch of ``n``-step slices, one per row, time named (``CatFrames`` unfolds it)."""
    return tensordict.reshape(-1, n).refine_names(None, "time")


def _last_step(tensordict):
    return tensordict[:, -1]


def _with_next(keys) -> list:
    return [*keys, *(unravel_key(("next", key)) for key in keys)]


def _right(flags, like):
    return flags.reshape(*flags.shape, *([1] * (like.ndim - flags.ndim)))


class CatFrames(Transform):
    """Concatenate the last ``N`` values of ``in_keys`` along ``dim`` (negative) into ``out_keys``.

    Args:
        N: the number of frames.
        dim: the dim to concatenate along, counted from the end.
        in_keys, out_keys: default ``["pixels"]``, and ``out_keys`` the ``in_keys``.
        padding: ``"same"`` (repeat the first frame) or ``"constant"`` (``padding_value``).
        as_inverse: unfold on ``inv`` (a replay buffer's extend) rather than on ``forward``.
        reset_key, done_key: the reset flag (reap's is ``"_reset"``) and the done flag that
            delimits trajectories offline.
    """

    _array_hooks = True
    ACCEPTED_PADDING = {"same", "constant", "zeros"}

    def __init__(self, N: int, dim: int, in_keys=None, out_keys=None, padding: str = "same",
                 padding_value: float = 0, as_inverse: bool = False, reset_key=None, done_key=None,
                 future: bool = False, mask_key=None):
        in_keys = ["pixels"] if in_keys is None else in_keys
        super().__init__(in_keys=in_keys, out_keys=copy(in_keys) if out_keys is None else out_keys)
        if not isinstance(N, int) or N < 1:
            raise ValueError(f"CatFrames: N must be a positive int, got {N!r}")
        if dim >= 0:
            raise ValueError("dim must be < 0 to accommodate for tensordict of different batch-sizes (since "
                             "negative dims are batch invariant).")
        if padding not in self.ACCEPTED_PADDING:
            raise ValueError(f"padding must be one of {self.ACCEPTED_PADDING}")
        if padding == "zeros":
            raise RuntimeError("Padding option 'zeros' will is deprecated")
        if future or mask_key is not None:
            raise ValueError("CatFrames: future=True and mask_key (TorchRL's forward-looking windows and their "
                             "masks, offline only) are not supported by reap; leave them unset")
        if reset_key not in (None, "_reset"):
            raise ValueError(f"CatFrames: reap envs have one reset key, '_reset'; got reset_key={reset_key!r}")
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(f"CatFrames: out_keys {self.out_keys} must match in_keys {self.in_keys} one to one")
        self.N, self.dim, self.padding, self.padding_value = N, dim, padding, padding_value
        self.as_inverse = as_inverse
        self.reset_key = "_reset"
        self.done_key = "done" if done_key is None else done_key
        self._frames: dict = {}  # TorchRL's per-key frame buffers, for the TensorDict hooks

    # ---- TorchRL's hooks in an env -------------------------------------------------------------
    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self._call(tensordict_reset, _reset=reset_flags(tensordict))

    def _call(self, next_tensordict, _reset=None):
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            data = next_tensordict.get(in_key, None)
            if data is None:
                if self.missing_tolerance:
                    continue
                raise KeyError(f"{self}: '{in_key}' not found in tensordict {next_tensordict}")
            d = data.size(self.dim)
            buffer = self._frames.get(in_key)
            if buffer is None:
                shape = list(data.shape)
                shape[self.dim] *= self.N
                buffer = torch.full(shape, self.padding_value, dtype=data.dtype, device=data.device)
            if _reset is None:
                buffer = torch.cat([buffer[along(self.dim, d, None)], data], self.dim)
            else:
                fresh = (torch.cat([data] * self.N, self.dim) if self.padding == "same"
                         else torch.cat([torch.full_like(buffer[along(self.dim, d, None)], self.padding_value), data],
                                        self.dim))
                rows = _reset.reshape(*_reset.shape, *([1] * (buffer.ndim - _reset.ndim)))
                buffer = torch.where(rows, fresh, buffer)
            self._frames[in_key] = buffer
            next_tensordict.set(out_key, buffer.clone())
        return next_tensordict

    def _inv_call(self, tensordict):
        return self.unfolding(tensordict) if self.as_inverse else tensordict

    def forward(self, tensordict):
        return tensordict if self.as_inverse else self.unfolding(tensordict)

    @apply_to_composite
    def transform_observation_spec(self, observation_spec):
        shape = list(observation_spec.shape)
        shape[self.dim] *= self.N
        spec, space = observation_spec, observation_spec.space
        if isinstance(spec, Bounded):
            low, high = torch.cat([space.low] * self.N, self.dim), torch.cat([space.high] * self.N, self.dim)
            return Bounded(low, high, shape=shape, dtype=spec.dtype, device=spec.device)
        if isinstance(spec, Unbounded):
            return Unbounded(shape=shape, dtype=spec.dtype, device=spec.device)
        spec = spec.clone()
        spec.shape = shape
        return spec

    # ---- offline: windows of trajectories --------------------------------------------------------
    def unfolding(self, tensordict):
        """Each step's last ``N`` frames within its trajectory, along the ``"time"`` dim."""
        if not tensordict.ndim:
            raise ValueError("CatFrames cannot process unbatched tensordict instances. Make sure your input has "
                             "more than one dimension and the time dimension is marked as 'time', e.g., "
                             "`tensordict.refine_names(None, 'time', None)`.")
        names = tensordict.names
        if "time" in names:
            tdim = names.index("time")
        else:
            warnings.warn("The last dimension of the tensordict should be marked as 'time'. CatFrames will unfold "
                          "the data along the time dimension assuming that the time dimension is the last dimension "
                          "of the input tensordict.", UserWarning, stacklevel=2)
            tdim = tensordict.ndim - 1
        done = tensordict.get(("next", self.done_key), None)
        if done is None:
            raise KeyError(f"CatFrames.unfolding requires the {('next', self.done_key)} entry to delimit trajectories.")
        done = done.reshape(*tensordict.shape, -1).any(-1).movedim(tdim, 0)
        steps = done.shape[0]
        starts = torch.cat([torch.ones_like(done[:1]), done[:-1]], 0)
        time = torch.arange(steps).reshape(steps, *([1] * (done.ndim - 1))).expand_as(done)
        start = torch.where(starts, time, 0).cummax(0).values
        inputs = {key: tensordict.get(key) for key in self.in_keys}
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            data = inputs[in_key]
            root_key = in_key[1] if isinstance(in_key, tuple) and len(in_key) == 2 and in_key[0] == "next" else None
            # a ("next", key) window runs over the root's first value, then the "next" values
            root = inputs[root_key] if root_key is not None and root_key in inputs else None
            tensordict.set(out_key, torch.cat(self._frames_of(data, tdim, start, time, root), self.dim))
        return tensordict

    def _frames_of(self, data, tdim, start, time, root=None) -> list:
        """The ``N`` frames of each step's window, oldest first (a list of ``data``-shaped tensors)."""
        data_t = data.movedim(tdim, 0)
        steps, batch = start.shape[0], start[0].numel()
        flat = data_t.reshape(steps, batch, *data_t.shape[start.ndim:])
        cols = torch.arange(batch).expand(steps, batch)
        first = start.reshape(steps, batch) - (0 if root is None else 1)  # where the sequence starts
        opening = None if root is None else root.movedim(tdim, 0).reshape(flat.shape)[first + 1, cols]
        frames = []
        for offset in range(self.N - 1, -1, -1):
            index = (time - offset).reshape(steps, batch)
            value = flat[index.clamp(min=0).maximum(first), cols]
            if root is not None:  # before the first "next" value: the root's
                value = torch.where(_right(index <= first, value), opening, value)
            if self.padding == "constant":
                value = torch.where(_right(index >= first, value), value, torch.full_like(value, self.padding_value))
            frames.append(value.reshape(data_t.shape).movedim(0, tdim))
        return frames

    # ---- a replay buffer that stores single frames ------------------------------------------------
    def make_rb_transform_and_sampler(self, batch_size: int, **sampler_kwargs):
        """``(transform, sampler)`` for a replay buffer that stores single frames and stacks them
        when it samples (TorchRL's): ``sampler`` is ``SliceSampler(slice_len=N, **sampler_kwargs)``
        and draws ``N`` steps of one trajectory for each item (``rb.sample(b)`` reads ``b * N``
        steps); ``transform`` stacks each slice's frames into its last step, root and ``"next"``,
        and keeps the stacks out of what the buffer stores. ``batch_size`` is TorchRL's argument:
        the size is the one given to ``sample``.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from reap.data import LazyTensorStorage, ReplayBuffer
            >>> frames = CatFrames(N=3, dim=-1, in_keys=["obs"], out_keys=["stack"])
            >>> transform, sampler = frames.make_rb_transform_and_sampler(batch_size=4)
            >>> rb = ReplayBuffer(storage=LazyTensorStorage(20), sampler=sampler, transform=transform)
            >>> obs = torch.arange(10.0).unsqueeze(-1)
            >>> done = torch.zeros(10, 1, dtype=torch.bool)
            >>> index = rb.extend(TensorDict(obs=obs, next=TensorDict(obs=obs + 1, done=done), batch_size=[10]))
            >>> sample = rb.sample(4)
            >>> sample.shape, bool((sample["stack"] == sample["stack"][:, :1] + torch.arange(3.0)).all())
            (torch.Size([4]), True)
        """
        from reap.data.replay_buffers import SliceSampler  # reap-replay's, through reap's mirror

        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"CatFrames.make_rb_transform_and_sampler: batch_size must be a positive int, got "
                             f"{batch_size!r}")
        in_keys, out_keys = _with_next(self.in_keys), _with_next(self.out_keys)
        stacking = type(self)(N=self.N, dim=self.dim, in_keys=in_keys, out_keys=out_keys, padding=self.padding,
                              padding_value=self.padding_value, done_key=self.done_key)
        sampler = SliceSampler(slice_len=self.N, **sampler_kwargs)
        sampler._batch_size_multiplier = self.N
        transform = Compose(partial(_slices, self.N), stacking, _last_step, ExcludeTransform(*out_keys, inverse=True))
        return transform, sampler

    # ---- arrays --------------------------------------------------------------------------------
    def replaced_keys(self):
        return tuple(self.out_keys)

    def reads_inputs(self):
        return tuple(self.in_keys)

    def _attach(self, env):
        if self.as_inverse:
            raise FailsWhenRun(ValueError("CatFrames as inverse is not supported as a transform for environments, "
                                          "only for replay buffers."))
        self._check_in_keys(env)
        root = env.root_specs()
        self._frame = {k: root[k].shape[self.dim] for k in self.in_keys}

    def on_reset(self, root, t, mask):
        for src, dst in self._pairs:
            d, value, out = self._frame[src], root[("in", src)][t], root[dst][t]
            for k in range(self.N):
                chunk = out[along(self.dim, k * d, (k + 1) * d)]
                if self.padding == "constant" and k < self.N - 1:
                    if mask is None or mask.ndim == 0:
                        chunk[...] = self.padding_value
                    else:
                        chunk[mask] = self.padding_value
                else:
                    write_rows(chunk, value, mask)

    def on_step(self, root, nxt, t):
        for src, dst in self._pairs:
            d, prev, out = self._frame[src], root[dst][t], nxt[dst][t]
            np.copyto(out[along(self.dim, 0, -d)], prev[along(self.dim, d, None)])
            np.copyto(out[along(self.dim, -d, None)], nxt[("in", src)][t])

    def __repr__(self) -> str:
        return f"CatFrames(N={self.N}, dim={self.dim}, keys={self.in_keys})"
