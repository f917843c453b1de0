"""An env's specs as TorchRL stores and exposes them (the spec half of ``EnvBase``).

Two ``Composite`` hold them: ``input_spec`` (``full_action_spec``, ``full_state_spec``) and
``output_spec`` (``full_observation_spec``, ``full_reward_spec``, ``full_done_spec``). Keys may
be nested (tuples) and there may be several actions, rewards or done groups; ``action_spec``
is the leaf when there is one ``"action"`` entry and the ``Composite`` otherwise (likewise
``reward_spec``), ``done_spec`` is always the ``Composite``. Setting a leaf sets its default
entry (``"action"``, ``"reward"``, ``"done"`` and ``"terminated"``).

After construction the specs are locked (TorchRL's ``spec_locked=True``): change them through
the setters (``env.observation_spec = ...``) or after ``env.set_spec_lock_(False)``.

reap's rule: the top-level ``"done"``, ``"terminated"`` and ``"truncated"`` flags, which the
collectors read, are ``torch.bool`` of shape ``(*batch_size, 1)``.
"""

from __future__ import annotations

import warnings

import torch

from reap.envs.done import complete_done_spec, default_done_spec, repr_by_depth
from reap.specs import Composite, TensorSpec, Unbounded
from reap.specs.base import _ordinal

FLAG_KEYS = ("done", "terminated", "truncated")
_LEAF_OVERRIDES = ("observation_spec", "action_spec", "reward_spec")


class _Numel(int):
    """``env.numel`` is an int (reap's collectors read it so) that ``env.numel()`` calls, as in TorchRL."""

    def __call__(self) -> int:
        return int(self)


