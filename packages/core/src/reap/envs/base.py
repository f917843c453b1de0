"""``EnvBase``: the environment protocol collectors drive.

An environment exposes TorchRL's specs (:mod:`reap.envs.env_specs`) and two ways to be stepped:

* the TorchRL-style TensorDict API (``reset``, ``step``, ``step_and_maybe_reset``,
  ``rand_action``, ``rollout``). A custom env written the TorchRL way overrides ``_reset`` and
  ``_step``, and these methods run them as TorchRL's ``EnvBase`` does (done flags completed,
  partial resets merged, nested keys, several actions or rewards);
* the array API the collectors use on the hot path: ``_reset_into(root, t, mask)`` and
  ``_step_into(action, t, root, nxt)`` write one step into preallocated, time-major arrays
  (``root[key][t]``, ``nxt[key][t]``), so a step allocates no tensor and builds no TensorDict.
  Envs that implement it (``GymEnv``, ``SerialEnv``, ``TransformedEnv``) serve the TensorDict
  API through it; for a TorchRL-style env it wraps ``_reset`` and ``_step``.

The array keys are the leaf keys of the specs (a tuple for a nested one): the observations and
the actions on the root side; the observations, rewards and done flags on the next side.
``state_keys`` are copied from ``nxt[t]`` to ``root[t + 1]`` between steps.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs import EnvBase
    >>> from reap.specs import Bounded, Composite, Unbounded
    >>> class Counter(EnvBase):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.observation_spec = Composite(observation=Unbounded(shape=(1,)))
    ...         self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
    ...     def _reset(self, td):
    ...         self.count = torch.zeros(1)
    ...         return TensorDict(observation=self.count.clone())
    ...     def _step(self, td):
    ...         self.count += td["action"]
    ...         return TensorDict(observation=self.count.clone(), reward=torch.ones(1),
    ...                           done=torch.zeros(1, dtype=torch.bool))
    ...     def _set_seed(self, seed):
    ...         torch.manual_seed(seed)
    >>> env = Counter()
    >>> env.rollout(5)["next", "reward"].shape
    torch.Size([5, 1])
    >>> env.done_keys
    ['done', 'terminated']
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection
from tensordict.nn import TensorDictModule, TensorDictModuleBase
from tensordict.utils import is_non_tensor

from reap.envs.done import any_done, complete_done, replace_last, update_during_reset
from reap.envs.env_specs import FLAG_KEYS, EnvSpecs
from reap.envs.seeding import seed_generator
from reap.specs import Composite, TensorSpec, Unbounded
from reap.specs.base import _ordinal
from reap.specs.non_tensor import spec_of_non_tensor

__all__ = ["FLAG_KEYS", "HIDDEN_PREFIX", "EnvBase", "checked_env", "is_hidden", "refuse_torchrl_env"]

#: Prefix of the array keys that transforms keep out of sight (an excluded or replaced entry).
HIDDEN_PREFIX = "_hidden:"


def is_hidden(key) -> bool:
    """Whether an array key is internal (kept out of TensorDicts and batches)."""
    return isinstance(key, str) and key.startswith(HIDDEN_PREFIX)


class _EnvMeta(type):
    """Locks the specs once the env is built, as TorchRL's ``EnvBase`` (``spec_locked=False``: not);
    with ``auto_reset=True`` returns it in an ``AutoResetEnv`` (see ``transforms.auto_reset``); with
    ``policy=`` (TorchRL's keyword, on every env class) returns the env with the transforms the
    policy needs appended (``InitTracker``, recurrent primers: see
    :func:`reap.collectors.policy_transforms.env_with_policy_transforms`)."""

    def __call__(cls, *args, **kwargs):
        spec_locked = kwargs.pop("spec_locked", True)
        # an env class that refuses auto_reset itself (GymEnv) gets the keyword in its __init__
        auto_reset = False if cls._refuses_auto_reset else kwargs.pop("auto_reset", False)
        auto_reset_replace = kwargs.pop("auto_reset_replace", True)
        policy = kwargs.pop("policy", None)
        env = super().__call__(*args, **kwargs)
        if isinstance(env, EnvBase) and not env.__dict__.get("_specs_initialized"):
            raise RuntimeError(f"{type(env).__name__}.__init__ must call super().__init__(batch_size=..., "
                               "device=...) (EnvBase's)")
        if isinstance(env, EnvBase) and not env.batch_locked and not env._torchrl_style:
            raise ValueError(f"{type(env).__name__}: only an env written the TorchRL way (_reset/_step) can be "
                             "batch-unlocked; one of reap's array API steps exactly its batch_size")
        env._complete_done_specs()
        env._check_key_collisions()
        env.set_spec_lock_(bool(spec_locked))
        if auto_reset:  # TorchRL's: an env whose own steps reset it
            from reap.envs.transforms.auto_reset import AutoResetEnv, AutoResetTransform

            env = AutoResetEnv(env, AutoResetTransform(replace=auto_reset_replace))
        if policy is not None:
            from reap.collectors.policy_transforms import env_with_policy_transforms

            env = env_with_policy_transforms(env, policy)
        return env


def requires_grad(tensordict: TensorDictBase) -> bool:
    """Whether grad mode is on and a tensor of ``tensordict`` requires grad."""
    return torch.is_grad_enabled() and any(
        v.requires_grad for v in tensordict.values(True, True) if isinstance(v, torch.Tensor))


class EnvBase(EnvSpecs, metaclass=_EnvMeta):
    """Base class of reap environments (see the module docstring for the protocol).

    Not an ``nn.Module`` (TorchRL's is): an attribute write on a module costs about a
    microsecond, and envs write some on every step; ``register_buffer`` is here for the envs
    that keep tensors so.
    """

    _resets_itself = False  # an AutoResetEnv: its done envs' next reset gives what its step kept
    _refuses_auto_reset = False  # auto_reset=True goes to __init__, which refuses it with the reason

    def __new__(cls, *args, _batch_locked: bool = True, _inplace_update: bool = False, **kwargs):
        # TorchRL's signature, so that a subclass's ``__new__`` may pass its arguments on
        env = super().__new__(cls)
        if not _batch_locked:  # TorchRL's stateless envs: any batch of inputs (checked at __init__'s end)
            env.__dict__["_batch_locked"] = False
        for side in ("_input_spec", "_output_spec"):  # specs a subclass set on the class, as TorchRL takes them
            if isinstance(cls.__dict__.get(side), Composite):
                env.__dict__[side] = getattr(cls, side).clone()
                delattr(cls, side)
        return env

    def __init__(self, *, device=None, batch_size=None, run_type_checks: bool = False,
                 allow_done_after_reset: bool = False, spec_locked: bool = True, auto_reset: bool = False):
        # spec_locked: read at construction (see _EnvMeta), as TorchRL does
        if auto_reset:
            raise ValueError(f"{type(self).__name__}: auto_reset=True is read when the env is built "
                             f"({type(self).__name__}(..., auto_reset=True)), not by EnvBase.__init__")
        self.__dict__["_allow_done_after_reset"] = allow_done_after_reset
        self.__dict__["_run_type_checks"] = bool(run_type_checks)
        self.__dict__["_batch_size"] = torch.Size(() if batch_size is None else batch_size)
        self.__dict__["_device"] = _ordinal(device)
        self._init_specs(self.batch_size, device)
        self.is_closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    @property
    def device(self) -> torch.device:
        return self.__dict__.get("_device")

    @device.setter
    def device(self, value) -> None:
        if self.__dict__.get("_device") is not None:
            raise RuntimeError("device cannot be set. Call env.to(device) instead.")
        self.__dict__["_device"] = _ordinal(value)

    @property
    def run_type_checks(self) -> bool:
        """Whether each step's output is checked against the specs' dtypes (TorchRL's): an
        observation, reward or done flag of another dtype than its spec's raises a TypeError."""
        return self.__dict__.get("_run_type_checks", False)

    @run_type_checks.setter
    def run_type_checks(self, value: bool) -> None:
        self.__dict__["_run_type_checks"] = bool(value)

    def _type_check(self, out: TensorDictBase) -> None:
        """TorchRL's ``run_type_checks``: every observation's, reward's and done flag's dtype (a
        flag the step left out is completed later, in its spec's dtype)."""
        for key, spec in self.observation_spec.items():
            spec.type_check(out.get(key))
        for keys, group, what in ((self.reward_keys, self.full_reward_spec, "reward"),
                                  (self.done_keys, self.full_done_spec, "done")):
            for key in keys:
                value, expected = out.get(key, None), group[key].dtype
                if value is not None and value.dtype is not expected:
                    raise TypeError(f"expected {what}.dtype to be {expected} but got {value.dtype} (at {key!r})")

    def to(self, device):
        """``self`` on the CPU; reap envs step on the CPU (move batches with ``storing_device``)."""
        if _ordinal(device) != torch.device("cpu"):
            raise ValueError(f"{type(self).__name__}.to({device!r}): reap envs step on the CPU; move the data "
                             "instead (a collector's storing_device, or td.to(device))")
        return self

    def register_buffer(self, name: str, tensor: torch.Tensor | None, persistent: bool = True) -> None:
        """Keep ``tensor`` as attribute ``name`` (in ``state_dict`` when ``persistent``), as a module's buffer."""
        setattr(self, name, tensor)
        buffers = self.__dict__.setdefault("_reap_buffers", {})
        buffers[name] = persistent

    # ---- the array layout ------------------------------------------------------------------
    def root_specs(self) -> dict:
        """Leaf specs of the root-side arrays (observations, done flags, actions), by leaf key."""
        specs = _leaves(self.observation_spec)
        specs.update(self._state_only())
        specs.update(self._array_flags())
        specs.update(_leaves(self.full_action_spec))
        return specs

    def next_specs(self) -> dict:
        """Leaf specs of the next-side arrays (observations, rewards, done flags), by leaf key."""
        specs = _leaves(self.observation_spec)
        specs.update(self._state_only())
        specs.update(_leaves(self.full_reward_spec))
        specs.update(self._array_flags())
        return specs

    def _state_only(self) -> dict:
        """Leaf specs of the ``state_spec`` entries that are not observations, rewards or done
        flags (inputs the env reads, a seed or parameters, say): as TorchRL's ``step_mdp`` keeps
        them, each step's root holds the previous root's value (``reset`` and the policy set them)."""
        def compute():
            observed = {*_leaves(self.observation_spec), *self.done_keys, *self.reward_keys}
            return {k: v for k, v in _leaves(self.full_state_spec).items() if k not in observed}
        return self._cached("_state_only", compute)

    def _nested_shapes(self) -> dict:
        """The shape of each nested Composite of the observation, reward, done and action specs."""
        shapes = {}
        for spec in (self.observation_spec, self.full_reward_spec, self.full_done_spec, self.full_action_spec):
            shapes.update({key: sub.shape for key, sub in spec.items(True) if isinstance(sub, Composite)})
        return shapes

    def _array_flags(self) -> dict:
        """The done flags, with a top-level ``"truncated"`` beside ``"done"``: the collectors' batches
        carry it (set where they cut a trajectory) even when the env has none."""
        flags = _leaves(self.done_spec)
        if "done" in flags and "truncated" not in flags:
            flags["truncated"] = flags["done"].clone()
        return flags

    @property
    def state_keys(self) -> tuple:
        """Keys carried from ``next`` at step t to the root of step t + 1 (reap's array API; TorchRL's
        ``state_keys`` are the keys of ``state_spec``)."""
        return self._cached("_carried", lambda: (*_leaves(self.observation_spec), *self._state_only()))

    @property
    def passthrough_keys(self) -> tuple:
        """Carried keys whose ``"next"`` value is the root's, unless the policy (or the env) writes it."""
        return tuple(self._state_only())

    @property
    def allow_done_after_reset(self) -> bool:
        """Whether ``reset()`` may return done envs (else a RuntimeError); TorchRL's keyword."""
        return self._allow_done_after_reset

    @allow_done_after_reset.setter
    def allow_done_after_reset(self, value: bool) -> None:
        self._allow_done_after_reset = value

    def _primed_action_keys(self) -> tuple:
        """Action keys a reset sets (a ``TensorDictPrimer`` of an action key): reset() shows them."""
        return ()

    @property
    def _skips_steps(self) -> bool:
        """Whether a transform of the env (a ``ConditionalSkip``) may skip its steps: such an env
        steps on TensorDicts only (batched envs and collectors drive it so)."""
        return False

    @property
    def _has_dynamic_specs(self) -> bool:
        """Whether a spec of the env has a dim of unknown size (-1): its entries change shape, so
        its rollouts are lazy stacks (TorchRL's name)."""
        return any(-1 in spec.shape for spec in (self.output_spec, self.input_spec)
                   for _, spec in spec.items(True, True))

    @property
    def _torchrl_style(self) -> bool:
        """An env written the TorchRL way (``_reset``/``_step``, no array API)."""
        return type(self)._step_into is EnvBase._step_into

    # ---- array API (hot path) -------------------------------------------------------------
    def _reset_into(self, root: dict, t: int, mask: np.ndarray | None) -> None:
        """Reset the envs selected by ``mask`` (all when None), writing ``root[key][t]``."""
        td = None
        if mask is not None and self.batch_size:
            td = TensorDict({"_reset": torch.as_tensor(mask).reshape(*self.batch_size, 1)}, batch_size=self.batch_size,
                            device=self.device)
        out = complete_done(self.full_done_spec, self._reset(td))
        for key in self._written_on_reset():
            value = out.get(key, None)
            if value is not None:
                _write(root[key], t, value, mask)

    def _written_on_reset(self) -> tuple:
        return self._cached("_on_reset", lambda: (*self.state_keys, *self.done_keys))

    def _step_into(self, action, t: int, root: dict, nxt: dict) -> None:
        """Step every env with the actions of ``root[...][t]`` and write ``nxt[key][t]``."""
        td = TensorDict(batch_size=self.batch_size, device=self.device)  # TorchRL's envs get theirs
        for key in (*self.state_keys, *self.action_keys):
            td.set(key, torch.as_tensor(root[key][t]))  # a NumPy scalar for a scalar entry
        out = self._step_proc_data(self._step(td))
        for key in self._cached("_on_step", lambda: tuple(self.next_specs())):
            value = out.get(key, None)
            nxt[key][t] = 0 if value is None else value.numpy(force=True)  # a flag the env lacks
        for key in self._state_only():  # kept from the root, as TorchRL's step_mdp keeps them
            nxt[key][t] = root[key][t]

    def _partial_step_into(self, action, t: int, root: dict, nxt: dict, mask: np.ndarray) -> None:
        """Step the envs selected by ``mask`` (batch-shaped, some False) and write ``nxt[key][t]``.

        The rows of the others are the caller's to overwrite. This default cannot leave one env
        of a batch alone: it resets the others (a finished gymnasium sub-env may not be stepped
        again before a reset) and steps the whole batch. Batched envs that can step some of
        their envs only (``SerialEnv``) override it.
        """
        self._reset_into(root, t, ~mask)
        self._step_into(action, t, root, nxt)

    # ---- TorchRL-style hooks for custom envs --------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement either _reset/_step (TensorDict API) "
                                  "or _reset_into/_step_into (array API)")

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement either _reset/_step (TensorDict API) "
                                  "or _reset_into/_step_into (array API)")

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed if seed is not None else torch.seed())

    def _seed_reset(self, seed: int | None) -> None:
        """``reset(seed=seed)`` of an array-API env: seed the reset that follows (by default
        ``set_seed(seed)``; a gymnasium env passes the seed to that reset, as TorchRL's)."""
        self.set_seed(seed)

    def _step_proc_data(self, out: TensorDictBase) -> TensorDictBase:
        """An env's step output with its rewards in the spec's shape and every done flag."""
        lead = out.batch_size[: out.batch_dims - self.batch_dims] if self.batch_dims else out.batch_size
        for key in self.reward_keys:
            shape = (*lead, *self.full_reward_spec[key].shape)
            reward = out.get(key, None)
            if reward is None:
                if self._storage("_output_spec").get("full_reward_spec") is self.__dict__.get("_default_reward_spec"):
                    # an env that declares no reward (TorchRL's has none): reap's default one, zero
                    out.set(key, self.full_reward_spec[key].zero(lead))
                    continue
                raise KeyError(f"{type(self).__name__}._step returned no {key!r}, which its reward spec declares: "
                               "write it")
            if all(s > 0 for s in shape) and reward.shape != shape:
                out.set(key, reward.view(shape))
        if self.__dict__.get("_run_type_checks"):  # before complete_done, which makes every flag a bool
            self._type_check(out)
        return complete_done(self.full_done_spec, out)

    # ---- TensorDict API ------------------------------------------------------------------
    def _assert_tensordict_shape(self, tensordict: TensorDictBase) -> None:
        # a batch-unlocked env without a batch size of its own (TorchRL's stateless envs) takes any batch
        if (self.batch_locked or self.batch_size) and tensordict.batch_size != self.batch_size:
            raise RuntimeError(f"Expected a tensordict with shape==env.batch_size, got {tensordict.batch_size} and "
                               f"{self.batch_size}")

    def allocate(self, steps: int) -> tuple[dict, dict, TensorDict, TensorDict]:
        """Arrays for ``steps`` steps: root has ``steps + 1`` rows (the last one carries over).

        Returns ``(root, nxt, root_td, next_td)``: dicts of numpy views and the TensorDicts
        (time-major, ``[steps + 1, *batch]`` and ``[steps, *batch]``) that own the memory.
        """
        root_specs, next_specs = self.root_specs(), self.next_specs()
        nested = self._nested_shapes()
        root_td = _zeros(root_specs, steps + 1, self.batch_size, nested, self.device)
        next_td = _zeros(next_specs, steps, self.batch_size, nested, self.device)
        root = {key: root_td.get(key).numpy() for key in root_specs}
        nxt = {key: next_td.get(key).numpy() for key in next_specs}
        return root, nxt, root_td, next_td

    def _arrays_only(self, key) -> bool:
        """Whether ``key`` is in the arrays but not in the TensorDict API: hidden entries, and the
        ``"truncated"`` flag where the done spec has none (the TensorDict API gives the done spec's
        flags, as TorchRL's)."""
        return is_hidden(key) or (key == "truncated" and self._cached(
            "_arrays_only_truncated", lambda: "truncated" not in self.done_spec.keys()))

    def _visible(self, td: TensorDictBase) -> TensorDictBase:
        dropped = [k for k in td.keys() if self._arrays_only(k)]
        return td.exclude(*dropped) if dropped else td

    def _stash_hidden(self, root: dict, nxt: dict | None) -> None:
        """Keep hidden state between TensorDict-API calls (they hold no hidden entries)."""
        source = root if nxt is None else nxt
        self._hidden_state = {k: source[k][0].copy() for k in self.state_keys if is_hidden(k)}

    def _restore_hidden(self, root: dict) -> None:
        for key, value in getattr(self, "_hidden_state", {}).items():
            if key in root:
                root[key][0] = value

    def reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        """Reset the envs (those whose ``_reset`` entries are True) and return the root.

        With ``tensordict``, TorchRL's rule: it is updated in place with the reset envs' data
        (all of them without ``_reset`` entries) and returned. ``select_reset_only=True`` hands
        ``_reset`` only the ``_reset`` entries; other keywords go to a TorchRL-style ``_reset``
        (an env of the array API takes ``seed=``: :meth:`_seed_reset` before the reset).
        """
        if tensordict is not None:
            self._assert_tensordict_shape(tensordict)
        select_reset_only = kwargs.pop("select_reset_only", False)
        if kwargs.pop("set_state", None):
            raise NotImplementedError(f"{type(self).__name__} does not support deterministic resets via "
                                      "set_state=True: its `_reset` cannot honor a state passed through the reset "
                                      "tensordict.")
        if not self._torchrl_style and kwargs:  # a TorchRL-style _reset takes them; the array API, a seed
            if set(kwargs) - {"seed"}:
                raise TypeError(f"{type(self).__name__}.reset got unexpected keyword arguments "
                                f"{sorted(set(kwargs) - {'seed'})}")
            self._seed_reset(kwargs.pop("seed"))
        if self._torchrl_style:
            given = tensordict.select(*self.reset_keys, strict=False) if (
                select_reset_only and tensordict is not None) else tensordict
            out = self._reset(given, **kwargs)
            if out is tensordict and out is not None:
                raise RuntimeError("EnvBase._reset should return outplace changes to the input tensordict. Consider "
                                   "emptying the TensorDict first (e.g. tensordict.empty()) inside _reset before "
                                   "writing new tensors onto this new instance.")
            if not isinstance(out, TensorDictBase):
                raise RuntimeError(f"env._reset returned an object of type {type(out)} but a TensorDict was "
                                   "expected.")
        else:
            out = self._reset_arrays(tensordict)
        complete_done(self.full_done_spec, out)
        self._reset_check_done(tensordict, out)
        return out if tensordict is None else update_during_reset(out, tensordict, self.reset_keys)

    def _reset_arrays(self, tensordict) -> TensorDictBase:
        mask = None if tensordict is None else self._reset_mask(tensordict)
        root, _, root_td, _ = self.allocate(1)
        if mask is not None:
            self._restore_hidden(root)
            for key in self.state_keys:
                value = tensordict.get(key, None)
                if value is not None:
                    root[key][0] = value.numpy(force=True)
        self._reset_into(root, 0, mask)
        self._stash_hidden(root, None)
        primed = self._primed_action_keys()  # TorchRL's reset output carries those a primer sets
        return self._visible(root_td[0].exclude(*(k for k in self.action_keys if k not in primed))).clone()

    def _reset_mask(self, tensordict: TensorDictBase):
        """The envs to reset, batch-shaped: any of each env's ``_reset`` entries (root or nested, a
        nested group's extra dims reduced) is True; None without any ``_reset`` entry (all of them)."""
        mask = None
        for key in dict.fromkeys(["_reset", *self.reset_keys]):
            flag = tensordict.get(key, None)
            if flag is None:
                continue
            flag = flag.reshape(*self.batch_size, -1).any(-1)
            mask = flag if mask is None else mask | flag
        return None if mask is None else mask.numpy(force=True)

    def _reset_check_done(self, tensordict, out) -> None:
        """TorchRL's check: a reset env may not be done (unless ``allow_done_after_reset``)."""
        for reset_key, group in zip(self.reset_keys, self.done_keys_groups):
            mask = tensordict.get(reset_key, None) if tensordict is not None else None
            for done_key in group:
                done = out.get(done_key)
                if mask is not None:
                    if done.any() and done[mask].any() and not self.allow_done_after_reset:
                        raise RuntimeError(f"Env done entry '{done_key}' was (partially) True after reset on "
                                           "specified '_reset' dimensions. This is not allowed.")
                elif not self.allow_done_after_reset and done.any():
                    raise RuntimeError(f"The done entry '{done_key}' was (partially) True after a call to reset() "
                                       f"in env {self}.")

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Step with the actions of ``tensordict``; writes and returns ``tensordict["next"]``.

        A boolean ``"_step"`` entry (batch-shaped, as in TorchRL's partial steps) marks the envs
        to step: a TorchRL-style ``_step`` receives it; an env of the array API steps those
        envs only where it can (``SerialEnv``), and the ``"next"`` entries of the others are
        zeros (all of them skipped: their root values, a zero reward).
        """
        self._assert_tensordict_shape(tensordict)
        if self._torchrl_style:
            return self._step_torchrl(tensordict)
        if self._steps_with_grad and requires_grad(tensordict):  # the step arrays would detach the graph
            return self._step_torchrl(tensordict, self._step_with_grad)
        missing = [key for key in self.action_keys if key not in tensordict.keys(True)]
        if missing:
            raise KeyError(f"step: the input has no {missing[0]!r} entry (the action)")
        root, nxt, root_td, next_td = self.allocate(1)
        self._restore_hidden(root)
        passthrough = self.passthrough_keys
        for key in self.state_keys:
            value = tensordict.get(key, None)
            if value is not None:
                root[key][0] = value.numpy(force=True)
            preset = tensordict.get(("next", key) if isinstance(key, str) else ("next", *key), None)
            if preset is not None:  # written by the policy, e.g. a recurrent state
                nxt[key][0] = preset.numpy(force=True)
            elif key in passthrough:
                nxt[key][0] = root[key][0]
        for key in self.action_keys:
            action = tensordict.get(key)
            spec = self.full_action_spec[key]
            if action.shape != spec.shape:
                if _without_trailing_ones(action.shape) != _without_trailing_ones(spec.shape):
                    # NumPy would broadcast it, e.g. an index into a one-hot
                    raise ValueError(f"step: the action has shape {tuple(action.shape)} but action_spec is {spec!r}")
                action = action.reshape(spec.shape)  # [B] for [B, 1], as TorchRL's envs take it
            root[key][0] = action.numpy(force=True)
        partial = tensordict.get("_step", None)
        mask = None if partial is None else partial.reshape(self.batch_size).numpy(force=True)
        action = root[self.action_key][0] if len(self.action_keys) == 1 else None
        if mask is None or mask.all():
            self._step_into(action, 0, root, nxt)
        else:
            self._skip_envs(action, root, nxt, mask)
        self._stash_hidden(root, nxt)
        for key in self._recorded_root_keys:  # root entries the step itself writes
            tensordict.set(key, root_td.get(key)[0].clone())
        tensordict.set("next", self._visible(next_td[0]).clone())
        return tensordict

    #: root entries a step writes besides "next" (a TransformedEnv's inverse transforms' records)
    _recorded_root_keys: tuple = ()

    @property
    def _steps_with_grad(self) -> bool:
        """Whether a step can carry gradients from the actions to the outputs: an env written the
        TorchRL way, whose ``_step`` may be differentiable (an env of the array API steps on NumPy).
        An env of arrays over such envs (``SerialEnv``, ``TransformedEnv``) says so too, and steps
        on TensorDicts through :meth:`_step_with_grad` when the input requires grad."""
        return self._torchrl_style

    def _step_with_grad(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``_step`` on TensorDicts, for :meth:`step` when gradients must flow (see ``_steps_with_grad``)."""
        return self._step(tensordict)

    def _step_torchrl(self, tensordict: TensorDictBase, step: Callable | None = None) -> TensorDictBase:
        """TorchRL's ``EnvBase.step`` for an env that implements ``_step`` (or ``step``, its stand-in)."""
        partial = tensordict.pop("_step", None)
        out = None
        if partial is not None:
            if not partial.any():
                out = self._skip_tensordict(tensordict)
            else:
                tensordict.set("_step", partial)
        preset = tensordict.get("next", None)
        if out is None:
            out = self._step_proc_data((step or self._step)(tensordict))
        if preset is not None:
            out.update(preset.exclude(*out.keys(True, True)))
        tensordict.set("next", out)
        return tensordict

    def _skip_tensordict(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The ``"next"`` of envs not stepped: the root's values, zeros for what the root lacks."""
        out = self.full_done_spec.zero()
        out.update(self.full_observation_spec.zero())
        out.update(self.full_reward_spec.zero())
        whole = [k for k, v in out.items(True) if is_tensor_collection(v) and not isinstance(v, TensorDictBase)]
        for key in [*out.keys(True, True), *whole]:  # a tensorclass entry (no leaves listed) goes whole
            value = tensordict.get(key, None)
            if value is not None:
                out.set(key, value.clone())
        return out

    def _skip_envs(self, action, root: dict, nxt: dict, mask: np.ndarray, t: int = 0) -> None:
        """One step of the envs selected by ``mask``; the others' next rows as TorchRL fills them:
        the root's values, zeros for what the root lacks (the rewards)."""
        idle = ~mask
        if mask.any():
            self._partial_step_into(action, t, root, nxt, mask)
        for key, value in nxt.items():
            value[t][idle] = root[key][t][idle] if key in root else 0

    def step_mdp(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """The root of the next step (TorchRL's env ``step_mdp``): the root's entries but the
        rewards, done flags and ``_reset``, then the carried entries and done flags of ``"next"``;
        the actions are kept."""
        carried = [k for k in self.state_keys if k not in self._state_only()]  # those stay the root's
        dropped = ["next", *self.done_keys, *(replace_last(k, "_reset") for k in self.done_keys),
                   *(k for k in self.reward_keys if k not in carried)]
        taken = _key_tree(k for k in (*carried, *self.done_keys) if not is_hidden(k))
        return _place(taken, next_tensordict.get("next"), next_tensordict.exclude(*dropped))

    def any_done(self, tensordict: TensorDictBase) -> bool:
        """Whether an env of ``tensordict`` is done; its ``_reset`` entries then say which."""
        return any_done(tensordict, self.full_done_spec, key="_reset")

    def maybe_reset(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``tensordict`` with its done envs reset (the others kept), as TorchRL's ``maybe_reset``."""
        if self.any_done(tensordict):
            tensordict = self.reset(tensordict, select_reset_only=True)
        return tensordict

    def step_and_maybe_reset(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """``(stepped, next_root)``: ``step(tensordict)``, and the root of the next step, its done
        envs reset."""
        tensordict = self.step(tensordict)
        return tensordict, self.maybe_reset(self.step_mdp(tensordict))

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Actions drawn from ``full_action_spec`` (written into ``tensordict`` when given)."""
        unlocked = tensordict is not None and not self.batch_locked and not self.batch_size
        actions = self.full_action_spec.rand(tensordict.shape if unlocked else None)  # one per input row
        return actions if tensordict is None else tensordict.update(actions)

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """One step under random actions."""
        return self.step(self.rand_action(tensordict))

    def all_actions(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Every action of a discrete action spec (TorchRL's ``all_actions``)."""
        if tensordict is not None:
            self.reset(tensordict)
        return self.full_action_spec.enumerate()

    def cardinality(self, tensordict: TensorDictBase | None = None) -> int:
        return self.full_action_spec.cardinality()

    def fake_tensordict(self) -> TensorDictBase:
        """A zeroed TensorDict shaped like one step (root entries and ``"next"``), from the specs
        (for an env of the array API: from its arrays, which may hold bookkeeping entries)."""
        if self._torchrl_style:
            root = self.full_state_spec.zero().update(self.full_action_spec.zero())
            root.update(self.full_observation_spec.zero())
            nxt = self.full_observation_spec.zero().update(self.full_reward_spec.zero())
            nxt.update(self.full_done_spec.zero())
            root.update(self.full_done_spec.zero())
        else:
            nested = self._nested_shapes()
            root = _zeros({k: s for k, s in self.root_specs().items() if not self._arrays_only(k)}, None,
                          self.batch_size, nested, self.device)
            nxt = _zeros({k: s for k, s in self.next_specs().items() if not self._arrays_only(k)}, None,
                         self.batch_size, nested, self.device)
        root.set("next", nxt)
        root.batch_size = self.batch_size
        return root

    def add_truncated_keys(self):
        """A ``truncated`` flag beside each done flag (reap's top-level group has one already)."""
        done = self.full_done_spec.clone()
        for key in self.done_keys:
            done[replace_last(key, "truncated")] = done[key].clone()
        self.done_spec = done
        return self

    def auto_specs_(self, policy, *, tensordict: TensorDictBase | None = None, action_key="action",
                    done_key=None, observation_key="observation", reward_key="reward"):
        """Set the specs from two steps under ``policy`` (TorchRL's ``auto_specs_``): each entry an
        ``Unbounded`` spec of its shape and dtype, ``-1`` where the two steps differ; the keys
        given are the actions, done flags (default: ``done``, ``terminated``, ``truncated``),
        observations and rewards, the root's other entries the state. Returns the env."""
        root = self.reset() if tensordict is None else tensordict
        root.update(policy(root))
        first = self.step(root.copy())
        second_root = first.get("next").copy()
        second = self.step(policy(second_root).copy())
        inputs = _specs_of(root, second_root, self.batch_size)
        outputs = _specs_of(first.pop("next"), second.pop("next"), self.batch_size)
        keys = {name: [k] if isinstance(k, (str, tuple)) else list(k) for name, k in (
            ("action", action_key), ("done", ["done", "terminated", "truncated"] if done_key is None else done_key),
            ("reward", reward_key), ("observation", observation_key))}
        actions = inputs.separates(*keys["action"])
        done, rewards = outputs.separates(*keys["done"]), outputs.separates(*keys["reward"])
        observations = outputs.separates(*keys["observation"])
        if not outputs.is_empty(recurse=True):
            raise RuntimeError(f"Keys {list(outputs.keys(True, True))} are unaccounted for. Make sure you have passed "
                               "all the leaf names to the auto_specs_ method.")
        for name, spec in (("full_action_spec", actions), ("full_done_spec", done),
                           ("full_observation_spec", observations), ("full_reward_spec", rewards)):
            if spec is not None:
                setattr(self, name, spec)
        self.full_state_spec = inputs
        return self

    @classmethod
    def make_parallel(cls, create_env_fn, *, num_envs: int = 1, create_env_kwargs=None,
                      serial_for_single: bool = False, **parallel_kwargs):
        """``num_envs`` envs of ``create_env_fn`` in worker processes (reap-collectors-mp's
        ``ParallelEnv``), or a ``SerialEnv`` of one with ``serial_for_single``, as TorchRL's."""
        if serial_for_single and num_envs == 1:
            from reap.envs.serial import SerialEnv

            return SerialEnv(1, create_env_fn, create_env_kwargs=create_env_kwargs)
        from reap.envs import ParallelEnv  # the plugin's, or an error naming the package to install

        return ParallelEnv(num_envs, create_env_fn, create_env_kwargs=create_env_kwargs, **parallel_kwargs)

    @classmethod
    def register_gym(cls, id: str, *, entry_point=None, transform=None, info_keys=None, backend=None,
                     to_numpy: bool = False, reward_threshold: float | None = None, nondeterministic: bool = False,
                     max_episode_steps: int | None = None, order_enforce: bool = True, autoreset=None,
                     disable_env_checker: bool = False, apply_api_compatibility: bool = False, **kwargs) -> None:
        """Register the env (``entry_point``, by default this class) in gymnasium as ``id``, as TorchRL's.

        ``gymnasium.make(id)`` then gives a :class:`~reap.envs.gym_export.ReapGymEnv` running
        ``entry_point(**kwargs)``, wrapped with ``transform``; ``info_keys`` entries go to
        ``info``, ``to_numpy`` gives NumPy values rather than tensors. Those three and ``kwargs``
        may also be given to ``gymnasium.make`` (which overrides the registered ones). The other
        keywords are ``gymnasium.register``'s; ``autoreset`` and ``apply_api_compatibility`` are
        gym<1.0 options, refused when set.
        """
        if backend not in (None, "gymnasium"):
            raise ValueError(f"register_gym: backend={backend!r} is not supported; reap registers its envs in "
                             "gymnasium (leave backend out)")
        for name, value in (("autoreset", autoreset), ("apply_api_compatibility", apply_api_compatibility)):
            if value:
                raise ValueError(f"register_gym: {name}={value!r} is a gym<1.0 option that gymnasium 1.x's make "
                                 f"does not take; leave {name} out")
        if entry_point is None and cls is EnvBase:
            raise ValueError("EnvBase.register_gym: give entry_point= (the env class or a function building it)")
        import gymnasium

        from reap.envs.gym_export import ReapGymEnv

        gymnasium.register(id, entry_point=ReapGymEnv, reward_threshold=reward_threshold,
                           nondeterministic=nondeterministic, max_episode_steps=max_episode_steps,
                           order_enforce=order_enforce, disable_env_checker=disable_env_checker,
                           kwargs={"entry_point": cls if entry_point is None else entry_point, "transform": transform,
                                   "info_keys": info_keys, "to_numpy": to_numpy, **kwargs})

    def compile(self, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.compile: reap's envs step outside torch.compile (gymnasium "
                                  "and the array API run in Python); compile the policy instead "
                                  "(reap._utils.compile_with_warmup)")

    def eager(self):
        """Taken for TorchRL's API: reap's envs are never compiled."""
        return self

    def register_collector(self, collector) -> None:
        """Remember the collector driving this env (``env.collector``), as TorchRL's."""
        self.__dict__["_collector_ref"] = weakref.ref(collector)

    @property
    def collector(self):
        ref = self.__dict__.get("_collector_ref")
        return None if ref is None else ref()

    def empty_cache(self) -> None:
        self.__dict__["_keys_cache"] = {}

    def check_env_specs(self, *args, **kwargs) -> None:
        from reap.envs.utils import check_env_specs

        check_env_specs(self, *args, **kwargs)

    # ---- rollout -----------------------------------------------------------------------------
    def rollout(self, max_steps: int, policy=None, callback=None, *, actions=None, auto_reset: bool = True,
                auto_cast_to_device: bool = False, break_when_any_done: bool | None = None,
                break_when_all_done: bool | None = None, return_contiguous: bool | None = False,
                tensordict: TensorDictBase | None = None, set_truncated: bool = False, out=None,
                trust_policy: bool = False, storing_device=None, set_state: bool | None = None):
        """Run up to ``max_steps`` steps and stack them along a ``"time"`` dim after the batch dims.

        TorchRL's keyword arguments: ``break_when_any_done`` (default True) stops after the first
        step where any env is done, otherwise done envs are reset and the rollout goes on
        (``callback(env, td)`` after each step); ``break_when_all_done=True`` (then
        ``break_when_any_done`` defaults to False) stops after the step where the last env is
        done: a done env is not stepped again (``"_step"``), its entries repeat its last step
        (``callback(env, root)`` after each step); ``auto_reset=False`` starts from
        ``tensordict``, its done envs reset first; ``actions`` replays precomputed actions; a
        policy on tensors (an ``nn.Module``, a function of observations) is wrapped to read the
        observations and write the actions, unless ``trust_policy``;
        ``set_truncated`` marks the last step truncated (and done); ``return_contiguous=True``
        stacks densely (default: a lazy stack where the steps differ).
        """
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"rollout: max_steps must be a positive int, got {max_steps!r}")
        if break_when_any_done is None:
            break_when_any_done = not break_when_all_done
        if break_when_all_done and break_when_any_done:
            raise TypeError("Cannot have both break_when_all_done and break_when_any_done True at the same time.")
        if set_state:
            raise NotImplementedError(f"{type(self).__name__} does not support deterministic resets via "
                                      "set_state=True.")
        if actions is not None:
            if policy is not None:
                raise ValueError("Cannot pass both `policy` and `actions` to rollout().")
            policy = _replay(actions, next(iter(self.full_action_spec.keys())))
            if hasattr(actions, "__len__"):
                max_steps = min(max_steps, len(actions))
        if auto_reset:
            tensordict = self.reset(tensordict)
        elif tensordict is None:
            raise RuntimeError("tensordict must be provided when auto_reset is False")
        else:
            tensordict = self.maybe_reset(tensordict)
        if policy is not None and not trust_policy:
            policy = _tensordict_policy(policy, self)
        act = _caster(policy if policy is not None else self.rand_action, auto_cast_to_device, self.device)
        storing_device = None if storing_device is None else torch.device(storing_device)
        if break_when_any_done or break_when_all_done:
            steps = self._rollout_stop_early(tensordict, max_steps, act, callback, storing_device,
                                             bool(break_when_all_done))
        else:
            steps = self._rollout_nonstop(tensordict, max_steps, act, callback, storing_device)
        dim = len(self.batch_size if tensordict is None else tensordict.batch_size)
        if return_contiguous and self._has_dynamic_specs:
            raise RuntimeError("The environment specs are dynamic. Call rollout with return_contiguous=False.")
        if return_contiguous:
            result = _stack_steps(steps, dim, out, self.reward_keys)
        else:
            result = LazyStackedTensorDict.maybe_dense_stack(steps, dim, out=out)
        if set_truncated:
            self._set_truncated(result)
        result.refine_names(..., "time")
        return result

    def _rollout_stop_early(self, td, max_steps, act, callback, storing_device, all_done: bool) -> list:
        steps = []
        running = True  # the envs still stepped (break_when_all_done)
        for i in range(max_steps):
            td = act(td)
            td = self.step(td)
            root = self.step_mdp(td)
            entry = td.copy() if storing_device is None else td.to(storing_device)
            if all_done and running is not True and not running.all():
                entry.pop("_step", None)
                entry = torch.where(running.view(entry.shape), entry, steps[-1])
            steps.append(entry)
            if i == max_steps - 1:
                break
            td = root
            if not all_done:
                if any_done(td, self.full_done_spec, key=None):
                    break
            else:
                any_done(td, self.full_done_spec, key="_neg_step")
                finished = td.pop("_neg_step", None)
                if finished is not None:
                    running = running & ~finished
                if running is not True:
                    if not running.any():
                        break
                    td.set("_step", running)
            if callback is not None:
                callback(self, td)
        return steps

    def _rollout_nonstop(self, td, max_steps, act, callback, storing_device) -> list:
        steps = []
        for i in range(max_steps):
            td = act(td)
            if i == max_steps - 1:
                stepped = self.step(td)
            else:
                stepped, td = self.step_and_maybe_reset(td)
            steps.append(stepped if storing_device is None else stepped.to(storing_device))
            if i == max_steps - 1:
                break
            if callback is not None:
                callback(self, stepped)
        return steps

    def _set_truncated(self, result: TensorDictBase) -> None:
        """The last step truncated (and done) for every env, wherever the rollout stopped."""
        keys = [k for k in self.done_keys if (k if isinstance(k, str) else k[-1]) == "truncated"]
        if not keys and not self._torchrl_style and "truncated" in result.get("next").keys():
            keys = ["truncated"]  # the flag reap's array envs always carry
        if not keys:
            raise RuntimeError("set_truncated was set to True but no truncated key could be found. Make sure a "
                               "'truncated' entry was set in the environment full_done_keys using "
                               "`env.add_truncated_keys()`.")
        last = (slice(None),) * (result.ndim - 1) + (-1,)
        for key in keys:
            truncated = result.get(("next", *_tuple(key))).clone()
            done = result.get(("next", *_tuple(replace_last(key, "done"))))
            truncated[last] = True
            result.set(("next", *_tuple(key)), truncated)
            result.set(("next", *_tuple(replace_last(key, "done"))), truncated | done)

    # ---- transforms, seeds, state ----------------------------------------------------------
    def append_transform(self, transform):
        """A ``TransformedEnv`` of this env with ``transform`` (as TorchRL's ``EnvBase`` does)."""
        from reap.envs.transforms import TransformedEnv

        return TransformedEnv(self, transform)

    def insert_transform(self, index: int, transform):
        """A ``TransformedEnv`` of this env with ``transform`` (the only one, at any index)."""
        from reap.envs.transforms import TransformedEnv

        return TransformedEnv(self).insert_transform(index, transform)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed the env; returns the seed the next env (or the next call) should use: TorchRL's
        next seed (:func:`~reap.envs.seeding.seed_generator`), or ``seed`` with ``static_seed``."""
        self._set_seed(seed)
        if seed is None:
            return None
        return seed if static_seed else seed_generator(seed)

    def state_dict(self) -> dict:
        """Tensors that define the env's behaviour beyond its code (its persistent buffers)."""
        buffers = self.__dict__.get("_reap_buffers", {})
        return {name: getattr(self, name) for name, persistent in buffers.items() if persistent}

    def load_state_dict(self, state_dict: dict) -> None:
        expected = set(self.state_dict())
        if set(state_dict) - expected:
            raise KeyError(f"{type(self).__name__} has no state {sorted(set(state_dict) - expected)}; its state is "
                           f"{sorted(expected)}")
        for name, value in state_dict.items():
            getattr(self, name).copy_(value)

    def close(self, *, raise_if_closed: bool = True) -> None:
        self.is_closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _leaves(spec: Composite) -> dict:
    return {key: value for key, value in spec.items(True, True) if value is not None}


def _without_trailing_ones(shape) -> tuple:
    shape = tuple(shape)
    while shape and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def _tuple(key) -> tuple:
    return (key,) if isinstance(key, str) else tuple(key)


def _specs_of(first: TensorDictBase, second: TensorDictBase, batch) -> Composite:
    """``Unbounded`` specs of ``first``'s entries (``-1`` where ``second``'s shape differs)."""
    specs = {}
    for key in first.keys(True):  # non-tensor entries too (leaves_only would skip them)
        value, other = first.get(key), second.get(key, None)
        if is_tensor_collection(value) and not is_non_tensor(value):
            continue
        if is_non_tensor(value):  # a string, say: TorchRL's NonTensor with the value as its example
            specs[key] = spec_of_non_tensor(value)
            continue
        shape = value.shape if other is None else [a if a == b else -1 for a, b in zip(value.shape, other.shape)]
        specs[key] = Unbounded(shape, device=value.device, dtype=value.dtype)
    return Composite(specs, batch_size=batch)


def _stack_steps(steps: list, dim: int, out, reward_keys) -> TensorDictBase:
    """``torch.stack`` of a rollout's steps; a reward at the root of some step (an env's
    ``_reset`` writing one) is named as the reason when they do not stack."""
    try:
        return torch.stack(steps, dim, out=out)
    except RuntimeError as err:
        at_root = [key for key in reward_keys if any(key in step.keys(True) for step in steps)]
        if at_root:
            raise RuntimeError(f"The reward key was present in the root tensordict of at least one of the tensordicts "
                               f"to stack ({at_root}): the env's _reset writes it, so some steps have it at the root "
                               "and others not. Leave rewards out of _reset's output, or call rollout with "
                               "return_contiguous=False.") from err
        raise


def _key_tree(keys) -> dict:
    """``[("a", "b"), "c"]`` as ``{"a": {"b": {}}, "c": {}}``."""
    tree: dict = {}
    for key in keys:
        node = tree
        for part in _tuple(key):
            node = node.setdefault(part, {})
    return tree


def _place(tree: dict, source: TensorDictBase, dest: TensorDictBase) -> TensorDictBase:
    """The entries of ``tree`` copied from ``source`` into ``dest``, level by level, each stacked
    TensorDict of a lazy stack on its own (their entries may differ in shape)."""
    if isinstance(source, LazyStackedTensorDict) and isinstance(dest, LazyStackedTensorDict) and (
            source.stack_dim == dest.stack_dim and len(source.tensordicts) == len(dest.tensordicts)):
        # the sub-envs of a SerialEnv of heterogeneous envs: their groups do not stack
        return LazyStackedTensorDict.lazy_stack(
            [_place(tree, s, d) for s, d in zip(source.tensordicts, dest.tensordicts)], source.stack_dim)
    for key, sub in tree.items():
        value = source.get(key, None)
        if value is None:
            continue
        if sub and isinstance(value, TensorDictBase):
            out = dest.get(key, None)
            # a new container at this level: ``dest`` (the root, shallowly excluded) shares its
            # sub-TensorDicts with the step it came from, which must keep its own entries
            out = value.empty() if out is None or out.batch_size != value.batch_size else out.copy()
            if isinstance(value, LazyStackedTensorDict):
                dim = value.stack_dim
                out = LazyStackedTensorDict.lazy_stack(
                    [_place(sub, v, o) for v, o in zip(value.tensordicts, out.unbind(dim))], dim)
            else:
                out = _place(sub, value, out)
            value = out
        elif is_tensor_collection(value) and not isinstance(value, TensorDictBase):
            value = value.clone(False)  # a tensorclass: a reset updates the root's in place, not the step's
        dest.set(key, value)
    return dest


def _replay(actions, key):
    iterator = iter(actions)

    def policy(td):
        action = next(iterator)
        return td.set(key, action if isinstance(action, TensorDictBase) else torch.as_tensor(action))

    return policy


def _tensordict_policy(policy, env: EnvBase):
    """``policy`` as a callable on TensorDicts (TorchRL's rollout wrapping): a module or function
    on tensors reads the observations and writes the actions; a TensorDict callable stays as is."""
    if isinstance(policy, TensorDictModuleBase) or hasattr(policy, "set_action_spec_from_env"):
        return policy
    try:
        params = inspect.signature(getattr(policy, "forward", policy)).parameters
    except (TypeError, ValueError):
        return policy
    names = list(params)
    if names in (["tensordict"], ["td"]) or (len(names) == 1 and is_tensor_collection(params[names[0]].annotation)):
        return policy
    observations = list(env.observation_spec.keys())
    if isinstance(policy, torch.nn.Module) or (names and all(n in observations for n in names)):
        return TensorDictModule(policy, in_keys=observations, out_keys=env.action_keys)
    return policy  # a function of the TensorDict under another name (TorchRL would pass it tensors)


def _caster(policy, auto_cast_to_device: bool, env_device):
    """The policy call of a rollout: its output merged into the input, on the policy's device."""
    device = None
    if auto_cast_to_device:
        try:
            device = next(policy.parameters()).device
        except (StopIteration, AttributeError):
            device = None

    def act(td):
        if device is not None:
            td = td.to(device, non_blocking=True)
        result = policy(td)
        if result is not None and result is not td:
            td.update(result)
        if device is not None:
            td = td.to(env_device, non_blocking=True)
        return td

    return act


def _zeros(specs: dict[str, TensorSpec], steps: int | None, batch, nested: dict | None = None,
           device=None) -> TensorDict:
    """Zeroed entries for ``specs`` (leaf keys) on ``device`` (the env's, as TorchRL's outputs; None
    when it has none); a nested entry's sub-TensorDict has the shape of its Composite in ``nested``
    (``{key: shape}``)."""
    lead = () if steps is None else (steps,)
    data = TensorDict(batch_size=(*lead, *batch), device=device)
    if nested:
        prefixes = {key[:i] for key in specs if isinstance(key, tuple) for i in range(1, len(key))}
        for prefix in sorted(prefixes, key=len):
            shape = nested.get(prefix if len(prefix) > 1 else prefix[0])
            if shape is not None and len(shape) > len(batch):
                data.set(prefix, TensorDict(batch_size=(*lead, *shape), device=device))
    for key, spec in specs.items():
        data.set(key, spec.zero(lead))
    return data


def _write(array: np.ndarray, t: int, value, mask: np.ndarray | None) -> None:
    """``array[t] = value`` in the rows of ``mask`` (all when None)."""
    value = value.numpy(force=True) if isinstance(value, torch.Tensor) else value
    if mask is None or array.ndim == 1 or mask.ndim == 0:
        array[t] = value
    else:
        array[t][mask] = value[mask]


def _is_torchrl_env(obj) -> bool:
    return any(cls.__name__ == "EnvBase" and cls.__module__.startswith("torchrl.envs") for cls in type(obj).__mro__)


def refuse_torchrl_env(create_env_fn, owner: str) -> None:
    """A TypeError with the fix when ``create_env_fn`` is a TorchRL env: an ``nn.Module``, so
    callable, but calling it is not building an env."""
    if _is_torchrl_env(create_env_fn):
        checked_env(create_env_fn, owner, given=True)


def checked_env(env, owner: str, *, given: bool = False) -> EnvBase:
    """``env`` when it is a reap ``EnvBase``; otherwise a TypeError naming what came instead
    (``given``: ``create_env_fn`` itself, else what it returned), with the fix for a TorchRL env.

    Examples:
        >>> checked_env(object(), "SerialEnv")
        Traceback (most recent call last):
        ...
        TypeError: SerialEnv: create_env_fn returned object; it must return a reap EnvBase (wrap gymnasium envs with reap.GymEnv)
    """
    if isinstance(env, EnvBase):
        return env
    what = f"create_env_fn {'is' if given else 'returned'} {type(env).__name__}"
    if _is_torchrl_env(env):
        raise TypeError(f"{owner}: {what}, a TorchRL env (torchrl.envs.EnvBase); reap's collectors and batched "
                        "envs step reap envs: build it from reap.envs (GymEnv, TransformedEnv, ... under TorchRL's "
                        f"names), or make {type(env).__name__} subclass reap.envs.EnvBase instead of TorchRL's")
    raise TypeError(f"{owner}: {what}; it must return a reap EnvBase (wrap gymnasium envs with reap.GymEnv)")
