"""Transforms that reshape or combine entries: ``CatTensors``, ``UnsqueezeTransform``, ``CatFrames``.

Each writes its output array in place from its input arrays (read as they were before it, under
``("in", key)``); when the output keeps the input's name, the input stays as a hidden array.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import CatFrames, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), CatFrames(N=4, dim=-1, in_keys=["observation"]))
    >>> env.rollout(3)["next", "observation"].shape
    torch.Size([3, 12])
"""

from __future__ import annotations

import numpy as np

from reap.envs.transforms.transformed_env import Transform
from reap.specs import Unbounded


def _along(dim: int, start, stop) -> tuple:
    """An index selecting ``start:stop`` along the negative dimension ``dim``."""
    return (Ellipsis, slice(start, stop), *([slice(None)] * (-dim - 1)))


def _negative_dim(dim, owner: str) -> int:
    if not isinstance(dim, int) or dim >= 0:
        raise ValueError(
            f"{owner}: dim must be a negative int (counted from the last dimension, so that it does "
            f"not depend on the env's batch dims), got {dim!r}"
        )
    return dim


def _write_rows(dest: np.ndarray, value: np.ndarray, mask) -> None:
    if mask is None or mask.ndim == 0:
        np.copyto(dest, value)
    else:
        dest[mask] = value[mask]


class _Reshaping(Transform):
    """Shared plumbing: ``out_keys`` written from ``in_keys`` on both sides, observations kept."""

    def _outputs(self):
        return list(zip(self.in_keys, self.out_keys))

    def replaced_keys(self):
        return tuple(k for k in self.out_keys if k in self.in_keys)

    def reads_inputs(self):
        return tuple(self.in_keys)

    def observation_keys(self, keys):
        out = [k for k in keys if k not in self.in_keys or k in self.out_keys]
        return out + [k for k in self.out_keys if k not in out]

    def state_keys(self):
        state = self.parent.state_keys if self.parent is not None else ()
        return tuple(dst for src, dst in self._outputs() if src in state)


