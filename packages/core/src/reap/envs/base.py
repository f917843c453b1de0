"""``EnvBase``: the environment protocol collectors drive.

An environment exposes specs and two ways to be stepped:

* the TorchRL-style TensorDict API (``reset``, ``step``, ``rand_action``, ``rollout``), for
  users, tests and custom envs written the TorchRL way (override ``_reset`` and ``_step``);
* the array API the collectors use on the hot path: ``_reset_into(root, t, mask)`` and
  ``_step_into(action, t, root, nxt)`` write one step into preallocated, time-major arrays
  (``root[key][t]``, ``nxt[key][t]``), so a step allocates no tensor and builds no TensorDict.

Flat string keys name the arrays: observation keys and ``"action"`` on the root side,
observation keys, ``"reward"``, ``"done"``, ``"terminated"`` and ``"truncated"`` on the next side.
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
    >>> env = Counter()
    >>> env.rollout(5)["next", "reward"].shape
    torch.Size([5, 1])
"""

from __future__ import annotations

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from reap.specs import Binary, Composite, TensorSpec, Unbounded

FLAG_KEYS = ("done", "terminated", "truncated")

#: Prefix of the array keys that transforms keep out of sight (an excluded or replaced entry).
HIDDEN_PREFIX = "_hidden:"


def is_hidden(key) -> bool:
    """Whether an array key is internal (kept out of TensorDicts and batches)."""
    return isinstance(key, str) and key.startswith(HIDDEN_PREFIX)


