"""``FiniteTensorDictCheck``: raise when a step or reset writes a NaN or an infinity (TorchRL's).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs.transforms import FiniteTensorDictCheck
    >>> FiniteTensorDictCheck()(TensorDict(x=torch.tensor([1.0, float("nan")])))
    Traceback (most recent call last):
    ...
    ValueError: Encountered a non-finite tensor.
"""

from __future__ import annotations

import numpy as np

from reap.envs.base import is_hidden
from reap.envs.transforms.transform import Transform

NON_FINITE = "Encountered a non-finite tensor."


def check_finite(tensor) -> None:
    """Raise a ValueError when ``tensor`` (floating point) holds a NaN or an infinity."""
    if tensor.is_floating_point() and not tensor.isfinite().all():
        raise ValueError(NON_FINITE)


class FiniteTensorDictCheck(Transform):
    """Check every floating-point entry that a step (in ``"next"``) or a reset writes; a NaN or an
    infinity raises ``ValueError("Encountered a non-finite tensor.")``. ``t(td)`` checks ``td``."""

    _array_hooks = True

    def __init__(self):
        super().__init__(in_keys=[])

    def _call(self, next_tensordict):
        for value in next_tensordict.values(True, True):
            check_finite(value)
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def forward(self, tensordict):
        return self._call(tensordict)

    # ---- arrays --------------------------------------------------------------------------------
    def _attach(self, env):
        def floats(specs):
            return [key for key, spec in specs.items()
                    if not is_hidden(key) and getattr(getattr(spec, "dtype", None), "is_floating_point", False)]
        actions = set(env.action_keys)
        self._reset_keys = [key for key in floats(env.root_specs()) if key not in actions]
        self._step_keys = floats(env.next_specs())

    @staticmethod
    def _check(arrays, keys, t):
        for key in keys:
            if not np.isfinite(arrays[key][t]).all():
                raise ValueError(NON_FINITE)

    def on_reset(self, root, t, mask):
        self._check(root, self._reset_keys, t)

    def on_step(self, root, nxt, t):
        self._check(nxt, self._step_keys, t)
