"""``DiscreteActionProjection``: one policy over envs with fewer discrete actions than it has.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> t = DiscreteActionProjection(num_actions_effective=2, max_actions=3)
    >>> t.inv(TensorDict(action=torch.tensor([0, 1, 0])))["action"]  # kept: 1 < 2
    tensor([0, 1])
    >>> t(TensorDict(action=torch.tensor([0, 1])))["action"]  # the env's action, padded (a buffer's data)
    tensor([0, 1, 0])
"""

from __future__ import annotations

import torch

from reap.envs.transforms.transform import Transform
from reap.specs import OneHot


class DiscreteActionProjection(Transform):
    """The env takes ``num_actions_effective`` one-hot actions; the policy writes ``max_actions``
    (TorchRL's ``DiscreteActionProjection``). An action index at or past ``num_actions_effective``
    is replaced by a uniform draw below it before the env steps; the others are kept.

    Args:
        num_actions_effective (int): the env's number of actions.
        max_actions (int): the policy's (at least ``num_actions_effective``).
        action_key (NestedKey): the one-hot action. Defaults to ``"action"``.
        include_forward (bool): ``t(td)`` (a replay buffer, a module chain) pads the env's
            actions to ``max_actions``. Defaults to True.
    """

    def __init__(self, num_actions_effective: int, max_actions: int, action_key="action",
                 include_forward: bool = True):
        keys = [action_key]
        super().__init__(in_keys=list(keys) if include_forward else [], out_keys=list(keys) if include_forward else [],
                         in_keys_inv=list(keys), out_keys_inv=list(keys))
        if max_actions < num_actions_effective:
            raise RuntimeError("The `max_actions` int must be greater or equal to `num_actions_effective`.")
        self.num_actions_effective, self.max_actions = num_actions_effective, max_actions

    def _call(self, next_tensordict):
        return next_tensordict  # the action lives in the root: only the inverse changes it

    def _apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(action.long().argmax(-1), self.max_actions)

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        if action.shape[-1] != self.max_actions:
            raise RuntimeError(f"action.shape[-1]={action.shape[-1]} must match self.max_actions={self.max_actions}.")
        index = action.long().argmax(-1)
        past = index >= self.num_actions_effective
        if past.any():
            index[past] = torch.randint(self.num_actions_effective, (int(past.sum()),))
        return torch.nn.functional.one_hot(index, self.num_actions_effective)

    def transform_input_spec(self, input_spec):
        input_spec = input_spec.clone()
        keys = list(input_spec["full_action_spec"].keys(True, True))
        if not keys:
            raise KeyError("key not found in action_spec.")
        key = ("full_action_spec", *((keys[0],) if isinstance(keys[0], str) else keys[0]))
        spec = input_spec[key]
        input_spec[key] = OneHot(self.max_actions, shape=(*spec.shape[:-1], self.max_actions), device=spec.device,
                                 dtype=spec.dtype)
        return input_spec

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_actions_effective={self.num_actions_effective}, "
                f"max_actions={self.max_actions}, in_keys_inv={self.in_keys_inv})")
