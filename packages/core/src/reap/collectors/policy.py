"""Run a policy on the collector's step arrays without building a TensorDict per step.

``PolicyRunner.bind(root, t)`` is called once per batch layout; then ``runner(t)`` reads the
policy's inputs at step ``t`` and writes its outputs (the action and whatever else it returns)
into the root arrays at ``t``. Three paths, chosen once:

* a plain ``TensorDictModule`` (or an ``nn.Module``/callable taking tensors) runs its inner
  module on tensor views of the arrays: the fast path;
* any other ``TensorDictModuleBase`` (``TensorDictSequential``, probabilistic actors) runs on
  one carrier TensorDict reused from step to step;
* ``None`` draws actions from the action spec.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase

from reap.envs.base import EnvBase, is_hidden
from reap.specs import OneHot


def _is_tensordict_callable(fn) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    names = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return len(names) >= 1 and names[0] in ("tensordict", "td", "tensordict_in", "data")


class PolicyRunner:
    """Adapts ``policy`` to the array protocol of ``env`` (see the module docstring)."""

    def __init__(self, policy, env: EnvBase, *, policy_device=None, generator=None):
        self.env = env
        self.policy = policy
        self.action_key = env.action_key
        self.device = torch.device(policy_device) if policy_device is not None else None
        self.generator = generator
        if hasattr(policy, "set_action_spec_from_env"):  # RandomPolicy() takes the env's, as in TorchRL
            policy.set_action_spec_from_env(env)
        root_keys = {k for k in env.root_specs() if not is_hidden(k)}
        if policy is None:
            self.mode = "random"
            self.in_keys, self.out_keys = [], [self.action_key]
        elif type(policy) is TensorDictModule or (
            isinstance(policy, TensorDictModule)
            and type(policy).forward is TensorDictModule.forward
        ):
            self.mode = "module"
            self.fn = policy.module
            self.in_keys = list(policy.in_keys)
            self.out_keys = list(policy.out_keys)
        elif isinstance(policy, TensorDictModuleBase) or (
            callable(policy)
            and not isinstance(policy, torch.nn.Module)
            and _is_tensordict_callable(policy)
        ):
            self.mode = "carrier"
            self.fn = policy
            reads = list(getattr(policy, "in_keys", env.state_keys))
            self.in_keys = [k for k in reads if k in root_keys]
            self.out_keys = list(getattr(policy, "out_keys", [self.action_key]))
        elif callable(policy):
            self.mode = "module"
            self.fn = policy
            self.in_keys = self._infer_in_keys(policy, env)
            self.out_keys = [self.action_key]
            self._name_outputs = True  # a tuple's other outputs become "output1", ... (TorchRL's)
        else:
            raise TypeError(
                f"policy must be a TensorDictModule, an nn.Module, a callable or None, "
                f"got {type(policy).__name__}"
            )
        # an input the env does not produce but the policy writes itself (e.g. a recurrent state
        # without a TensorDictPrimer) gets None at every step, as TorchRL's collectors pass it
        written = {k[1] if isinstance(k, tuple) and len(k) == 2 and k[0] == "next" else k for k in self.out_keys}
        self.absent = [k for k in (reads if self.mode == "carrier" else self.in_keys)
                       if k not in root_keys and k in written]
        if self.mode == "module":
            self._check_absent_have_defaults()
        missing = [k for k in self.in_keys if k not in root_keys and k not in written]
        if missing:
            raise KeyError(
                f"policy reads {missing}, which the env does not produce; the env's keys are "
                f"{sorted(root_keys)}"
            )

    def _check_absent_have_defaults(self) -> None:
        """An absent input is passed as None: its argument must take it (TorchRL's module refuses
        a None for an argument without a default, with a KeyError)."""
        fn = self.fn.forward if isinstance(self.fn, torch.nn.Module) else self.fn
        try:
            params = [p for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            return
        for key, param in zip(self.in_keys, params):
            if key in self.absent and param.default is param.empty:
                raise KeyError(
                    f"policy reads {key!r}, which the env does not produce (it is passed None at every step, as in TorchRL), "
                    f"but {type(self.fn).__name__}.forward's argument {param.name!r} has no default: give it one "
                    f"({param.name}=None) or add a TensorDictPrimer of {key!r} to the env")

    @staticmethod
    def _infer_in_keys(policy: Callable, env: EnvBase) -> list[str]:
        fn = policy.forward if isinstance(policy, torch.nn.Module) else policy
        obs_keys = list(env.observation_spec.keys())
        try:
            positional = [p for p in inspect.signature(fn).parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            positional = []
        params = [p.name for p in positional]
        required = [p.name for p in positional if p.default is p.empty]
        if params and all(p in env.root_specs() for p in params):
            return params
        if required and all(p in env.root_specs() for p in required):
            return required
        if len(required) > 1:
            raise TypeError(
                f"policy: Arguments to policy.forward are incompatible with entries in the env's observations "
                f"(TorchRL's words): {type(policy).__name__}.forward requires {required}, the observations are "
                f"{obs_keys}; name its arguments after them or wrap it in a TensorDictModule with in_keys")
        if len(obs_keys) == 1:
            return obs_keys
        if len(params) == 1 and "observation" in obs_keys:
            # a transform's own entries (RewardSum's episode_reward, StepCounter's step_count) sit in
            # the observation spec beside the env's single observation: that one is the input
            return ["observation"]
        raise ValueError(
            f"policy: cannot tell which of the observations {obs_keys} to pass to "
            f"{type(policy).__name__}; name its forward arguments after them or wrap it in a "
            "TensorDictModule with in_keys"
        )

    def probe(self, root_td: TensorDict) -> dict[str, torch.Tensor]:
        """Run the policy once on ``root_td`` (a root at one step); returns its outputs by key."""
        if self.mode == "random":
            return {self.action_key: action_leaf_spec(self.env).rand(generator=self.generator)}
        if self.mode == "carrier":
            td = root_td.clone()
            if self.device is not None:
                td = td.to(self.device)
            out = self.fn(td)
            if not isinstance(out, TensorDictBase):
                raise TypeError(f"policy returned {type(out).__name__}, expected a TensorDict")
            keys = [k for k in out.keys(include_nested=True, leaves_only=True) if k not in root_td.keys(True)]
            outputs = {k: out.get(k) for k in dict.fromkeys([*self.out_keys, *keys]) if k in out.keys(True)}
        else:
            args = [None if k in self.absent else self._to_device(root_td.get(k)) for k in self.in_keys]
            result = self.fn(*args)
            result = result if isinstance(result, tuple) else (result,)
            if getattr(self, "_name_outputs", False):
                self.out_keys = [self.action_key, *(f"output{i}" for i in range(1, len(result)))]
            if len(result) != len(self.out_keys):
                raise ValueError(
                    f"policy returned {len(result)} outputs but its out_keys are {self.out_keys}"
                )
            outputs = dict(zip(self.out_keys, result))
        if self.action_key not in outputs:
            raise KeyError(
                f"policy does not write the action key {self.action_key!r} (it writes "
                f"{sorted(map(str, outputs))}); set its out_keys to include {self.action_key!r}"
            )
        return {k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in outputs.items()}

    def _to_device(self, tensor):
        return tensor if self.device is None or tensor is None else tensor.to(self.device, non_blocking=True)

    def bind(self, root: dict, root_torch: dict, out_keys: list) -> None:
        """Point the runner at the arrays of one batch layout and pick the step function.

        Tensor views of every input at every step are built here, once, because indexing a
        tensor costs about as much as a cheap env step.
        """
        if self.mode == "module":  # the module returns its outputs in out_keys' order
            out_keys = [k for k in self.out_keys if k in out_keys]
        self._writes = [(root[k], k) for k in out_keys]
        self._action = root[self.action_key]
        rows = range(len(self._action))
        inputs = [None if k in self.absent else root_torch[k] for k in self.in_keys]
        self._views = [tuple(None if x is None else x[t] for x in inputs) for t in rows]
        if self.mode == "carrier":
            self._carrier = TensorDict(batch_size=self.env.batch_size, device=self.device)
            self._step = self._carrier_step
        elif self.mode == "random":
            self._step = self.random_action
        else:
            fn = self.fn
            if isinstance(fn, torch.nn.Module) and not _has_hooks(fn):
                fn = fn.forward  # same result, without nn.Module's hook dispatch
            self._fn_fast = fn
            single = len(self.in_keys) == 1 and len(out_keys) == 1 and self.device is None
            self._step = self._single_step if single else self._module_step
            if single:
                self._single_views = [v[0] for v in self._views]

    def __call__(self, t: int) -> None:
        self._step(t)

    def _single_step(self, t: int) -> None:
        self._action[t] = self._fn_fast(self._single_views[t]).numpy()

    def _module_step(self, t: int) -> None:
        result = self._fn_fast(*[self._to_device(x) for x in self._views[t]])
        if type(result) is not tuple:
            result = (result,)
        for (array, _), value in zip(self._writes, result):
            array[t] = value.numpy(force=True)

    def _carrier_step(self, t: int) -> None:
        carrier = self._carrier
        for key, x in zip(self.in_keys, self._views[t]):
            carrier.set(key, self._to_device(x))
        for key in self.absent:  # the policy's output of the step before is not its input
            carrier.pop(key, None)
        out = self.fn(carrier)
        for array, key in self._writes:
            array[t] = out.get(key).numpy(force=True)

    def random_action(self, t: int) -> None:
        """Write a random action at ``t`` (used for ``init_random_frames``)."""
        # reshaped: the action array may be laid out as the policy's action (see check_action)
        self._action[t] = action_leaf_spec(self.env).rand(generator=self.generator).numpy().reshape(self._action.shape[1:])


def _has_hooks(module: torch.nn.Module) -> bool:
    from torch.nn.modules import module as nn_module

    global_hooks = (nn_module._global_forward_hooks, nn_module._global_forward_pre_hooks)
    own = (module._forward_hooks, module._forward_pre_hooks)
    return any(len(h) for h in (*global_hooks, *own))


def _strip_ones(shape) -> tuple:
    shape = tuple(shape)
    while shape and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def check_action(action: torch.Tensor, env: EnvBase) -> None:
    """Fail with a clear message when a policy's action does not fit the env's action spec.

    An action that lacks (or adds) trailing dims of size 1 fits, as TorchRL's envs take it: a
    policy writing ``torch.ones(batch)`` for an action spec of shape ``(*batch, 1)``. An action
    of another dtype fits while the env gets it cast exactly (:func:`check_cast_actions`): a
    float one-hot sample of ``torch.distributions.OneHotCategorical`` for an integer spec.

    Examples:
        >>> from reap import GymEnv
        >>> check_action(torch.zeros(()), GymEnv("Pendulum-v1"))  # the spec's shape is (1,)
        >>> check_action(torch.zeros(2), GymEnv("Pendulum-v1"))
        Traceback (most recent call last):
        ...
        ValueError: policy: the action has shape (2,) but the env's action_spec expects (1,) (batch ()); make the policy output one action per env
        >>> check_action(torch.tensor([0.0, 1.0]), GymEnv("CartPole-v1"))  # a float one-hot: cast exactly
    """
    spec = action_leaf_spec(env)
    if tuple(action.shape) != tuple(spec.shape) and _strip_ones(action.shape) != _strip_ones(spec.shape):
        raise ValueError(
            f"policy: the action has shape {tuple(action.shape)} but the env's action_spec expects "
            f"{tuple(spec.shape)} (batch {tuple(env.batch_size)}); make the policy output one "
            "action per env"
        )
    if needs_cast(action.dtype, spec):
        check_cast_actions(action.numpy(force=True), spec)


def action_leaf_spec(env):
    """The spec of the env's one action (``env.action_spec`` is a ``Composite`` when the action is
    not named ``"action"``: ActionDiscretizer's ``out_action_key``, say)."""
    return env.full_action_spec[env.action_key]