class CatTensors(_Reshaping):
    """Concatenate ``in_keys`` along ``dim`` into ``out_key`` (TorchRL's ``CatTensors``).

    ``in_keys`` are sorted (``sort=True``, as in TorchRL) and removed (``del_keys=True``).

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import CatTensors, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), CatTensors(["observation"], "vec"))
        >>> sorted(env.observation_spec.keys())
        ['vec']
    """

    def __init__(self, in_keys, out_key: str = "observation_vector", dim: int = -1, *,
                 del_keys: bool = True, sort: bool = True):
        if in_keys is None or not list(in_keys):
            raise ValueError("CatTensors: give the in_keys to concatenate")
        in_keys = sorted(in_keys) if sort else list(in_keys)
        super().__init__(in_keys=in_keys)
        self.out_keys = [out_key]
        self.dim = _negative_dim(dim, "CatTensors")
        self.del_keys = del_keys

    def _cat(self, specs):
        present = [k for k in self.in_keys if k in specs]
        if not present:
            return specs
        if len(present) != len(self.in_keys):
            raise KeyError(f"CatTensors: in_keys {self.in_keys} are not all on the same side of the step")
        shapes = [specs[k].shape for k in present]
        size = sum(s[self.dim] for s in shapes)
        shape = list(shapes[0])
        shape[self.dim] = size
        out = Unbounded(shape=shape, dtype=specs[present[0]].dtype)
        if self.del_keys:
            specs = {k: v for k, v in specs.items() if k not in present}
        specs[self.out_keys[0]] = out
        return specs

    transform_root_specs = transform_next_specs = _cat

    def set_container(self, env):
        super().set_container(env)
        root = env.root_specs()
        sizes = [root[k].shape[self.dim] if k in root else env.next_specs()[k].shape[self.dim]
                 for k in self.in_keys]
        edges = np.cumsum([0, *sizes])
        self._slices = [_along(self.dim, int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]

    def replaced_keys(self):
        return tuple(self.out_keys) if self.out_keys[0] in self.in_keys else ()

    def state_keys(self):
        state = self.parent.state_keys if self.parent is not None else ()
        return tuple(self.out_keys) if all(k in state for k in self.in_keys) else ()

    def _apply(self, arrays, t, mask):
        if ("in", self.in_keys[0]) not in arrays:
            return
        out = arrays[self.out_keys[0]][t]
        for key, index in zip(self.in_keys, self._slices):
            _write_rows(out[index], arrays[("in", key)][t], mask)

    def on_reset(self, root, t, mask):
        self._apply(root, t, mask)

    def on_step(self, root, nxt, t):
        self._apply(nxt, t, None)


class UnsqueezeTransform(_Reshaping):
    """Insert a dimension of size one at ``dim`` (negative) in ``in_keys`` (TorchRL's
    ``UnsqueezeTransform``); ``out_keys`` default to ``in_keys``.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import TransformedEnv, UnsqueezeTransform
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), UnsqueezeTransform(-2, in_keys=["observation"]))
        >>> env.reset()["observation"].shape
        torch.Size([1, 3])
    """

    def __init__(self, dim: int, *, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None):
        if in_keys_inv or out_keys_inv:
            raise ValueError("UnsqueezeTransform: in_keys_inv/out_keys_inv (on the action) are not supported")
        super().__init__(in_keys=in_keys)
        self.dim = _negative_dim(dim, "UnsqueezeTransform")
        self._out_keys = None if out_keys is None else list(out_keys)

    def set_container(self, env):
        super().set_container(env)
        self.out_keys = list(self.in_keys) if self._out_keys is None else self._out_keys
        if len(self.out_keys) != len(self.in_keys):
            raise ValueError(
                f"UnsqueezeTransform: out_keys {self.out_keys} must match in_keys {self.in_keys} one to one"
            )

    def _unsqueeze(self, specs):
        out = dict(specs)
        for src, dst in self._outputs():
            if src in specs:
                shape = list(specs[src].shape)
                position = len(shape) + 1 + self.dim
                shape.insert(position, 1)
                out[dst] = Unbounded(shape=shape, dtype=specs[src].dtype)
        return out

    transform_root_specs = transform_next_specs = _unsqueeze

    def _apply(self, arrays, t, mask):
        for src, dst in self._outputs():
            if ("in", src) in arrays:
                out = arrays[dst][t]
                _write_rows(out, arrays[("in", src)][t].reshape(out.shape), mask)

    def on_reset(self, root, t, mask):
        self._apply(root, t, mask)

    def on_step(self, root, nxt, t):
        self._apply(nxt, t, None)


class CatFrames(_Reshaping):
    """Stack the last ``N`` values of ``in_keys`` along ``dim`` (TorchRL's ``CatFrames``).

    At a reset the stack is filled with the first observation (``padding="same"``) or with
    ``padding_value`` (``"constant"``); each step shifts it by one and appends the new value.
    ``out_keys`` default to ``in_keys``.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import CatFrames, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), CatFrames(N=2, dim=-1, in_keys=["observation"]))
        >>> obs = env.reset()["observation"]
        >>> bool((obs[:3] == obs[3:]).all())
        True
    """

    def __init__(self, N: int, dim: int, in_keys=None, out_keys=None, padding: str = "same",
                 padding_value: float = 0.0, as_inverse: bool = False, reset_key=None, done_key=None):
        if not isinstance(N, int) or N < 1:
            raise ValueError(f"CatFrames: N must be a positive int, got {N!r}")
        if padding not in ("same", "constant"):
            raise ValueError(f"CatFrames: padding must be 'same' or 'constant', got {padding!r}")
        if as_inverse:
            raise ValueError("CatFrames: as_inverse=True is not supported")
        super().__init__(in_keys=in_keys)
        self.N, self.padding, self.padding_value = N, padding, padding_value
        self.dim = _negative_dim(dim, "CatFrames")
        self._out_keys = None if out_keys is None else list(out_keys)

    def set_container(self, env):
        super().set_container(env)
        self.out_keys = list(self.in_keys) if self._out_keys is None else self._out_keys
        if len(self.out_keys) != len(self.in_keys):
            raise ValueError(f"CatFrames: out_keys {self.out_keys} must match in_keys {self.in_keys} one to one")
        root = env.root_specs()
        self._frame = {k: root[k].shape[self.dim] for k in self.in_keys}

    def _stack(self, specs):
        out = dict(specs)
        for src, dst in self._outputs():
            if src in specs:
                shape = list(specs[src].shape)
                shape[self.dim] *= self.N
                out[dst] = Unbounded(shape=shape, dtype=specs[src].dtype)
        return out

    transform_root_specs = transform_next_specs = _stack

    def on_reset(self, root, t, mask):
        for src, dst in self._outputs():
            d, value, out = self._frame[src], root[("in", src)][t], root[dst][t]
            for k in range(self.N):
                chunk = out[_along(self.dim, k * d, (k + 1) * d)]
                if self.padding == "constant" and k < self.N - 1:
                    if mask is None or mask.ndim == 0:
                        chunk[...] = self.padding_value
                    else:
                        chunk[mask] = self.padding_value
                else:
                    _write_rows(chunk, value, mask)

    def on_step(self, root, nxt, t):
        for src, dst in self._outputs():
            d, prev, out = self._frame[src], root[dst][t], nxt[dst][t]
            np.copyto(out[_along(self.dim, 0, -d)], prev[_along(self.dim, d, None)])
            np.copyto(out[_along(self.dim, -d, None)], nxt[("in", src)][t])
