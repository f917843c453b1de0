"""The env transforms a policy needs, appended by the collector on request (TorchRL's
``auto_register_policy_transforms``).

A recurrent module (reap-rnn-kernels' ``LSTMModule``/``GRUModule``, or any module with a
``make_tensordict_primer()``) reads ``"is_init"`` and its recurrent states from the env: an
``InitTracker`` and the module's ``TensorDictPrimer``. With ``auto_register_policy_transforms=True``
a collector appends those the env lacks, and, as TorchRL, an ``InitTracker`` for any module
policy; left unset, it warns (``FutureWarning``, as TorchRL, whose default becomes True in 0.15)
for what a recurrent module needs (TorchRL for any module policy) and the env is used as it is;
``False`` says nothing. An env built with ``policy=`` gets them as with True.

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


def missing_policy_transforms(env: EnvBase, policy, *, init_key: str = "is_init", any_module: bool = False) -> list:
    """The transforms ``policy`` needs that ``env`` lacks: an ``InitTracker`` if a recurrent module
    reads ``init_key`` (with ``any_module``, TorchRL's rule: for any ``nn.Module`` policy) and no
    such entry is observed, and each recurrent module's primer whose states the env does not
    produce (with ``any_module``, a primer that cannot be built is left out with a warning)."""
    from reap.envs.transforms import Compose, InitTracker

    if not isinstance(policy, torch.nn.Module):
        return []
    modules = _recurrent_modules(policy)
    if not modules and not any_module:
        return []
    produced = set(env.full_observation_spec.keys(True, True)) | set(env.full_state_spec.keys(True, True))
    missing = []
    wants_init = any_module or any(init_key in getattr(m, "in_keys", ()) for m in modules)
    if wants_init and not any(key == init_key or (isinstance(key, tuple) and key[-1] == init_key)
                              for key in produced):
        missing.append(InitTracker(init_key=init_key))
    primer = get_primers_from_module(policy, warn=False, strict=not any_module)
    for transform in list(primer) if isinstance(primer, Compose) else [primer] if primer is not None else []:
        keys = set(transform.primers.keys(True, True))
        if not keys <= produced:
            missing.append(transform)
            produced |= keys
    return missing


def with_policy_transforms(env: EnvBase, policy, register: bool | None, owner: str) -> EnvBase:
    """``env`` with the transforms ``policy`` needs appended when ``register`` is True; with None
    (unset) a ``FutureWarning`` names them and the env is returned as it is."""
    if register is not None and not isinstance(register, bool):
        raise TypeError(f"{owner}: auto_register_policy_transforms must be True, False or None, got {register!r}")
    if register is False:
        return env
    # True: TorchRL's rule (an InitTracker for any module policy); unset: warn only for what a
    # recurrent module needs (TorchRL warns for every module policy lacking an InitTracker)
    missing = missing_policy_transforms(env, policy, any_module=register is True)
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


def get_primers_from_module(module, warn: bool = True, strict: bool = True):
    """The ``TensorDictPrimer`` of every submodule of ``module`` that makes one, as TorchRL's:
    ``None`` when there is none (with a warning unless ``warn=False``), the primer itself when
    there is one, else a ``Compose`` of them. With ``strict=False`` a submodule whose
    ``make_tensordict_primer()`` raises is left out with a warning naming it.

    Examples:
        >>> from reap import GRUModule
        >>> gru = GRUModule(input_size=4, hidden_size=8, in_key="observation", out_key="features")
        >>> type(get_primers_from_module(gru)).__name__
        'TensorDictPrimer'
    """
    from reap.envs.transforms import Compose

    primers, failed = [], []
    for sub in module.modules() if isinstance(module, torch.nn.Module) else ():
        make = getattr(sub, "make_tensordict_primer", None)
        if not callable(make):
            continue
        try:
            primers.append(make())
        except Exception as exc:
            if strict:
                raise
            failed.append(f"{type(sub).__name__}: {exc}")
    if failed:
        warnings.warn("get_primers_from_module: left out the submodules whose primer could not be built ("
                      + "; ".join(sorted(set(failed))) + "); add their primers to the env yourself", stacklevel=2)
    if not primers:
        if warn:
            warnings.warn("get_primers_from_module: no primers found in the module", stacklevel=2)
        return None
    return primers[0] if len(primers) == 1 else Compose(*primers)


def get_env_transforms_from_module(module, init_key: str = "is_init"):
    """What a recurrent ``module`` needs on its env, as TorchRL's: ``Compose(InitTracker,
    primer)``, or the ``InitTracker`` alone when no submodule makes a primer.

    Examples:
        >>> from reap import GRUModule
        >>> gru = GRUModule(input_size=4, hidden_size=8, in_key="observation", out_key="features")
        >>> [type(t).__name__ for t in get_env_transforms_from_module(gru)]
        ['InitTracker', 'TensorDictPrimer']
    """
    from reap.envs.transforms import Compose, InitTracker

    primer = get_primers_from_module(module, warn=False)
    tracker = InitTracker(init_key=init_key)
    return tracker if primer is None else Compose(tracker, primer)


def env_with_policy_transforms(env: EnvBase, policy, init_key: str = "is_init") -> EnvBase:
    """``env`` with what ``policy`` needs and ``env`` lacks appended, as TorchRL's
    ``EnvBase(..., policy=policy)``: :func:`missing_policy_transforms` with TorchRL's rule (an
    ``InitTracker`` for any ``nn.Module`` policy). A policy that is not a module (a factory, a
    function) adds nothing."""
    for transform in missing_policy_transforms(env, policy, init_key=init_key, any_module=True):
        env = env.append_transform(transform)
    return env


__all__ = ["env_with_policy_transforms", "get_env_transforms_from_module", "get_primers_from_module",
           "missing_policy_transforms", "with_policy_transforms"]