class EnvSpecs:
    """The spec storage and accessors of :class:`~reap.envs.EnvBase` (see the module docstring)."""

    def _init_specs(self, batch_size, device) -> None:
        """The default specs (no observation, no action, a ``"reward"``, ``"done"`` and ``"terminated"``),
        around the specs a subclass already gave (TorchRL's class-level ``_input_spec``)."""
        batch = self.batch_size
        spec_device = _ordinal(device)  # None unless given, as TorchRL's
        inputs, outputs = self.__dict__.get("_input_spec"), self.__dict__.get("_output_spec")
        inputs = Composite(shape=batch, device=spec_device) if inputs is None else inputs
        outputs = Composite(shape=batch, device=spec_device) if outputs is None else outputs
        for storage in (inputs, outputs):  # specs set before super().__init__() have the batch size of then: ()
            if storage.shape[: len(batch)] != batch:
                try:
                    storage.shape = batch
                except ValueError as err:
                    raise ValueError(f"{type(self).__name__}: the specs set before super().__init__() must have the "
                                     f"env's batch size {tuple(batch)} as leading dims ({err})") from None
        if spec_device is not None:
            inputs, outputs = inputs.to(spec_device), outputs.to(spec_device)
        for storage, name, default in (
                (inputs, "full_action_spec", lambda: Composite(shape=batch, device=spec_device)),
                (inputs, "full_state_spec", lambda: Composite(shape=batch, device=spec_device)),
                (outputs, "full_observation_spec", lambda: Composite(shape=batch, device=spec_device)),
                (outputs, "full_reward_spec", lambda: Composite(reward=Unbounded(shape=(*batch, 1), device=spec_device),
                                                                shape=batch, device=spec_device)),
                (outputs, "full_done_spec", lambda: Composite(
                    {k: default_done_spec(batch, spec_device) for k in ("done", "terminated")}, shape=batch,
                    device=spec_device))):
            if storage.get(name) is None:
                storage[name] = default()
                if name == "full_reward_spec":  # the env declared no reward: see EnvBase._step_proc_data
                    self.__dict__["_default_reward_spec"] = storage[name]
        self.__dict__["_input_spec"], self.__dict__["_output_spec"] = inputs, outputs
        self.__dict__["_keys_cache"] = {}
        self.__dict__["_specs_initialized"] = True

    # ---- storage, locking ----------------------------------------------------------------------
    def _storage(self, side: str) -> Composite:
        storage = self.__dict__.get(side)
        if storage is None:
            # specs set before super().__init__() (TorchRL's envs may): a storage of the batch size of
            # then, which __init__ completes with the defaults and gives the env's batch size
            batch = self.batch_size
            empty = {name: Composite(shape=batch) for name in (
                ("full_action_spec", "full_state_spec") if side == "_input_spec" else ("full_observation_spec",))}
            storage = self.__dict__[side] = Composite(empty, shape=batch)
        return storage

    def _overrides(self, name: str) -> bool:
        """Whether a subclass gives ``name`` itself (reap's ``TransformedEnv`` gives the leaf specs):
        then the full specs are built from it."""
        return getattr(type(self), name) is not getattr(EnvSpecs, name)

    @property
    def input_spec(self) -> Composite:
        if self._overrides("action_spec"):
            return Composite(full_action_spec=self.full_action_spec, full_state_spec=self.full_state_spec,
                             shape=self.batch_size)
        return self._storage("_input_spec")

    @input_spec.setter
    def input_spec(self, value) -> None:
        raise RuntimeError("input_spec is protected.")

    @property
    def output_spec(self) -> Composite:
        if self._overrides("observation_spec") or self._overrides("reward_spec"):
            return Composite(full_observation_spec=self.full_observation_spec,
                             full_reward_spec=self.full_reward_spec, full_done_spec=self.full_done_spec,
                             shape=self.batch_size)
        return self._storage("_output_spec")

    @output_spec.setter
    def output_spec(self, value) -> None:
        raise RuntimeError("output_spec is protected.")

    @property
    def specs(self) -> Composite:
        return Composite(output_spec=self.output_spec, input_spec=self.input_spec, shape=self.batch_size)

    @property
    def is_spec_locked(self) -> bool:
        return self.__dict__.get("_is_spec_locked", False)

    @is_spec_locked.setter
    def is_spec_locked(self, value: bool) -> None:
        self.set_spec_lock_(value)

    def set_spec_lock_(self, mode: bool = True):
        """Lock (``True``) or unlock the specs in place; returns the env."""
        for side in ("_input_spec", "_output_spec"):
            storage = self.__dict__.get(side)
            if storage is not None:
                storage.lock_(recurse=True) if mode else storage.unlock_(recurse=True)
        self.__dict__["_keys_cache"] = {}
        self.__dict__["_is_spec_locked"] = bool(mode)
        return self

    def _set(self, side: str, name: str, value: Composite) -> None:
        """Store ``value`` as ``side[name]``, unlocking the specs meanwhile."""
        storage = self._storage(side)
        locked = self.is_spec_locked
        if locked:
            self.set_spec_lock_(False)
        try:
            storage[name] = value if storage.device is None else value.to(storage.device)
        finally:
            self.__dict__["_keys_cache"] = {}
            if locked:
                self.set_spec_lock_(True)

    def _checked(self, name: str, value, *, leaf: str | None = None) -> Composite:
        """``value`` as a Composite of the env's batch (a leaf becomes entry ``leaf``)."""
        self._storage("_output_spec")
        if not isinstance(value, TensorSpec):
            hint = " (import specs from reap.data, not torchrl.data)" if "torchrl" in type(value).__module__ else ""
            raise TypeError(f"{name} must be a reap spec{hint}, got {type(value).__name__}")
        batch = self.batch_size
        if value.shape[: len(batch)] != batch:
            raise ValueError(f"The value of spec.shape ({value.shape}) must match the env batch size ({batch}). "
                             f"Please use `env.{name}_unbatched = value` to set unbatched versions instead.")
        if leaf is not None and not isinstance(value, Composite):
            value = Composite({leaf: value}, shape=batch)
        return value

    def _cached(self, name: str, compute):
        """``compute()``, kept while the specs are locked (they cannot change then)."""
        cache = self.__dict__.get("_keys_cache")
        if not self.is_spec_locked or cache is None:
            return compute()
        if name not in cache:
            cache[name] = compute()
        return cache[name]

    def _keys_of(self, name: str, spec: Composite) -> list:
        return list(self._cached(name, lambda: sorted(spec.keys(True, True), key=repr_by_depth)))

    # ---- batch, device ---------------------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        return self.__dict__.get("_batch_size", torch.Size())

    @batch_size.setter
    def batch_size(self, value) -> None:
        value = torch.Size(value)
        self.__dict__["_batch_size"] = value
        for side in ("_input_spec", "_output_spec"):
            storage = self.__dict__.get(side)
            if storage is not None and storage.shape[: len(value)] != value:
                storage.unlock_(recurse=True)
                storage.shape = value
                if self.is_spec_locked:
                    storage.lock_(recurse=True)

    @property
    def shape(self) -> torch.Size:
        return self.batch_size

    @property
    def batch_dims(self) -> int:
        return len(self.batch_size)

    def ndimension(self) -> int:
        return len(self.batch_size)

    @property
    def ndim(self) -> int:
        return len(self.batch_size)

    @property
    def numel(self) -> _Numel:
        return _Numel(self.batch_size.numel())

    @property
    def batch_locked(self) -> bool:
        """Whether the env takes exactly its ``batch_size`` (reap's envs, but those written the
        TorchRL way created with ``_batch_locked=False``, as TorchRL's stateless envs)."""
        return self.__dict__.get("_batch_locked", True)

    @batch_locked.setter
    def batch_locked(self, value) -> None:
        raise RuntimeError("batch_locked is a read-only property")

    # ---- observation, state -------------------------------------------------------------------
    @property
    def observation_spec(self) -> Composite:
        return self._storage("_output_spec")["full_observation_spec"]

    @observation_spec.setter
    def observation_spec(self, value) -> None:
        self._set("_output_spec", "full_observation_spec", self._checked("observation_spec", value,
                                                                         leaf="observation"))

    @property
    def full_observation_spec(self) -> Composite:
        return self.observation_spec

    @full_observation_spec.setter
    def full_observation_spec(self, value) -> None:
        self.observation_spec = value

    @property
    def state_spec(self) -> Composite:
        """Inputs of ``_step`` other than the actions; reap carries them in the observations (and
        done flags)."""
        return self._storage("_input_spec")["full_state_spec"]

    @state_spec.setter
    def state_spec(self, value) -> None:
        if value is None:
            value = Composite(shape=self.batch_size)
        if not isinstance(value, Composite):
            raise TypeError("The type of an state_spec must be Composite.")
        value = self._checked("state_spec", value)
        self._set("_input_spec", "full_state_spec", value)

    @property
    def full_state_spec(self) -> Composite:
        return self.state_spec

    @full_state_spec.setter
    def full_state_spec(self, value) -> None:
        self.state_spec = value

    # ---- action ------------------------------------------------------------------------------
    @property
    def full_action_spec(self) -> Composite:
        if self._overrides("action_spec"):
            return Composite({self.__dict__.get("_action_name", "action"): self.action_spec}, shape=self.batch_size)
        return self._storage("_input_spec")["full_action_spec"]

    @full_action_spec.setter
    def full_action_spec(self, value) -> None:
        self.action_spec = value

    @property
    def action_keys(self) -> list:
        return self._keys_of("action", self.full_action_spec)

    @property
    def action_key(self):
        keys = self.action_keys
        if len(keys) > 1:
            raise KeyError("action_key requested but more than one key present in the environment")
        return keys[0] if keys else self.__dict__.get("_action_name", "action")

    @action_key.setter
    def action_key(self, value) -> None:
        """The entry a leaf ``action_spec`` is set under (``"action"`` by default)."""
        self.__dict__["_action_name"] = value

    @property
    def action_spec(self):
        spec = self.full_action_spec
        keys = self.action_keys
        if len(keys) != 1 or keys[0] != "action":
            return spec
        return spec["action"]

    @action_spec.setter
    def action_spec(self, value) -> None:
        self._set("_input_spec", "full_action_spec",
                  self._checked("action_spec", value, leaf=self.__dict__.get("_action_name", "action")))

    # ---- reward ------------------------------------------------------------------------------
    @property
    def full_reward_spec(self) -> Composite:
        if self._overrides("reward_spec"):
            return Composite(reward=self.reward_spec, shape=self.batch_size)
        return self._storage("_output_spec")["full_reward_spec"]

    @full_reward_spec.setter
    def full_reward_spec(self, value) -> None:
        self.reward_spec = value

    @property
    def reward_keys(self) -> list:
        return self._keys_of("reward", self.full_reward_spec)

    @property
    def reward_key(self):
        keys = self.reward_keys
        if len(keys) > 1:
            raise KeyError("reward_key requested but more than one key present in the environment")
        return keys[0]

    @property
    def reward_spec(self):
        spec = self.full_reward_spec
        keys = self.reward_keys
        if len(keys) != 1 or keys[0] != "reward":
            return spec
        return spec["reward"]

    @reward_spec.setter
    def reward_spec(self, value) -> None:
        value = self._checked("reward_spec", value, leaf="reward")
        if any(leaf.ndim == 0 for leaf in value.values(True, True) if leaf is not None):
            raise RuntimeError("the reward_spec's leaves shape cannot be empty (this error usually comes from trying "
                               "to set a reward_spec with a null number of dimensions. Try using a multidimensional "
                               "spec instead, for instance with a singleton dimension at the tail).")
        self._set("_output_spec", "full_reward_spec", value)

    # ---- done --------------------------------------------------------------------------------
    @property
    def full_done_spec(self) -> Composite:
        return self._storage("_output_spec")["full_done_spec"]

    @full_done_spec.setter
    def full_done_spec(self, value) -> None:
        self.done_spec = value

    @property
    def done_spec(self) -> Composite:
        return self.full_done_spec

    @done_spec.setter
    def done_spec(self, value) -> None:
        value = self._checked("done_spec", value)
        if not isinstance(value, Composite):
            value = Composite(done=value, terminated=value.clone(), shape=self.batch_size)
        if any(leaf.ndim == 0 for leaf in value.values(True, True) if leaf is not None):
            raise RuntimeError("the done_spec's leaves shape cannot be empty (this error usually comes from trying to "
                               "set a reward_spec with a null number of dimensions. Try using a multidimensional spec "
                               "instead, for instance with a singleton dimension at the tail).")
        value = value.clone()
        complete_done_spec(value)
        self._settle_top_flags(value)
        self._set("_output_spec", "full_done_spec", value)

    def _settle_top_flags(self, spec: Composite) -> None:
        """reap's rule: the top-level done flags are bool, ``(*batch_size, 1)`` (the collectors read them).

        A flag of the right shape and another dtype (TorchRL takes any) is replaced, in ``spec``,
        by a bool one, with a warning; :func:`~reap.envs.done.complete_done` casts its values.
        Another shape is a ValueError."""
        if not self.__dict__.get("_specs_initialized"):
            return  # set before super().__init__(), which gives the batch size: checked after construction
        shape = (*self.batch_size, 1)
        cast = {}
        for key in FLAG_KEYS:
            flag = spec.get(key)
            if flag is None or isinstance(flag, Composite):
                continue
            if flag.shape != shape:
                raise ValueError(f"done_spec: the {key!r} flag must be a torch.bool spec of shape {shape} (the env's "
                                 f"batch_size and 1), got {flag!r}")
            if flag.dtype != torch.bool:  # TorchRL takes any dtype; reap's collectors read bools
                cast[key] = flag.dtype
                spec[key] = default_done_spec(self.batch_size, flag.device)
        if cast:
            warnings.warn(f"{type(self).__name__}: done flags {cast} are not torch.bool; reap keeps them as torch.bool "
                          "(a nonzero value is True), so batches hold bools there. Declare them with dtype=torch.bool "
                          "to silence this.", UserWarning, stacklevel=4)

    @property
    def done_keys(self) -> list:
        return self._keys_of("done", self.full_done_spec)

    @property
    def done_key(self):
        keys = self.done_keys
        if len(keys) > 1:
            raise KeyError("done_key requested but more than one key present in the environment")
        return keys[0]

    @property
    def done_keys_groups(self) -> list:
        """The done keys grouped by the Composite holding them (one group per ``_reset`` key)."""
        groups, roots = [], []
        for key in self.done_keys:
            root = key[:-1] if isinstance(key, tuple) else ()
            if root not in roots:
                roots.append(root)
                node = self.full_done_spec[root] if root else self.full_done_spec
                groups.append([root + (k,) if root else k for k in node.keys(False, True)])
        return groups

    @property
    def reset_keys(self) -> list:
        """``_reset`` of each done group (what ``reset`` reads to reset some envs)."""
        keys = [group[0][:-1] + ("_reset",) if isinstance(group[0], tuple) else "_reset"
                for group in self.done_keys_groups]
        return sorted(keys, key=repr_by_depth)

    @property
    def observation_keys(self) -> list:
        return self._keys_of("observation", self.full_observation_spec)

    @property
    def _observation_keys_step_mdp(self) -> list:
        """TorchRL's name: the observation leaves ``step_mdp`` carries to the next root."""
        return list(self.full_observation_spec.keys(True, True))

    @property
    def _state_keys_step_mdp(self) -> list:
        """TorchRL's name: the state leaves ``step_mdp`` carries to the next root."""
        return list(self.full_state_spec.keys(True, True))

    def _compact_next_keys(self) -> list:
        """``("next", key)`` of each observation and state leaf: what ``compact_obs=True`` drops
        from batches (each is the next step's root)."""
        leaves = [*self._observation_keys_step_mdp, *self._state_keys_step_mdp]
        return [("next", *k) if isinstance(k, tuple) else ("next", k) for k in leaves]

    # ---- one env of the batch ------------------------------------------------------------------
    def _make_single_env_spec(self, spec):
        return spec[(0,) * self.batch_dims] if self.batch_dims else spec

    def _batched(self, spec):
        return spec.expand(*self.batch_size, *spec.shape)

    action_spec_unbatched = property(lambda self: self._make_single_env_spec(self.action_spec),
                                     lambda self, v: setattr(self, "action_spec", self._batched(v)))
    full_action_spec_unbatched = property(lambda self: self._make_single_env_spec(self.full_action_spec),
                                          lambda self, v: setattr(self, "full_action_spec", self._batched(v)))
    observation_spec_unbatched = property(lambda self: self._make_single_env_spec(self.observation_spec),
                                          lambda self, v: setattr(self, "observation_spec", self._batched(v)))
    full_observation_spec_unbatched = observation_spec_unbatched
    reward_spec_unbatched = property(lambda self: self._make_single_env_spec(self.reward_spec),
                                     lambda self, v: setattr(self, "reward_spec", self._batched(v)))
    full_reward_spec_unbatched = property(lambda self: self._make_single_env_spec(self.full_reward_spec),
                                          lambda self, v: setattr(self, "full_reward_spec", self._batched(v)))
    done_spec_unbatched = property(lambda self: self._make_single_env_spec(self.done_spec),
                                   lambda self, v: setattr(self, "done_spec", self._batched(v)))
    full_done_spec_unbatched = done_spec_unbatched
    state_spec_unbatched = property(lambda self: self._make_single_env_spec(self.state_spec),
                                    lambda self, v: setattr(self, "state_spec", self._batched(v)))
    full_state_spec_unbatched = state_spec_unbatched
    input_spec_unbatched = property(lambda self: self._make_single_env_spec(self.input_spec))
    output_spec_unbatched = property(lambda self: self._make_single_env_spec(self.output_spec))

    def _complete_done_specs(self) -> None:
        """TorchRL's post-construction completion of done specs a subclass stored itself."""
        storage = self.__dict__.get("_output_spec")
        if storage is not None and not self._overrides("observation_spec"):
            done = storage["full_done_spec"]
            keys = set(done.keys(True, True))
            complete_done_spec(done)
            if set(done.keys(True, True)) != keys:
                self.__dict__["_keys_cache"] = {}
            self._settle_top_flags(done)

    def _check_key_collisions(self) -> None:
        """TorchRL's post-construction check: an output key in two specs, or an input key in two."""
        for groups in ((self.full_done_spec, self.full_observation_spec, self.full_reward_spec),
                       (self.full_state_spec, self.full_action_spec)):
            seen = set()
            for spec in groups:
                keys = set(spec.keys(True, True))
                if seen & keys:
                    raise RuntimeError(f"The set of keys of one spec collides (culprit: {seen & keys}) with another.")
                seen |= keys