def needs_cast(action_dtype: torch.dtype, spec) -> bool:
    """Whether a policy's ``action_dtype`` is cast for the env (to the spec's dtype) in a way
    that can change a value: anything but equal dtypes or float to float."""
    return action_dtype != spec.dtype and not (action_dtype.is_floating_point and spec.dtype.is_floating_point)


def check_cast_actions(actions: np.ndarray, spec) -> None:
    """Fail when ``actions`` (a policy's, of another dtype than ``spec``'s) would change when
    cast to the spec's dtype for the env: a float that is not a whole number, a value out of
    the dtype's range (TorchRL passes such actions to the env as they are).

    Examples:
        >>> from reap.data import Binary, Categorical
        >>> check_cast_actions(np.array([2.0, 0.0]), Categorical(3))
        >>> check_cast_actions(np.array([0.6, 0.4]), Categorical(3))
        Traceback (most recent call last):
        ...
        TypeError: policy: the action is float64 but the env expects torch.int64 (Categorical), and 0.6 is not a whole number; return an integer action (e.g. logits.argmax(-1))
        >>> check_cast_actions(np.array([1, 160], dtype=np.int32), Binary(2, dtype=torch.int8))
        Traceback (most recent call last):
        ...
        TypeError: policy: the action is int32 but the env expects torch.int8 (Binary), and 160 does not fit it; return actions the spec holds (spec.is_in)
    """
    with np.errstate(invalid="ignore", over="ignore"):
        target = torch.empty(0, dtype=spec.dtype).numpy().dtype
        changed = actions.astype(target).astype(actions.dtype) != actions
    if changed.any():
        bad = actions.flat[int(np.flatnonzero(changed)[0])].item()
        whole = not isinstance(bad, float) or bad.is_integer()
        if whole:
            fix = "does not fit it; return actions the spec holds (spec.is_in)"
        else:
            example = "one_hot(logits.argmax(-1), n)" if isinstance(spec, OneHot) else "logits.argmax(-1)"
            fix = f"is not a whole number; return an integer action (e.g. {example})"
        raise TypeError(f"policy: the action is {actions.dtype} but the env expects {spec.dtype} "
                        f"({type(spec).__name__}), and {bad:g} {fix}")


__all__ = ["PolicyRunner", "check_action", "check_cast_actions", "needs_cast"]
