"""Transforms that rename or hide entries (TorchRL's): ``RenameTransform``, ``ExcludeTransform``,
``SelectTransform``, ``RemoveEmptySpecs``. Renaming and hiding cost nothing per step (see ``layout``); the done flags
stay (the collector reads them), though ``create_copy=True`` may copy them.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import ExcludeTransform, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter())
    >>> sorted(env.append_transform(ExcludeTransform("step_count")).reset().keys())
    ['done', 'observation', 'terminated', 'truncated']
"""

from __future__ import annotations

from copy import copy

import numpy as np
from tensordict import is_tensor_collection
from tensordict.utils import is_non_tensor

from reap.envs.transforms.transform import Transform, keys_list, missing_tolerance, write_rows


class RenameTransform(Transform):
    """Show ``in_keys`` under the names ``out_keys``, and ``out_keys_inv`` (what the policy writes)
    as ``in_keys_inv`` to the env (TorchRL's ``RenameTransform``).

    With ``create_copy=True`` the original entries stay and the new ones are copies.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import RenameTransform, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), RenameTransform(["observation"], ["obs"], ["action"], ["act"]))
        >>> env.action_key, env.rollout(2)["next", "obs"].shape
        ('act', torch.Size([2, 3]))
    """

    _array_hooks = True
    _array_inverse = True

    def __init__(self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, create_copy: bool = False):
        in_keys_inv = [] if in_keys_inv is None else in_keys_inv
        out_keys_inv = copy(in_keys_inv) if out_keys_inv is None else out_keys_inv
        self.create_copy = create_copy
        super().__init__(in_keys, out_keys, in_keys_inv, out_keys_inv)
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(f"The number of in_keys ({len(self.in_keys)}) should match the number of out_keys "
                             f"({len(self.out_keys)}).")
        if len(self.in_keys_inv) != len(self.out_keys_inv):
            raise ValueError(f"The number of in_keys_inv ({len(self.in_keys_inv)}) should match the number of "
                             f"out_keys_inv ({len(self.out_keys_inv)}).")
        if set(self.out_keys) & set(self.in_keys):
            raise ValueError(f"Cannot have matching in and out_keys because order is unclear. Please use separated "
                             f"transforms. Got in_keys={self.in_keys} and out_keys={self.out_keys}.")

    def _call(self, next_tensordict):
        if self.create_copy:
            out = next_tensordict.select(*self.in_keys, strict=not self.missing_tolerance)
            for in_key, out_key in zip(self.in_keys, self.out_keys):
                if in_key in out.keys(True):
                    out.rename_key_(in_key, out_key)
            return next_tensordict.update(out)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in next_tensordict.keys(True) or not self.missing_tolerance:
                next_tensordict.rename_key_(in_key, out_key)
        return next_tensordict

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        with missing_tolerance(self):
            return self._call(tensordict_reset)

    def _inv_call(self, tensordict):
        if self.create_copy:
            out = tensordict.select(*self.out_keys_inv, strict=not self.missing_tolerance)
            for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
                if out_key in out.keys(True):
                    out.rename_key_(out_key, in_key)
            return tensordict.update(out)
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            if out_key in tensordict.keys(True) or not self.missing_tolerance:
                tensordict.rename_key_(out_key, in_key)
        return tensordict

    def _renamed(self, spec, pairs):
        for in_key, out_key in pairs:
            if in_key in spec.keys(True, True):
                spec[out_key] = spec[in_key].clone()
                if not self.create_copy:
                    del spec[in_key]
        return spec

    def transform_output_spec(self, output_spec):
        pairs = list(zip(self.in_keys, self.out_keys))
        for name in ("full_done_spec", "full_reward_spec", "full_observation_spec"):
            self._renamed(output_spec[name], pairs)
        return output_spec

    def transform_input_spec(self, input_spec):
        pairs = list(zip(self.in_keys_inv, self.out_keys_inv))
        for name in ("full_action_spec", "full_state_spec"):
            self._renamed(input_spec[name], pairs)
        return input_spec

    # ---- arrays: a rename is a new name for the same array; a copy is a new array -------------
    def _attach(self, env):
        self._check_in_keys(env)
        self._step_copies = [(src, dst) for src, dst in self._pairs if src in env.next_specs()]

    def key_moves(self):
        if self.create_copy:
            return {}
        return {**dict(zip(self.out_keys, self.in_keys)), **dict(zip(self.out_keys_inv, self.in_keys_inv))}

    def _copy(self, arrays, t, mask=None):
        for src, dst in self._pairs:
            if src in arrays:
                write_rows(arrays[dst][t], arrays[src][t], mask)

    def on_reset(self, root, t, mask):
        if self.create_copy:
            self._copy(root, t, mask)

    def on_step(self, root, nxt, t):
        if self.create_copy:
            for src, dst in self._step_copies:
                np.copyto(nxt[dst][t], nxt[src][t])

    def on_action(self, root, t):
        if self.create_copy:
            for src, dst in zip(self.in_keys_inv, self.out_keys_inv):
                write_rows(root[src][t], root[dst][t], None)

    def __repr__(self) -> str:
        return (f"RenameTransform(in_keys={self.in_keys}, out_keys={self.out_keys}, in_keys_inv={self.in_keys_inv}, "
                f"out_keys_inv={self.out_keys_inv}, create_copy={self.create_copy})")


