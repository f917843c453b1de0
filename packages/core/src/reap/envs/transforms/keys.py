"""Transforms that rename or hide entries: ``RenameTransform``, ``ExcludeTransform``,
``SelectTransform``. Renaming and hiding cost nothing per step (see ``TransformedEnv``).

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import ExcludeTransform, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter())
    >>> sorted(env.append_transform(ExcludeTransform("step_count")).reset().keys())
    ['done', 'observation', 'terminated', 'truncated']
"""

from __future__ import annotations

import numpy as np

from reap.envs.base import FLAG_KEYS
from reap.envs.transforms.transformed_env import Transform


def _names(keys, owner: str, what: str) -> list[str]:
    keys = [keys] if isinstance(keys, str) else list(keys)
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"{owner}: {what} must be plain string keys (reap's flat keys), got {key!r}")
    return keys


class RenameTransform(Transform):
    """Show ``in_keys`` under the names ``out_keys`` (TorchRL's ``RenameTransform``).

    With ``create_copy=True`` the original entries stay and the new ones are copies.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import RenameTransform, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), RenameTransform(["observation"], ["obs"]))
        >>> env.rollout(2)["next", "obs"].shape
        torch.Size([2, 3])
    """

    def __init__(self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, *,
                 create_copy: bool = False):
        in_keys = _names(in_keys, "RenameTransform", "in_keys")
        out_keys = _names(out_keys, "RenameTransform", "out_keys")
        if len(in_keys) != len(out_keys):
            raise ValueError(
                f"RenameTransform: in_keys and out_keys must have the same length, got {in_keys} and {out_keys}"
            )
        if in_keys_inv or out_keys_inv:
            raise ValueError(
                "RenameTransform: in_keys_inv/out_keys_inv (renaming the action) are not supported; "
                "make the policy write the env's action key"
            )
        super().__init__(in_keys=in_keys)
        self.out_keys = out_keys
        self.create_copy = create_copy

    def set_container(self, env):
        super().set_container(env)
        taken = [k for k in self.out_keys if k in env.root_specs() or k in env.next_specs()]
        if taken:
            raise ValueError(f"RenameTransform: out_keys {taken} already exist in the env")
        bad = [k for k in self.in_keys if k in FLAG_KEYS or k == env.action_key]
        if bad:
            raise ValueError(f"RenameTransform: {bad} cannot be renamed (the collector reads them)")

    def _move(self, specs):
        for src, dst in zip(self.in_keys, self.out_keys):
            if src in specs:
                specs[dst] = specs[src] if self.create_copy else specs.pop(src)
        return specs

    transform_root_specs = transform_next_specs = _move

    def key_moves(self):
        return {} if self.create_copy else dict(zip(self.out_keys, self.in_keys))

    def observation_keys(self, keys):
        if not self.create_copy:
            return keys
        return keys + [dst for src, dst in zip(self.in_keys, self.out_keys) if src in keys]

    def state_keys(self):
        if not self.create_copy or self.parent is None:
            return ()
        return tuple(dst for src, dst in zip(self.in_keys, self.out_keys) if src in self.parent.state_keys)

    def _copy(self, arrays, t, mask=None):
        for src, dst in zip(self.in_keys, self.out_keys):
            if src in arrays:
                if mask is None or mask.ndim == 0:
                    np.copyto(arrays[dst][t], arrays[src][t])
                else:
                    arrays[dst][t][mask] = arrays[src][t][mask]

    def on_reset(self, root, t, mask):
        if self.create_copy:
            self._copy(root, t, mask)

    def on_step(self, root, nxt, t):
        if self.create_copy:
            self._copy(nxt, t)


class ExcludeTransform(Transform):
    """Leave ``excluded_keys`` out of the env's TensorDicts and batches (TorchRL's ``ExcludeTransform``).

    The done flags and the action cannot be excluded: the collector reads them.
    """

    def __init__(self, *excluded_keys):
        if len(excluded_keys) == 1 and not isinstance(excluded_keys[0], str):
            excluded_keys = tuple(excluded_keys[0])
        self.excluded_keys = _names(excluded_keys, "ExcludeTransform", "excluded_keys")
        super().__init__(in_keys=[])

    def set_container(self, env):
        super().set_container(env)
        bad = [k for k in self.excluded_keys if k in FLAG_KEYS or k == env.action_key]
        if bad:
            raise ValueError(f"ExcludeTransform: {bad} cannot be excluded (the collector reads them)")

    def _drop(self, specs):
        return {k: v for k, v in specs.items() if k not in self.excluded_keys}

    transform_root_specs = transform_next_specs = _drop


class SelectTransform(Transform):
    """Keep only ``selected_keys`` (plus the action, reward and done flags, as TorchRL does)."""

    def __init__(self, *selected_keys, keep_rewards: bool = True, keep_dones: bool = True):
        if len(selected_keys) == 1 and not isinstance(selected_keys[0], str):
            selected_keys = tuple(selected_keys[0])
        self.selected_keys = _names(selected_keys, "SelectTransform", "selected_keys")
        if not keep_dones:
            raise ValueError("SelectTransform: keep_dones=False is not supported (the collector reads the flags)")
        self.keep_rewards = keep_rewards
        super().__init__(in_keys=[])

    def _keep(self, specs):
        keep = {*self.selected_keys, *FLAG_KEYS, self.parent.action_key}
        if self.keep_rewards:
            keep.add(self.parent.reward_key)
        return {k: v for k, v in specs.items() if k in keep}

    transform_root_specs = transform_next_specs = _keep