class EnvBase:
    """Base class of reap environments (see the module docstring for the protocol)."""

    action_key = "action"
    reward_key = "reward"

    def __new__(cls, *args, _batch_locked: bool = True, _inplace_update: bool = False, **kwargs):
        # TorchRL's signature, so that a subclass's ``__new__`` may pass its arguments on
        if not _batch_locked:
            raise ValueError(f"{cls.__name__}: reap envs are batch-locked; _batch_locked=False is not supported")
        return super().__new__(cls)

    def __init__(self, *, batch_size=(), device="cpu", allow_done_after_reset: bool = False,
                 spec_locked: bool = True, run_type_checks: bool = False):
        # TorchRL's keywords: reap's specs are never locked, and its resets never report done
        if run_type_checks:
            raise ValueError(f"{type(self).__name__}: run_type_checks=True is not supported; check the env "
                             "once with reap.envs.utils.check_env_specs(env)")
        self.allow_done_after_reset = allow_done_after_reset
        self.batch_size = torch.Size(() if batch_size is None else batch_size)
        self.device = torch.device("cpu" if device is None else device)
        self._observation_spec = Composite(shape=self.batch_size)
        self._action_spec: TensorSpec | None = None
        self._reward_spec: TensorSpec = Unbounded(shape=(*self.batch_size, 1))
        self._done_spec = Composite(
            {key: Binary(shape=(*self.batch_size, 1)) for key in FLAG_KEYS}, shape=self.batch_size
        )
        self._state_spec = Composite(shape=self.batch_size)
        self.is_closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={self.batch_size}, device={self.device})"

    # ---- specs -----------------------------------------------------------------------------
    # Set them as in TorchRL (``self.action_spec = Bounded(...)``, a leaf or a Composite, or
    # ``self.action_spec_unbatched = ...``); the getters give the leaf of the single action and
    # reward entries and Composites of the observations, done flags and state.
    def _spec_in_batch(self, name: str, spec):
        if "batch_size" not in self.__dict__:
            raise RuntimeError(
                f"{type(self).__name__}: call super().__init__(batch_size=..., device=...) before "
                f"setting {name}"
            )
        if not isinstance(spec, TensorSpec | Composite):
            hint = " (import specs from reap.data, not torchrl.data)" if "torchrl" in type(spec).__module__ else ""
            raise TypeError(f"{name} must be a reap spec{hint}, got {type(spec).__name__}")
        batch = self.batch_size
        if spec.shape[: len(batch)] != batch:
            raise ValueError(
                f"{name}: the spec's shape {tuple(spec.shape)} must start with the env's batch_size "
                f"{tuple(batch)}; set {name.removeprefix('full_')}_unbatched to give it without them"
            )
        return spec

    def _single_entry(self, name: str, spec, key: str):
        """The leaf of a Composite holding only ``key`` (reap envs have one action and one reward)."""
        self._spec_in_batch(name, spec)
        if not isinstance(spec, Composite):
            return spec
        if list(spec.keys()) != [key]:
            raise ValueError(
                f"{name}: reap envs have a single {key!r} entry, got a Composite of {list(spec.keys())}"
            )
        return self._spec_in_batch(name, spec[key])

    @property
    def observation_spec(self) -> Composite:
        return self._observation_spec

    @observation_spec.setter
    def observation_spec(self, value) -> None:
        if isinstance(value, TensorSpec):  # TorchRL's rule: a leaf is the "observation" entry
            value = Composite(observation=value, shape=self.batch_size)
        self._observation_spec = self._spec_in_batch("observation_spec", value)

    @property
    def action_spec(self) -> TensorSpec | None:
        return self._action_spec

    @action_spec.setter
    def action_spec(self, value) -> None:
        self._action_spec = self._single_entry("action_spec", value, self.action_key)

    @property
    def reward_spec(self) -> TensorSpec:
        return self._reward_spec

    @reward_spec.setter
    def reward_spec(self, value) -> None:
        value = self._single_entry("reward_spec", value, self.reward_key)
        if not value.shape:
            raise ValueError("reward_spec: the shape cannot be empty; give it a trailing dim of 1, "
                             "e.g. Unbounded(shape=(1,))")
        self._reward_spec = value

    @property
    def done_spec(self) -> Composite:
        return self._done_spec

    @done_spec.setter
    def done_spec(self, value) -> None:
        """A leaf is the spec of every flag; a Composite needs ``"done"`` and may hold
        ``"terminated"`` and ``"truncated"``, which are copies of ``"done"`` when missing (reap's
        batches always carry the three flags)."""
        self._spec_in_batch("done_spec", value)
        flags = dict(value.items()) if isinstance(value, Composite) else {"done": value}
        if "done" not in flags or not set(flags) <= set(FLAG_KEYS):
            raise ValueError(f"done_spec: reap's done flags are {FLAG_KEYS} with 'done' among them, "
                             f"got {sorted(flags)}")
        shape = (*self.batch_size, 1)
        for key, spec in flags.items():
            if not isinstance(spec, TensorSpec) or spec.shape != shape or spec.dtype != torch.bool:
                raise ValueError(f"done_spec: the {key!r} flag must be a torch.bool spec of shape {shape} "
                                 f"(the env's batch_size and 1), got {spec!r}")
        self._done_spec = Composite({k: flags.get(k, flags["done"]).clone() for k in FLAG_KEYS},
                                    shape=self.batch_size)

    @property
    def state_spec(self) -> Composite:
        """Inputs of ``_step`` other than the action: observations carried from step to step."""
        return self._state_spec

    @state_spec.setter
    def state_spec(self, value) -> None:
        if value is None:
            value = Composite(shape=self.batch_size)
        if not isinstance(value, Composite):
            raise TypeError(f"state_spec must be a Composite, got {type(value).__name__}")
        missing = [key for key in value.keys() if key not in self.observation_spec.keys()]
        if missing:
            raise ValueError(
                f"state_spec: {missing} are not in observation_spec; reap carries an env's state from "
                "step to step in its observations, so set observation_spec first, with these keys"
            )
        self._state_spec = self._spec_in_batch("state_spec", value)

    # TorchRL's views of the same specs: full_* are Composites keyed like the TensorDicts,
    # *_unbatched drop the env's batch dims (what a policy for one env sees).
    @property
    def full_action_spec(self) -> Composite:
        return Composite({self.action_key: self.action_spec}, shape=self.batch_size)

    @full_action_spec.setter
    def full_action_spec(self, value) -> None:
        self.action_spec = value

    @property
    def full_observation_spec(self) -> Composite:
        return self.observation_spec

    @full_observation_spec.setter
    def full_observation_spec(self, value) -> None:
        self.observation_spec = value

    @property
    def full_reward_spec(self) -> Composite:
        return Composite({self.reward_key: self.reward_spec}, shape=self.batch_size)

    @full_reward_spec.setter
    def full_reward_spec(self, value) -> None:
        self.reward_spec = value

    @property
    def full_done_spec(self) -> Composite:
        return self.done_spec

    @full_done_spec.setter
    def full_done_spec(self, value) -> None:
        self.done_spec = value

    @property
    def full_state_spec(self) -> Composite:
        return self.state_spec

    @full_state_spec.setter
    def full_state_spec(self, value) -> None:
        self.state_spec = value

    @property
    def input_spec(self) -> Composite:
        return Composite(full_action_spec=self.full_action_spec, full_state_spec=self.full_state_spec,
                         shape=self.batch_size)

    @property
    def output_spec(self) -> Composite:
        return Composite(full_observation_spec=self.full_observation_spec,
                         full_reward_spec=self.full_reward_spec, full_done_spec=self.full_done_spec,
                         shape=self.batch_size)

    def _batched(self, spec):
        return spec.expand(*self.batch_size, *spec.shape)

    @property
    def action_spec_unbatched(self) -> TensorSpec:
        return self.action_spec.unbatch(len(self.batch_size))

    @action_spec_unbatched.setter
    def action_spec_unbatched(self, value) -> None:
        self.action_spec = self._batched(value)

    @property
    def full_action_spec_unbatched(self) -> Composite:
        return self.full_action_spec.unbatch(len(self.batch_size))

    full_action_spec_unbatched = full_action_spec_unbatched.setter(action_spec_unbatched.fset)

    @property
    def observation_spec_unbatched(self) -> Composite:
        return self.observation_spec.unbatch(len(self.batch_size))

    @observation_spec_unbatched.setter
    def observation_spec_unbatched(self, value) -> None:
        self.observation_spec = self._batched(value)

    full_observation_spec_unbatched = observation_spec_unbatched

    @property
    def reward_spec_unbatched(self) -> TensorSpec:
        return self.reward_spec.unbatch(len(self.batch_size))

    @reward_spec_unbatched.setter
    def reward_spec_unbatched(self, value) -> None:
        self.reward_spec = self._batched(value)

    @property
    def full_reward_spec_unbatched(self) -> Composite:
        return self.full_reward_spec.unbatch(len(self.batch_size))

    full_reward_spec_unbatched = full_reward_spec_unbatched.setter(reward_spec_unbatched.fset)

    @property
    def done_spec_unbatched(self) -> Composite:
        return self.done_spec.unbatch(len(self.batch_size))

    @done_spec_unbatched.setter
    def done_spec_unbatched(self, value) -> None:
        self.done_spec = self._batched(value)

    full_done_spec_unbatched = done_spec_unbatched

    @property
    def action_keys(self) -> list:
        return [self.action_key]

    @property
    def reward_keys(self) -> list:
        return [self.reward_key]

    @property
    def done_keys(self) -> list:
        return list(self.done_spec.keys())

    @property
    def done_key(self):
        return "done"

    def root_specs(self) -> dict[str, TensorSpec]:
        """Leaf specs of the root-side arrays, by flat key."""
        specs = dict(self.observation_spec.items())
        specs.update(self.done_spec.items())
        specs[self.action_key] = self.action_spec
        return specs

    def next_specs(self) -> dict[str, TensorSpec]:
        """Leaf specs of the next-side arrays, by flat key."""
        specs = dict(self.observation_spec.items())
        specs["reward"] = self.reward_spec
        specs.update(self.done_spec.items())
        return specs

    @property
    def state_keys(self) -> tuple[str, ...]:
        """Keys carried from ``next`` at step t to the root of step t + 1."""
        return tuple(self.observation_spec.keys())

    @property
    def passthrough_keys(self) -> tuple[str, ...]:
        """Carried keys whose ``"next"`` value is the root's, unless the policy writes it."""
        return ()

    @property
    def numel(self) -> int:
        return self.batch_size.numel()

    # ---- array API (hot path) -------------------------------------------------------------
    def _reset_into(self, root: dict, t: int, mask: np.ndarray | None) -> None:
        """Reset the envs selected by ``mask`` (all when None), writing ``root[key][t]``."""
        td = TensorDict(batch_size=self.batch_size)
        if mask is not None and self.batch_size:
            td["_reset"] = torch.as_tensor(mask).reshape(*self.batch_size, 1)
        out = self._reset(td)
        for key in self.observation_spec.keys():
            _write(root[key], t, out[key], mask)

    def _step_into(self, action, t: int, root: dict, nxt: dict) -> None:
        """Step every env with ``action`` and write ``nxt[key][t]``."""
        td = TensorDict(batch_size=self.batch_size)
        for key in self.observation_spec.keys():
            td[key] = torch.as_tensor(root[key][t])  # a NumPy scalar for a scalar entry
        td[self.action_key] = torch.as_tensor(action)
        out = self._step(td)
        for key in self.observation_spec.keys():
            nxt[key][t] = out[key].numpy(force=True)
        nxt["reward"][t] = out["reward"].numpy(force=True)
        done = out["done"].numpy(force=True)
        terminated = out.get("terminated", None)
        terminated = done if terminated is None else terminated.numpy(force=True)
        truncated = out.get("truncated", None)
        truncated = np.zeros_like(done) if truncated is None else truncated.numpy(force=True)
        nxt["terminated"][t] = terminated
        nxt["truncated"][t] = truncated
        nxt["done"][t] = done | terminated | truncated

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
    def _reset(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            f"{type(self).__name__} must implement either _reset/_step (TensorDict API) "
            "or _reset_into/_step_into (array API)"
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            f"{type(self).__name__} must implement either _reset/_step (TensorDict API) "
            "or _reset_into/_step_into (array API)"
        )

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed if seed is not None else torch.seed())

    # ---- TensorDict API ------------------------------------------------------------------
    def allocate(self, steps: int) -> tuple[dict, dict, TensorDict, TensorDict]:
        """Arrays for ``steps`` steps: root has ``steps + 1`` rows (the last one carries over).

        Returns ``(root, nxt, root_td, next_td)``: dicts of numpy views and the TensorDicts
        (time-major, ``[steps + 1, *batch]`` and ``[steps, *batch]``) that own the memory.
        """
        root_td = _zeros(self.root_specs(), steps + 1, self.batch_size)
        next_td = _zeros(self.next_specs(), steps, self.batch_size)
        root = {key: value.numpy() for key, value in root_td.items()}
        nxt = {key: value.numpy() for key, value in next_td.items()}
        return root, nxt, root_td, next_td

    def _visible(self, td: TensorDictBase) -> TensorDictBase:
        hidden = [k for k in td.keys() if is_hidden(k)]
        return td.exclude(*hidden) if hidden else td

    def _stash_hidden(self, root: dict, nxt: dict | None) -> None:
        """Keep hidden state between TensorDict-API calls (they hold no hidden entries)."""
        source = root if nxt is None else nxt
        self._hidden_state = {k: source[k][0].copy() for k in self.state_keys if is_hidden(k)}

    def _restore_hidden(self, root: dict) -> None:
        for key, value in getattr(self, "_hidden_state", {}).items():
            if key in root:
                root[key][0] = value

    def reset(self, tensordict: TensorDictBase | None = None) -> TensorDict:
        """Reset the envs (those whose ``"_reset"`` entry is True) and return the root."""
        mask = None
        if tensordict is not None and "_reset" in tensordict.keys():
            mask = tensordict["_reset"].reshape(self.batch_size).numpy(force=True)
        root, _, root_td, _ = self.allocate(1)
        if tensordict is not None and mask is not None:
            self._restore_hidden(root)
            for key in self.state_keys:
                if key in tensordict.keys():
                    root[key][0] = tensordict[key].numpy(force=True)
        self._reset_into(root, 0, mask)
        self._stash_hidden(root, None)
        out = self._visible(root_td[0].exclude(self.action_key))
        self._last_root = out
        return out.clone()

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Step with ``tensordict[action_key]``; writes and returns ``tensordict["next"]``.

        A boolean ``"_step"`` entry (batch-shaped, as in TorchRL's partial steps) steps only the
        envs where it is True: the ``"next"`` entries of the others are zeros (all of them
        skipped: their root observations and flags, a zero reward).
        """
        if self.action_key not in tensordict.keys():
            raise KeyError(f"step: the input has no {self.action_key!r} entry (the action)")
        root, nxt, root_td, next_td = self.allocate(1)
        self._restore_hidden(root)
        passthrough = self.passthrough_keys
        for key in self.state_keys:
            if key in tensordict.keys():
                root[key][0] = tensordict[key].numpy(force=True)
            if ("next", key) in tensordict.keys(True):  # written by the policy, e.g. a recurrent state
                nxt[key][0] = tensordict["next", key].numpy(force=True)
            elif key in passthrough:
                nxt[key][0] = root[key][0]
        action = tensordict[self.action_key]
        if action.shape != self.action_spec.shape:  # NumPy would broadcast it, e.g. an index into a one-hot
            raise ValueError(f"step: the action has shape {tuple(action.shape)} but action_spec is "
                             f"{self.action_spec!r}")
        root[self.action_key][0] = action.numpy(force=True)
        partial = tensordict.get("_step", None)
        mask = None if partial is None else partial.reshape(self.batch_size).numpy(force=True)
        if mask is None or mask.all():
            self._step_into(root[self.action_key][0], 0, root, nxt)
        else:
            self._skip_envs(root, nxt, mask)
        self._stash_hidden(root, nxt)
        tensordict.set("next", self._visible(next_td[0]).clone())
        return tensordict

    def _skip_envs(self, root: dict, nxt: dict, mask: np.ndarray) -> None:
        """One step of the envs selected by ``mask``; the others' next rows as TorchRL fills them."""
        idle = ~mask
        if mask.any():
            self._partial_step_into(root[self.action_key][0], 0, root, nxt, mask)
            for key, value in nxt.items():
                if is_hidden(key) and key in root:  # internal state stays the root's
                    value[0][idle] = root[key][0][idle]
                else:
                    value[0][idle] = 0
            return
        for key, value in nxt.items():  # nothing stepped: the root carries over
            value[0] = root[key][0] if key in root else 0

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Write a random action drawn from ``action_spec`` into ``tensordict``."""
        if tensordict is None:
            tensordict = TensorDict(batch_size=self.batch_size)
        tensordict[self.action_key] = self.action_spec.rand()
        return tensordict

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """One step under a random action (from the last reset when ``tensordict`` is None)."""
        if tensordict is None:
            tensordict = getattr(self, "_last_root", None)
            tensordict = self.reset() if tensordict is None else tensordict.clone()
        return self.step(self.rand_action(tensordict))

    def fake_tensordict(self) -> TensorDict:
        """A zeroed TensorDict shaped like one step (root entries and ``"next"``), from the specs."""
        batch = self.batch_size
        root = TensorDict({k: s.zero() for k, s in self.root_specs().items() if not is_hidden(k)},
                          batch_size=batch)
        nxt = TensorDict({k: s.zero() for k, s in self.next_specs().items() if not is_hidden(k)},
                         batch_size=batch)
        root.set("next", nxt)
        return root

    def rollout(self, max_steps: int, policy=None, callback=None, *, actions=None,
                auto_reset: bool = True, auto_cast_to_device: bool = False,
                break_when_any_done: bool | None = None, break_when_all_done: bool | None = None,
                return_contiguous: bool | None = True, tensordict: TensorDictBase | None = None,
                set_truncated: bool = False, out=None, trust_policy: bool = False,
                storing_device=None):
        """Run up to ``max_steps`` steps and stack them along the time dim (after the batch dims).

        Keyword arguments follow TorchRL's ``EnvBase.rollout``: ``break_when_any_done`` (default
        True) stops after the first step where any env is done, otherwise done envs are reset and
        the rollout goes on; ``break_when_all_done=True`` (then ``break_when_any_done`` defaults
        to False) stops after the step where the last env is done: a done env is not reset, its
        entries in the later steps repeat its last step, and the others step on (TorchRL's
        partial steps; see ``_partial_step_into``); ``auto_reset=False`` starts from
        ``tensordict``, its done envs reset first; ``actions`` replays precomputed actions;
        ``callback(env, td)`` runs after each step; ``set_truncated`` marks the last step of every
        env truncated and done, wherever the rollout stopped; ``return_contiguous=False`` returns
        a lazy stack.
        """
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"rollout: max_steps must be a positive int, got {max_steps!r}")
        if break_when_all_done and break_when_any_done:
            raise TypeError(
                "rollout: break_when_all_done and break_when_any_done cannot both be True; pass "
                "break_when_all_done=True alone (break_when_any_done then defaults to False)"
            )
        if break_when_any_done is None:
            break_when_any_done = not break_when_all_done
        if actions is not None:
            if policy is not None:
                raise ValueError("rollout: pass policy or actions, not both")
            actions = list(actions)
            max_steps = min(max_steps, len(actions))
        if not auto_reset and tensordict is None:
            raise ValueError("rollout: auto_reset=False needs the initial tensordict= to start from")
        td = self.reset(tensordict) if auto_reset else self._reset_done(tensordict)
        if break_when_all_done:
            steps = self._rollout_until_all_done(td, max_steps, policy, callback, actions, storing_device)
        else:
            steps = self._rollout_steps(td, max_steps, policy, callback, actions, storing_device,
                                        break_when_any_done)
        if set_truncated:
            _mark_truncated(steps)
        return self._stack_steps(steps, return_contiguous, out)

    def _rollout_steps(self, td, max_steps, policy, callback, actions, storing_device,
                       break_when_any_done: bool) -> list:
        """``rollout``'s steps: done envs are reset and step on, or the first done ends it."""
        steps = []
        for i in range(max_steps):
            self._act(td, policy, actions, i)
            td = self.step(td)
            steps.append(td if storing_device is None else td.to(storing_device))
            if i == max_steps - 1:
                break
            done = td["next", "done"]
            if done.any() and break_when_any_done:
                break
            td = self._step_mdp(td)
            if callback is not None:
                callback(self, td)
        return steps

    def _rollout_until_all_done(self, td, max_steps, policy, callback, actions, storing_device) -> list:
        """``rollout``'s steps under ``break_when_all_done=True``.

        ``"_step"`` (batch-shaped, with a trailing dim of 1) marks the envs not done yet; it is in
        the TensorDict the policy and the callback see, as in TorchRL, but not in the output.
        """
        steps = []
        running = None  # every env steps, until the first one is done
        for i in range(max_steps):
            self._act(td, policy, actions, i)
            td = self.step(td)
            entry = td if storing_device is None else td.to(storing_device)
            if running is not None:  # done envs: their last step again
                entry = torch.where(running.reshape(self.batch_size), entry.exclude("_step"), steps[-1])
            steps.append(entry)
            if i == max_steps - 1:
                break
            done = td["next", "done"].reshape(*self.batch_size, 1)
            td = self._step_mdp(td, reset=False)
            if done.any():
                running = ~done if running is None else running & ~done
                if not running.any():
                    break
            if running is not None:
                td.set("_step", running.clone())
            if callback is not None:
                callback(self, td)
        return steps

    def _reset_done(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``tensordict`` with its done envs reset (``rollout(auto_reset=False)`` starts from it,
        as TorchRL's ``maybe_reset``); the others' entries are kept."""
        done = tensordict.get("done", None)
        if done is None or not done.any():
            return tensordict
        reset_in = tensordict.clone()
        reset_in["_reset"] = done
        return tensordict.clone().update(self.reset(reset_in))

    def _act(self, td, policy, actions, i: int) -> None:
        if actions is not None:
            td.set(self.action_key, torch.as_tensor(actions[i]))
        elif policy is not None:
            result = policy(td)
            if result is not None and result is not td:
                td.update(result)
        else:
            self.rand_action(td)

    def _stack_steps(self, steps: list, return_contiguous, out):
        dim = len(self.batch_size)
        if return_contiguous or return_contiguous is None:
            result = torch.stack(steps, dim=dim)
        else:
            result = LazyStackedTensorDict.lazy_stack(steps, dim=dim)
        if out is not None:
            out.update(result)
            return out
        return result

    def _step_mdp(self, td: TensorDictBase, *, reset: bool = True) -> TensorDict:
        """The root of the next step; done envs are reset unless ``reset=False`` (they keep
        their flags and observations, as TorchRL's ``step_mdp``). Other root entries (a
        caller's or a policy's, not the action) carry over, as with TorchRL's ``keep_other``."""
        nxt = td["next"]
        root = TensorDict({k: nxt[k] for k in self.state_keys if not is_hidden(k)}, batch_size=self.batch_size)
        for key in FLAG_KEYS:
            root[key] = nxt[key]
        if reset:
            root = self._reset_done(root)
        return root.update(td.exclude("next", "_step", self.action_key, self.reward_key, *root.keys()))

    # ---- transforms ----------------------------------------------------------------------
    def append_transform(self, transform):
        """A ``TransformedEnv`` of this env with ``transform`` (as TorchRL's ``EnvBase`` does)."""
        from reap.envs.transforms import TransformedEnv

        return TransformedEnv(self, transform)

    def insert_transform(self, index: int, transform):
        """A ``TransformedEnv`` of this env with ``transform`` (the only one, at any index)."""
        from reap.envs.transforms import TransformedEnv

        return TransformedEnv(self).insert_transform(index, transform)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed the env; returns the seed the next env (or the next call) should use."""
        self._set_seed(seed)
        if seed is None:
            return None
        return seed if static_seed else seed + max(1, self.numel)

    def state_dict(self) -> dict:
        """Tensors that define the env's behaviour beyond its code (e.g. normalisation stats)."""
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        if state_dict:
            raise KeyError(f"{type(self).__name__} has no state, got keys {sorted(state_dict)}")

    def close(self) -> None:
        self.is_closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _mark_truncated(steps: list) -> None:
    """``rollout(set_truncated=True)``: the last step is truncated (and done) for every env,
    done or not and wherever the rollout stopped, as in TorchRL."""
    last = steps[-1] = steps[-1].clone()
    for key in ("truncated", "done"):
        last["next", key] = torch.ones_like(last["next", key])


def _zeros(specs: dict[str, TensorSpec], steps: int, batch) -> TensorDict:
    data = {key: spec.zero((steps,)) for key, spec in specs.items()}
    return TensorDict(data, batch_size=(steps, *batch))


def _write(array: np.ndarray, t: int, value, mask: np.ndarray | None) -> None:
    """``array[t] = value`` in the rows of ``mask`` (all when None)."""
    value = value.numpy(force=True) if isinstance(value, torch.Tensor) else value
    if mask is None or array.ndim == 1 or mask.ndim == 0:
        array[t] = value
    else:
        array[t][mask] = value[mask]