class ExcludeTransform(Transform):
    """Leave ``excluded_keys`` out of the env's outputs (with ``inverse=True``: out of its inputs),
    as TorchRL's ``ExcludeTransform``. A key the env does not produce is a KeyError; an excluded
    state entry (``step_count``) is still kept, out of sight, for the transforms that need it."""

    _array_hooks = True

    def __init__(self, *excluded_keys, inverse: bool = False):
        super().__init__()
        if len(excluded_keys) == 1 and isinstance(excluded_keys[0], list):
            excluded_keys = excluded_keys[0]
        self.excluded_keys = keys_list(list(excluded_keys), "ExcludeTransform", "excluded_keys")
        self.inverse = inverse

    def _call(self, next_tensordict):
        return next_tensordict if self.inverse else next_tensordict.exclude(*self.excluded_keys)

    forward = _call

    def _inv_call(self, tensordict):
        return tensordict.exclude(*self.excluded_keys) if self.inverse else tensordict

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def transform_output_spec(self, output_spec):
        if self.inverse:
            return output_spec
        for key in self.excluded_keys:
            for name in ("full_done_spec", "full_reward_spec", "full_observation_spec"):
                spec = output_spec[name]
                if key in spec.keys(True, True):
                    del spec[key]
                    break
            else:
                raise KeyError(f"Key {key} not found in the environment outputs.")
        return output_spec

    def transform_input_spec(self, input_spec):
        # reap's addition: an excluded entry is no state either (TorchRL keeps it in state_spec,
        # then fails to find it at the next reset)
        if not self.inverse:
            state = input_spec["full_state_spec"]
            for key in self.excluded_keys:
                if key in state.keys(True, True):
                    del state[key]
        return input_spec

    def __repr__(self) -> str:
        return f"ExcludeTransform(excluded_keys={self.excluded_keys}, inverse={self.inverse})"


class SelectTransform(Transform):
    """Keep only ``selected_keys`` of the env's outputs, with the reward, the done flags and the
    state entries unless told otherwise (TorchRL's ``SelectTransform``)."""

    _array_hooks = True

    def __init__(self, *selected_keys, keep_rewards: bool = True, keep_dones: bool = True):
        super().__init__()
        if len(selected_keys) == 1 and isinstance(selected_keys[0], list):
            selected_keys = selected_keys[0]
        self.selected_keys = keys_list(list(selected_keys), "SelectTransform", "selected_keys")
        self.keep_done_keys = keep_dones
        self.keep_reward_keys = keep_rewards

    def _kept(self) -> list:
        parent = self.parent
        state = list(parent.full_state_spec.keys(True, True)) if parent is not None else []
        rewards = (parent.reward_keys if parent is not None else ["reward"]) if self.keep_reward_keys else []
        dones = (parent.done_keys if parent is not None else ["done"]) if self.keep_done_keys else []
        return [*self.selected_keys, *rewards, *dones, *state]

    def _call(self, next_tensordict):
        return next_tensordict.select(*self._kept(), strict=False)

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        return tensordict_reset.select(*self._kept(), strict=False)

    def transform_output_spec(self, output_spec):
        keep = set(self.selected_keys)
        names = ["full_observation_spec"]
        names += [] if self.keep_done_keys else ["full_done_spec"]
        names += [] if self.keep_reward_keys else ["full_reward_spec"]
        for name in names:
            spec = output_spec[name]
            for key in list(spec.keys(True, True)):
                if key not in keep:
                    del spec[key]
        return output_spec

    def __repr__(self) -> str:
        return f"SelectTransform(selected_keys={self.selected_keys})"


def _deepest_first(item) -> int:
    key = item[0]
    return len(key) if isinstance(key, tuple) else 1


def _remove_empty_composites(spec) -> list:
    """Delete the empty Composites of ``spec``, the deepest first (so that a parent left empty by
    the removal of its children goes too); returns their keys."""
    from reap.specs import Composite

    removed = []
    for key, sub in sorted(spec.items(True), key=_deepest_first, reverse=True):
        if isinstance(sub, Composite) and sub.is_empty():
            removed.append(key)
            del spec[key]
    return removed


class RemoveEmptySpecs(Transform):
    """Drop the empty ``Composite`` entries of the env's specs and the empty sub-TensorDicts of its
    outputs (TorchRL's ``RemoveEmptySpecs``); on the way in, the empty entries the inner env's
    input spec has are given back.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from reap.envs.transforms import RemoveEmptySpecs
        >>> td = TensorDict(obs=torch.zeros(2, 1), other=TensorDict(batch_size=[2]), batch_size=[2])
        >>> sorted(RemoveEmptySpecs()(td).keys())
        ['obs']
    """

    def __init__(self):
        super().__init__()
        self._empty_inputs: list = []

    def transform_output_spec(self, output_spec):
        output_spec = output_spec.clone()
        for part in ("full_done_spec", "full_observation_spec", "full_reward_spec"):
            _remove_empty_composites(output_spec[part])
        return output_spec

    def transform_input_spec(self, input_spec):
        input_spec = input_spec.clone()
        self._empty_inputs = [key for part in ("full_action_spec", "full_state_spec")
                              for key in _remove_empty_composites(input_spec[part])]
        return input_spec

    def _call(self, next_tensordict):
        for key, value in sorted(next_tensordict.items(True), key=_deepest_first, reverse=True):
            if is_tensor_collection(value) and not is_non_tensor(value) and value.is_empty():
                del next_tensordict[key]
        return next_tensordict

    forward = _call

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def _inv_call(self, tensordict):
        for key in self._empty_inputs:
            if key not in tensordict.keys(True):
                tensordict.create_nested(key)
        return tensordict
