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
from tensordict import TensorDict, TensorDictBase

from reap.specs import Binary, Composite, TensorSpec, Unbounded

FLAG_KEYS = ("done", "terminated", "truncated")


class EnvBase:
    """Base class of reap environments (see the module docstring for the protocol)."""

    action_key = "action"

    def __init__(self, *, batch_size=(), device="cpu"):
        self.batch_size = torch.Size(batch_size)
        self.device = torch.device(device)
        self.observation_spec = Composite(shape=self.batch_size)
        self.action_spec: TensorSpec | None = None
        self.reward_spec: TensorSpec = Unbounded(shape=(*self.batch_size, 1))
        self.is_closed = False

    # ---- specs -----------------------------------------------------------------------------
    @property
    def done_spec(self) -> Composite:
        return Composite(
            {key: Binary(shape=(*self.batch_size, 1)) for key in FLAG_KEYS}, shape=self.batch_size
        )

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
            _write(root[key][t], out[key], mask)

    def _step_into(self, action, t: int, root: dict, nxt: dict) -> None:
        """Step every env with ``action`` and write ``nxt[key][t]``."""
        td = TensorDict(batch_size=self.batch_size)
        for key in self.observation_spec.keys():
            td[key] = torch.from_numpy(root[key][t])
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

    def reset(self, tensordict: TensorDictBase | None = None) -> TensorDict:
        """Reset the envs (those whose ``"_reset"`` entry is True) and return the root."""
        mask = None
        if tensordict is not None and "_reset" in tensordict.keys():
            mask = tensordict["_reset"].reshape(self.batch_size).numpy(force=True)
        root, _, root_td, _ = self.allocate(1)
        if tensordict is not None and mask is not None:
            for key in self.state_keys:
                root[key][0] = tensordict[key].numpy(force=True)
        self._reset_into(root, 0, mask)
        out = root_td[0].exclude(self.action_key)
        self._last_root = out
        return out.clone()

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Step with ``tensordict[action_key]``; writes and returns ``tensordict["next"]``."""
        if self.action_key not in tensordict.keys():
            raise KeyError(f"step: the input has no {self.action_key!r} entry (the action)")
        root, nxt, root_td, next_td = self.allocate(1)
        for key in self.state_keys:
            if key in tensordict.keys():
                root[key][0] = tensordict[key].numpy(force=True)
            if ("next", key) in tensordict.keys(True):  # written by the policy, e.g. a recurrent state
                nxt[key][0] = tensordict["next", key].numpy(force=True)
        action = tensordict[self.action_key]
        root[self.action_key][0] = action.numpy(force=True)
        self._step_into(root[self.action_key][0], 0, root, nxt)
        tensordict.set("next", next_td[0].clone())
        return tensordict

    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Write a random action drawn from ``action_spec`` into ``tensordict``."""
        if tensordict is None:
            tensordict = TensorDict(batch_size=self.batch_size)
        tensordict[self.action_key] = self.action_spec.rand()
        return tensordict

    def rollout(self, max_steps: int, policy=None, *, break_when_any_done: bool = True):
        """Run ``max_steps`` steps (resetting done envs) and stack them along the last dim."""
        td = self.reset()
        steps = []
        for _ in range(max_steps):
            td = policy(td) if policy is not None else self.rand_action(td)
            td = self.step(td)
            steps.append(td)
            done = td["next", "done"]
            if done.any() and break_when_any_done:
                break
            td = self._step_mdp(td)
        return torch.stack(steps, dim=len(self.batch_size))

    def _step_mdp(self, td: TensorDictBase) -> TensorDict:
        nxt = td["next"]
        root = TensorDict({k: nxt[k] for k in self.state_keys}, batch_size=self.batch_size)
        for key in FLAG_KEYS:
            root[key] = torch.zeros_like(nxt[key])
        done = nxt["done"].reshape(self.batch_size)
        if done.any():
            reset_in = root.clone()
            reset_in["_reset"] = nxt["done"]
            root = self.reset(reset_in)
        return root

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


def _zeros(specs: dict[str, TensorSpec], steps: int, batch) -> TensorDict:
    data = {key: spec.zero((steps,)) for key, spec in specs.items()}
    return TensorDict(data, batch_size=(steps, *batch))


def _write(dest: np.ndarray, value, mask: np.ndarray | None) -> None:
    value = value.numpy(force=True) if isinstance(value, torch.Tensor) else value
    if mask is None or dest.ndim == 0 or mask.ndim == 0:
        dest[...] = value
    else:
        dest[mask] = value[mask]
