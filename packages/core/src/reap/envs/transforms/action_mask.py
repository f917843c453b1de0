"""``ActionMask``: the env's legal actions, read from an observation, narrow its action spec.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs import EnvBase
    >>> from reap.specs import Binary, Categorical, Composite, Unbounded
    >>> class Masked(EnvBase):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.action_spec = Categorical(3)
    ...         self.observation_spec = Composite(action_mask=Binary(3, dtype=torch.bool))
    ...         self.reward_spec = Unbounded(1)
    ...     def _reset(self, td):
    ...         return TensorDict(action_mask=torch.tensor([False, True, False]))
    ...     def _step(self, td):
    ...         return TensorDict(action_mask=torch.tensor([False, True, False]), reward=torch.zeros(1),
    ...                           done=torch.zeros(1, dtype=torch.bool))
    ...     def _set_seed(self, seed):
    ...         pass
    >>> env = Masked().append_transform(ActionMask())
    >>> env.rollout(5)["action"].tolist()  # the only legal action
    [1, 1, 1, 1, 1]
"""

from __future__ import annotations

from reap.envs.transforms.transform import FORWARD_NOT_IMPLEMENTED, Transform
from reap.specs import Categorical, MultiCategorical, MultiOneHot, OneHot


class ActionMask(Transform):
    """Updates the mask of the env's discrete action spec from the ``mask_key`` entry after
    every reset and step (TorchRL's ``ActionMask``), so random actions (``env.rand_action``,
    a collector's ``policy=None`` and ``init_random_frames``) are legal ones.

    Args:
        action_key (NestedKey): the action whose spec is masked. Defaults to ``"action"``.
        mask_key (NestedKey): the boolean observation that holds the mask, shaped as the spec's
            ``mask`` (``[*batch, n]`` for ``Categorical``/``OneHot``; a grid of cells, ``[*batch, *nvec]``,
            for GymEnv's grid action of a ``MultiDiscrete`` space). Defaults to ``"action_mask"``.

    The action spec must be ``OneHot``, ``Categorical``, ``MultiOneHot`` or ``MultiCategorical``
    (a ``ValueError`` names it otherwise, at the first reset). The transform needs an env:
    called on a TensorDict (``t(td)``, a replay buffer) it raises.
    """

    ACCEPTED_SPECS = (OneHot, Categorical, MultiOneHot, MultiCategorical)
    SPEC_TYPE_ERROR = "The action spec must be one of {}. Got {} instead."

    def __init__(self, action_key="action", mask_key="action_mask"):
        for name, key in (("action", action_key), ("mask", mask_key)):
            if not isinstance(key, (tuple, str)):
                raise ValueError(f"The {name} key must be a nested key. Got {type(key)} instead.")
        super().__init__(in_keys=[action_key, mask_key], out_keys=[], in_keys_inv=[], out_keys_inv=[])

    def forward(self, tensordict):
        raise RuntimeError(FORWARD_NOT_IMPLEMENTED.format(type(self)))

    @property
    def action_spec(self):
        """The spec this transform masks: the container's spec of ``action_key``."""
        spec = self.container.full_action_spec[self.in_keys[0]]
        if not isinstance(spec, self.ACCEPTED_SPECS):
            raise ValueError(self.SPEC_TYPE_ERROR.format(self.ACCEPTED_SPECS, type(spec)))
        return spec

    def _call(self, next_tensordict):
        if self.parent is None:
            raise RuntimeError(f"{type(self)}.parent cannot be None: make sure this transform is executed "
                               "within an environment.")
        spec = self.action_spec
        mask = next_tensordict.get(self.in_keys[1]).to(spec.device)
        if type(spec) in (Categorical, OneHot) and mask.shape[-1] != spec.space.n:
            # a grid of cells (GymEnv's MultiDiscrete action with a mask shaped as its nvec): one row
            batch = spec.shape if type(spec) is Categorical else spec.shape[:-1]
            mask = mask.reshape(*batch, spec.space.n)
        spec.update_mask(mask)
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)
