"""Running a transform through TorchRL's hooks on TensorDict views of the step arrays.

A transform whose array hooks do not stand for it (a user's subclass written for TorchRL, a
callable) runs here: each step builds TensorDicts over the rows of the arrays before the
transform (no copy), calls ``_step``/``_reset``/``_inv_call`` and copies what it returns into the
arrays after it. This path allocates per step; reap's own transforms use their array hooks.

Examples:
    >>> import torch
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import Transform, TransformedEnv
    >>> class Double(Transform):
    ...     def _apply_transform(self, obs):
    ...         return obs * 2
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), Double(in_keys=["observation"], out_keys=["observation"]))
    >>> td = env.rollout(2)
    >>> bool((td["next", "observation"][:, 0].abs() <= 2).all())
    True
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict

from reap.envs.base import is_hidden
from reap.envs.transforms.transform import Transform, write_rows


def _row(array: np.ndarray, t: int) -> torch.Tensor:
    return torch.from_numpy(array[t, ...])


class TensorDictHooks:
    """``on_reset``/``on_step``/``on_action`` of ``transform`` through its TorchRL hooks.

    ``before`` and ``after`` are the (root, next) keys of the chain around the transform (its
    actions ``action_keys``, the env's after it ``actions_after``); the
    views it is called with hold the arrays after it under their keys and the arrays before it
    under ``("in", key)``.
    """

    def __init__(self, transform: Transform, batch_size, before: tuple, after: tuple, action_keys, actions_after=()):
        self.transform = transform
        self.batch_size = batch_size
        self.root_in = [k for k in before[0] if not is_hidden(k)]
        self.next_in = [k for k in before[1] if not is_hidden(k)]
        self.root_out = [k for k in after[0] if not is_hidden(k)]
        self.next_out = [k for k in after[1] if not is_hidden(k)]
        # the root of a step also holds what the transform keeps there itself (a count, a sum)
        self.root_own = [k for k in self.root_out if k not in self.root_in]
        self.action_keys = set(action_keys)  # before and after the transform
        # entries the inverse writes that the env after the transform keeps as state (ActionDiscretizer's
        # continuous action beside the discrete one): the step's record holds what the env got, as TorchRL's
        self.recorded = [k for k in (transform.in_keys_inv or []) if k in self.root_in and k in self.root_out
                         and k not in set(actions_after)]

    def _td(self, view: dict, keys, t: int, inputs: bool = True) -> TensorDict:
        td = TensorDict(batch_size=self.batch_size)
        for key in keys:
            array = view.get(("in", key) if inputs else key)
            if array is not None:
                td.set(key, _row(array, t))
        return td

    def _write(self, view: dict, keys, out, t: int, mask) -> None:
        known = set(keys)
        for key in out.keys(True, True):
            if key not in known and not is_hidden(key) and key != "_reset":
                raise KeyError(
                    f"{type(self.transform).__name__} wrote {key!r}, which no spec declares: register it in "
                    "the specs (transform_observation_spec, transform_reward_spec, ...) so that the env "
                    "has room for it"
                )
        for key in keys:
            value = out.get(key, None)
            if value is None:
                continue
            dest = view[key][t, ...]
            write_rows(dest, value.detach().numpy(force=True) if isinstance(value, torch.Tensor) else value, mask)

    def on_reset(self, root: dict, t: int, mask) -> None:
        source = TensorDict(batch_size=self.batch_size)
        if mask is not None and mask.ndim:
            source.set("_reset", torch.from_numpy(mask).reshape(*self.batch_size, 1))
        keys = [k for k in self.root_in if k not in self.action_keys]
        out = self.transform._reset(source, self._td(root, keys, t))
        self._write(root, [k for k in self.root_out if k not in self.action_keys], out, t, mask)

    def on_step(self, root: dict, nxt: dict, t: int) -> None:
        data = self._td(root, self.root_in, t)
        for key in self.root_own:
            data.set(key, _row(root[key], t))
        out = self.transform._step(data, self._td(nxt, self.next_in, t))
        self._write(nxt, self.next_out, out, t, None)

    def on_action(self, root: dict, t: int) -> None:
        data = self._td(root, self.root_out, t, inputs=False)
        given = {key: data.get(key) for key in self.root_in if key in self.root_out}
        out = self.transform._inv_call(data)
        for key in self.root_in:  # what the inverse changed, written where the env before reads it
            value = out.get(key, None)
            if value is not None and value is not given.get(key):
                value = value.detach().numpy(force=True)
                write_rows(root[("in", key)][t, ...], value, None)
                if key in self.recorded:
                    write_rows(root[key][t, ...], value, None)
