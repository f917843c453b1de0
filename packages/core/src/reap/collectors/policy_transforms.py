"""The env transforms a policy needs, appended by the collector on request (TorchRL's
``auto_register_policy_transforms``).

A recurrent module (reap-rnn-kernels' ``LSTMModule``/``GRUModule``, or any module with a
``make_tensordict_primer()``) reads ``"is_init"`` and its recurrent states from the env: an
``InitTracker`` and the module's ``TensorDictPrimer``. With ``auto_register_policy_transforms=True``
a collector appends those the env lacks; left unset, it warns (``FutureWarning``, as TorchRL,
whose default becomes True in 0.15) and the env is used as it is; ``False`` says nothing.

Examples:
    >>> from reap import GymEnv
    >>> from reap import GRUModule
    >>> gru = GRUModule(input_size=4, hidden_size=8, in_keys=["observation", "recurrent_state", "is_init"],
    ...                 out_keys=["features", ("next", "recurrent_state")])
    >>> [type(t).__name__ for t in missing_policy_transforms(GymEnv("CartPole-v1"), gru)]
    ['InitTracker', 'TensorDictPrimer']
"""

from __future__ import annotations

import warnings

import torch

from reap.envs.base import EnvBase


def _recurrent_modules(policy) -> list:
    if not isinstance(policy, torch.nn.Module):
        return []
    return [m for m in policy.modules() if callable(getattr(m, "make_tensordict_primer", None))]


def missing_policy_transforms(env: EnvBase, policy) -> list:
    """The transforms ``policy``'s recurrent modules need that ``env`` lacks: an ``InitTracker``
    if one reads ``"is_init"`` and the env has none, and each module's primer whose states the
    env does not produce."""
    from reap.envs.transforms import InitTracker

    modules = _recurrent_modules(policy)
    if not modules:
        return []
    produced = set(env.full_observation_spec.keys(True, True)) | set(env.full_state_spec.keys(True, True))
    missing = []
    if "is_init" not in produced and any("is_init" in getattr(m, "in_keys", ()) for m in modules):
        missing.append(InitTracker())
    for module in modules:
        primer = module.make_tensordict_primer()
        if any(key not in produced for key in primer.primers.keys(True, True)):
            missing.append(primer)
            produced |= set(primer.primers.keys(True, True))
    return missing


def with_policy_transforms(env: EnvBase, policy, register: bool | None, owner: str) -> EnvBase:
    """``env`` with the transforms ``policy`` needs appended when ``register`` is True; with None
    (unset) a ``FutureWarning`` names them and the env is returned as it is."""
    if register is not None and not isinstance(register, bool):
        raise TypeError(f"{owner}: auto_register_policy_transforms must be True, False or None, got {register!r}")
    if register is False:
        return env
    missing = missing_policy_transforms(env, policy)
    if not missing:
        return env
    if register is None:
        names = ", ".join(type(t).__name__ for t in missing)
        warnings.warn(
            f"{owner}: the env lacks transforms the policy needs ({names}); pass "
            "auto_register_policy_transforms=True to have them appended (TorchRL's default from 0.15), or "
            "False to silence this", FutureWarning, stacklevel=3)
        return env
    for transform in missing:
        env = env.append_transform(transform)
    return env


__all__ = ["missing_policy_transforms", "with_policy_transforms"]
