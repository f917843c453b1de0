"""``MultiStepTransform``: n-step returns computed as data enters a replay buffer (TorchRL's).

Each ``extend`` holds back its last ``n_steps`` steps (time is the last dim) until the next
``extend`` brings the steps they look ahead to, so the returns do not depend on where the
collector cut its batches (``MultiStep`` as ``postproc=`` sees one batch only).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.transforms import MultiStepTransform
    >>> t = MultiStepTransform(n_steps=2, gamma=0.5)
    >>> def chunk(rewards):
    ...     n = len(rewards)
    ...     return TensorDict({"next": {"reward": torch.tensor(rewards).view(n, 1),
    ...                                 "done": torch.zeros(n, 1, dtype=torch.bool)}}, [n])
    >>> t.inv(chunk([1.0, 1.0])) is None  # held back: nothing to look ahead to yet
    True
    >>> t.inv(chunk([1.0, 1.0, 1.0]))["next", "reward"].flatten().tolist()
    [1.5, 1.5, 1.5]
"""

from __future__ import annotations

import torch

from reap.envs.transforms.transform import Transform
from reap.postprocs import DONE_KEYS, MultiStep

ENV_ERR = "The MultiStepTransform is only an inverse transform and can be applied exclusively to replay buffers."


class MultiStepTransform(Transform):
    """n-step returns of the data given to ``inv`` (a replay buffer's ``extend``), as TorchRL's.

    Each call returns the steps it can complete: the previous call's last ``n_steps`` steps and
    this call's but its own last ``n_steps`` (None while fewer have come). The entries written are
    ``MultiStep``'s: the discounted reward sum (original under ``("next", "original_reward")``),
    the ``"next"`` entries of the step ``n_steps - 1`` later, ``steps_to_next_obs``, ``gamma`` and
    ``nonterminal``.

    Args:
        n_steps: the look-ahead (a positive int; may be changed between calls).
        gamma: the discount.
        reward_keys, done_key, done_keys, mask_key: the keys read (TorchRL's defaults
            ``["reward"]``, ``"done"``, ``["done", "truncated", "terminated"]``, ``"mask"``).
    """

    def __init__(self, n_steps, gamma, *, reward_keys=None, done_key=None, done_keys=None, mask_key=None):
        super().__init__()
        self.n_steps = n_steps
        self.gamma = gamma
        self.reward_keys = ["reward"] if reward_keys is None else reward_keys
        self.done_key = "done" if done_key is None else done_key
        self.done_keys = list(DONE_KEYS) if done_keys is None else done_keys
        self.mask_key = "mask" if mask_key is None else mask_key
        self._buffer = None

    @property
    def n_steps(self) -> int:
        """The look-ahead; it may be changed during training."""
        return self._n_steps

    @n_steps.setter
    def n_steps(self, value) -> None:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"The value of n_steps must be a strictly positive integer, got {value!r}.")
        self._n_steps = value

    def _inv_call(self, tensordict):
        if self.parent is not None:
            raise ValueError(ENV_ERR)
        whole = tensordict if self._buffer is None else torch.cat([self._buffer, tensordict], -1)
        self._buffer = whole[..., -self.n_steps:].copy()
        if whole.shape[-1] <= self.n_steps:
            return None
        step = MultiStep(gamma=self.gamma, n_steps=self.n_steps)
        step.done_key, step.done_keys = self.done_key, tuple(self.done_keys)
        step.reward_keys, step.mask_key = tuple(self.reward_keys), self.mask_key
        return step(whole)[..., : -self.n_steps]

    def _attach(self, env):
        raise ValueError(ENV_ERR)
