"""Per-trajectory bookkeeping: ``StepCounter``, ``InitTracker`` and ``TrajCounter`` (TorchRL's).

Both need an env (their ``forward`` raises, as TorchRL's): they count or flag steps since the
last reset, on the root at reset and in ``"next"`` at each step.

As TorchRL's, they act on each done group of the env: an env whose done flags live in nested
groups (``("agents", "done")``, multi-agent envs) gets ``("agents", "is_init")`` or
``("agents", "step_count")`` beside them, shaped like that group's flags. A group nested in
another one (a top-level ``"done"`` beside ``("agents", "done")``) gets none of its own: the
outer group's entry stands for it (TorchRL's ``_filtered_reset_keys``).

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(max_steps=2))
    >>> td = env.rollout(5)
    >>> td["next", "step_count"].flatten().tolist(), td["next", "truncated"].flatten().tolist()
    ([1, 2], [False, True])
"""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.context import get_spawning_popen

import numpy as np
import torch

from reap.envs.transforms.transform import FORWARD_NOT_IMPLEMENTED, Transform
from reap.specs import Bounded, Categorical, Composite

# a spawn context's lock can be handed to processes of any start method (a fork context's only to forked ones)
COUNTERS = mp.get_context("spawn")


def group_roots(env, nested: bool = False) -> list:
    """The path (a tuple, ``()`` for the top level) of each done group of ``env`` that gets its own
    bookkeeping entry, in the order of ``env.reset_keys``; a group inside another one is left out
    unless ``nested`` (then only those are listed)."""
    roots, inner = [], []
    for reset_key in env.reset_keys:
        root = reset_key[:-1] if isinstance(reset_key, tuple) else ()
        (inner if any(root[: len(r)] == r for r in roots) else roots).append(root)
    return inner if nested else roots


def leaf_key(root: tuple, name: str):
    """``name`` inside the group at ``root`` (a plain string at the top level)."""
    return (*root, name) if root else name


def outer_root(root: tuple, roots: list) -> tuple:
    """The group of ``roots`` that holds the nested group at ``root``."""
    return max((r for r in roots if root[: len(r)] == r), key=len)


def group_shape(done_spec, root: tuple) -> torch.Size:
    """The shape of the done flags of the group at ``root`` of ``done_spec`` (its ``"done"``, else
    its first flag)."""
    node = done_spec[root] if root else done_spec
    flag = node.get("done")
    if flag is None or isinstance(flag, Composite):
        flag = next((v for v in node.values() if not isinstance(v, Composite)), None)
    if flag is None:
        raise KeyError(f"no done flag in the done group {root or 'at the top level'} of {done_spec}")
    return flag.shape


def _group_reset(tensordict, root: tuple):
    """The ``_reset`` entry of the group at ``root`` in a reset's input (None when absent)."""
    return None if tensordict is None else tensordict.get(leaf_key(root, "_reset"), None)


def _spread(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """An outer group's flags broadcast to a nested group's (dims added before the last one)."""
    while value.ndim < like.ndim:
        value = value.unsqueeze(-2)
    return value.expand_as(like)


class StepCounter(Transform):
    """Count the steps since the last reset in ``step_count``; with ``max_steps``, mark the step
    that reaches it truncated (and done, with ``update_done``), as TorchRL's ``StepCounter``.

    Args:
        max_steps: the step count at which a trajectory is truncated (None: never).
        truncated_key: the flag written when ``max_steps`` is reached.
        step_count_key: where the count goes.
        update_done: also set ``"done"`` when truncating.
    """

    _array_hooks = True

    def __init__(self, max_steps: int | None = None, truncated_key: str | None = "truncated",
                 step_count_key: str | None = "step_count", update_done: bool = True):
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"max_steps should have a value greater or equal to one (an int or None), got {max_steps!r}")
        if not isinstance(truncated_key, str):
            raise ValueError("truncated_key must be a string.")
        if not isinstance(step_count_key, str):
            raise ValueError("step_count_key must be a string.")
        super().__init__()
        self.max_steps = max_steps
        self.truncated_key = truncated_key
        self.step_count_key = step_count_key
        self.update_done = update_done

    # ---- the keys, per done group (see the module) --------------------------------------------
    def _groups(self, env=None) -> list:
        """Per done group: ``(root, step_count key, truncated key, done key)``; without an env, the
        top-level group only (TorchRL's defaults, for ``_reset``/``_step`` called directly)."""
        env = self.parent if env is None else env
        if env is None:
            return [((), self.step_count_key, self.truncated_key, "done")]
        return [(root, leaf_key(root, self.step_count_key), leaf_key(root, self.truncated_key),
                 leaf_key(root, "done")) for root in group_roots(env)]

    def _nested(self, env=None) -> list:
        """Per flag of a nested group that a truncation reaches (TorchRL propagates it): ``(flag
        key, the outer group's flag key)``, for the truncated flags and, with ``update_done``, the
        done flags such groups have."""
        env = self.parent if env is None else env
        if self.max_steps is None or env is None:
            return []
        roots, flags = group_roots(env), set(env.output_spec["full_done_spec"].keys(True, True))
        names = [self.truncated_key, "done"] if self.update_done else [self.truncated_key]
        pairs = []
        for name in names:
            for root in group_roots(env, nested=True):
                if leaf_key(root, name) in flags:
                    pairs.append((leaf_key(root, name), leaf_key(outer_root(root, roots), name)))
        return pairs

    @property
    def step_count_keys(self) -> list:
        return [count for _, count, _, _ in self._groups()]

    @property
    def truncated_keys(self) -> list:
        return [truncated for _, _, truncated, _ in self._groups()]

    @property
    def done_keys(self) -> list:
        return [done for _, _, _, done in self._groups()]

    @property
    def reset_keys(self) -> list:
        if self.parent is None:
            return ["_reset"]
        return [leaf_key(root, "_reset") for root in group_roots(self.parent)]

    def _every_group(self, name: str) -> list:
        if self.parent is None:
            return [name]
        return [leaf_key(key[:-1] if isinstance(key, tuple) else (), name) for key in self.parent.reset_keys]

    @property
    def all_done_keys(self) -> list:
        """The ``"done"`` flag of every done group, nested ones included (a truncation reaches them)."""
        return self._every_group("done")

    @property
    def all_truncated_keys(self) -> list:
        """The truncated flag of every done group, nested ones included."""
        return self._every_group(self.truncated_key)

    # ---- TorchRL's hooks -----------------------------------------------------------------------
    def _reset(self, tensordict, tensordict_reset):
        for root, count_key, truncated_key, done_key in self._groups():
            reset = _group_reset(tensordict, root)
            like = tensordict_reset.get(done_key, None)
            if like is None and self.parent is None:  # called directly: the input's flags give the shape
                like = None if tensordict is None else tensordict.get(done_key, None)
                if like is None:
                    raise KeyError(f"StepCounter._reset without an env needs a {done_key!r} entry in its input "
                                   "or output, to shape the step count")
            if like is None:
                done_spec = self.parent.output_spec["full_done_spec"]
                like = torch.zeros(group_shape(done_spec, root), dtype=torch.bool, device=tensordict_reset.device)
            if reset is None:
                reset = torch.ones(like.shape, dtype=torch.bool, device=like.device)
            while reset.ndim < like.ndim:
                reset = reset.unsqueeze(-1)
            reset = reset.expand(like.shape)
            count = None if tensordict is None else tensordict.get(count_key, None)
            if count is None:
                count = torch.zeros(like.shape, dtype=torch.int64, device=like.device)
            count = torch.where(~reset, count.expand_as(reset), 0)
            tensordict_reset.set(count_key, count)
            if self.max_steps is not None:
                truncated = (count >= self.max_steps) | tensordict_reset.get(truncated_key, False)
                if self.update_done:
                    tensordict_reset.set(done_key, truncated)
                tensordict_reset.set(truncated_key, truncated)
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        for _, count_key, truncated_key, done_key in self._groups():
            count = tensordict.get(count_key) + 1
            next_tensordict.set(count_key, count)
            if self.max_steps is not None:
                truncated = (count >= self.max_steps) | next_tensordict.get(truncated_key, False)
                if self.update_done:
                    next_tensordict.set(done_key, truncated | next_tensordict.get(done_key))
                next_tensordict.set(truncated_key, truncated)
        for key, outer in self._nested():
            flag = next_tensordict.get(key, None)
            if flag is not None:
                next_tensordict.set(key, flag | _spread(next_tensordict.get(outer), flag))
        return next_tensordict

    def forward(self, tensordict):
        raise NotImplementedError(
            "StepCounter cannot be called independently, only its step and reset methods are functional "
            "(it counts the steps of sequential data from an env, not of a replay buffer's samples)."
        )

    @staticmethod
    def _count_spec(shape, device):
        return Bounded(low=0, high=torch.iinfo(torch.int64).max, shape=shape, dtype=torch.int64, device=device)

    def transform_observation_spec(self, observation_spec):
        done_spec = self.parent.output_spec["full_done_spec"]
        for root, count_key, _, _ in self._groups():
            observation_spec[count_key] = self._count_spec(group_shape(done_spec, root), observation_spec.device)
        return observation_spec

    def transform_output_spec(self, output_spec):
        if self.max_steps:
            done_spec = output_spec["full_done_spec"]
            for root, _, truncated_key, done_key in self._groups():
                shape = group_shape(done_spec, root)
                for key in [truncated_key, done_key] if self.update_done else [truncated_key]:
                    done_spec[key] = Categorical(2, dtype=torch.bool, device=output_spec.device, shape=shape)
        return super().transform_output_spec(output_spec)

    def transform_input_spec(self, input_spec):
        done_spec = self.parent.output_spec["full_done_spec"]
        state_spec = input_spec["full_state_spec"]
        for root, count_key, _, _ in self._groups():
            for depth in range(1, len(root) + 1):  # the count's groups have their done groups' shapes
                if root[:depth] not in state_spec.keys(True):
                    state_spec[root[:depth]] = Composite(shape=done_spec[root[:depth]].shape,
                                                         device=input_spec.device)
            state_spec[count_key] = self._count_spec(group_shape(done_spec, root), input_spec.device)
        return input_spec

    # ---- arrays --------------------------------------------------------------------------------
    def _attach(self, env) -> None:
        groups = self._groups(env)
        self._count_keys = tuple(count for _, count, _, _ in groups)
        self._flag_keys = tuple((count, truncated, done) for _, count, truncated, done in groups)
        # the outer group's flags, reshaped (dims added before the last) to broadcast onto a nested group's
        self._spread_flags = tuple((key, outer, len(env.output_spec["full_done_spec"][key].shape)
                                    - len(env.output_spec["full_done_spec"][outer].shape))
                                   for key, outer in self._nested(env))

    def on_reset(self, root, t, mask):
        whole = mask is None or mask.ndim == 0
        for key in self._count_keys:
            if whole:
                root[key][t] = 0
            else:
                root[key][t][mask] = 0

    def on_step(self, root, nxt, t):
        for count_key, truncated_key, done_key in self._flag_keys:
            count = nxt[count_key][t]
            np.add(root[count_key][t], 1, out=count)
            if self.max_steps is not None:
                hit = count >= self.max_steps
                truncated = nxt[truncated_key][t]
                np.logical_or(truncated, hit, out=truncated)
                if self.update_done:
                    np.logical_or(nxt[done_key][t], truncated, out=nxt[done_key][t])
        for key, outer, extra in self._spread_flags:
            flag, value = nxt[key][t], nxt[outer][t]
            value = value.reshape(*value.shape[:-1], *(1,) * extra, value.shape[-1])
            np.logical_or(flag, value, out=flag)

    def __repr__(self) -> str:
        return f"StepCounter(max_steps={self.max_steps}, step_count_key={self.step_count_key!r})"


class InitTracker(Transform):
    """Write ``init_key``: True at the step where a trajectory starts (after every reset).

    Recurrent policies read it to restart their hidden state. ``("next", init_key)`` is False.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import InitTracker, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), InitTracker())
        >>> env.rollout(3)["is_init"].flatten().tolist()
        [True, False, False]
    """

    _array_hooks = True

    def __init__(self, init_key: str = "is_init"):
        if not isinstance(init_key, str):
            raise ValueError("init_key can only be of type str as it will be the leaf key associated to each reset flag.")
        super().__init__()
        self.init_key = init_key

    @property
    def out_keys(self) -> list:
        if self.parent is None:
            raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))
        return self.init_keys

    @out_keys.setter
    def out_keys(self, value) -> None:
        if value not in (None, []):
            raise ValueError("Cannot set non-empty out-keys when out-keys are defined by the init_key value.")

    @property
    def init_keys(self) -> list:
        """``init_key`` in each done group of the parent env (see the module)."""
        if self.parent is None:
            raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))
        return [leaf_key(root, self.init_key) for root in group_roots(self.parent)]

    @property
    def reset_keys(self) -> list:
        return [leaf_key(root, "_reset") for root in group_roots(self.parent)]

    def _call(self, next_tensordict):
        done_spec = self.parent.output_spec["full_done_spec"]
        present = next_tensordict.keys(True, True)
        for root in group_roots(self.parent):
            key = leaf_key(root, self.init_key)
            if key not in present:
                next_tensordict.set(key, torch.zeros(group_shape(done_spec, root), dtype=torch.bool,
                                                     device=next_tensordict.device))
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        done_spec = self.parent.output_spec["full_done_spec"]
        for root in group_roots(self.parent):
            reset = _group_reset(tensordict, root)
            if reset is None:
                init = torch.ones(group_shape(done_spec, root), dtype=torch.bool, device=tensordict_reset.device)
            else:
                init = reset.clone()
                if init.ndim == (tensordict_reset.get(root) if root else tensordict_reset).ndim:
                    init = init.unsqueeze(-1)  # batch-shaped: the flags have a trailing dim
            tensordict_reset.set(leaf_key(root, self.init_key), init)
        return tensordict_reset

    def forward(self, tensordict):
        raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))

    def transform_observation_spec(self, observation_spec):
        done_spec = self.parent.output_spec["full_done_spec"]
        for root in group_roots(self.parent):
            observation_spec[leaf_key(root, self.init_key)] = Categorical(
                2, dtype=torch.bool, device=self.parent.device, shape=group_shape(done_spec, root))
        return observation_spec

    def _attach(self, env) -> None:
        self._init_keys = tuple(leaf_key(root, self.init_key) for root in group_roots(env))

    def on_reset(self, root, t, mask):
        whole = mask is None or mask.ndim == 0
        for key in self._init_keys:
            if whole:
                root[key][t] = True
            else:
                root[key][t][mask] = True

    def on_step(self, root, nxt, t):
        for key in self._init_keys:
            nxt[key][t] = False

    def __repr__(self) -> str:
        return f"InitTracker(init_key={self.init_key!r})"


class TrajCounter(Transform):
    """Number each trajectory: at every reset, each sub-env that starts one gets the next number of
    a counter (``out_key``, int64, shaped like its done flags), kept through its steps (TorchRL's).

    The counter is an ``mp.Value``: clones of the transform share it, and so do the processes that
    get the transform when they start (a ``ParallelEnv``'s or a multiprocess collector's workers),
    so no two trajectories get the same number. A copy pickled otherwise (saved, or sent to a Ray
    actor or another machine) takes the count and goes on alone. ``state_dict()`` is
    ``{"traj_count": n}``, the next number.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import StepCounter, TrajCounter, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(2)).append_transform(TrajCounter())
        >>> env.rollout(6, break_when_any_done=False)["next", "traj_count"].flatten().tolist()
        [0, 0, 1, 1, 2, 2]
    """

    _array_hooks = True

    def __init__(self, out_key="traj_count", *, repeats: int | None = None):
        super().__init__(in_keys=[], out_keys=[out_key])
        self._traj_count = COUNTERS.Value("q", 0)
        self.repeats = 0 if repeats is None else repeats

    def clone(self) -> TrajCounter:
        other = super().clone()
        other._traj_count = self._traj_count  # shared, as TorchRL's
        return other

    def __getstate__(self):
        state = super().__getstate__()
        if get_spawning_popen() is None:  # pickled for storage, not for a starting process: the count only
            state["_traj_count"] = int(self._traj_count.value)
        return state

    def __setstate__(self, state):
        count = state["_traj_count"]
        if isinstance(count, int):
            state["_traj_count"] = COUNTERS.Value("q", count)
        super().__setstate__(state)

    def _take(self, n: int) -> int:
        """Reserve ``n`` numbers of the counter; the first of them."""
        with self._traj_count.get_lock():
            first = self._traj_count.value
            self._traj_count.value = first + n
        return first

    def _matching(self, keys, what: str):
        """The key of ``keys`` in the same group as ``out_key`` (the same prefix)."""
        out_key = self.out_keys[0]
        for key in keys:
            if isinstance(out_key, str) and isinstance(key, str):
                return key
            if isinstance(out_key, tuple) and isinstance(key, tuple) and key[:-1] == out_key[:-1]:
                return key
        raise KeyError(f"TrajCounter: no {what} in the group of its key {out_key!r} (the env has {list(keys)}); "
                       "give an out_key beside one of the env's done flags")

    def transform_observation_spec(self, observation_spec):
        if not isinstance(observation_spec, Composite):
            raise ValueError(f"observation_spec was expected to be of type Composite. Got {type(observation_spec)} "
                             "instead.")
        done_key = self._matching(self.parent.done_keys, "done flag")
        shape = self.parent.output_spec["full_done_spec"][done_key].shape
        observation_spec[self.out_keys[0]] = Bounded(low=0, high=torch.iinfo(torch.int64).max, shape=shape,
                                                     dtype=torch.int64, device=observation_spec.device)
        return observation_spec

    def _reset(self, tensordict, tensordict_reset):
        out_key = self.out_keys[0]
        reset_key = self._matching(self.parent.reset_keys, "reset key")
        reset = None if tensordict is None else tensordict.get(reset_key, None)
        if reset is None:
            reset = torch.ones(self.container.observation_spec[out_key].shape, dtype=torch.bool)
        numbers = torch.zeros(reset.shape, dtype=torch.int64, device=tensordict_reset.device)
        n = int(reset.sum())
        numbers[reset] = torch.arange(n, dtype=torch.int64, device=numbers.device) + self._take(n)
        tensordict_reset.set(out_key, numbers)
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        next_tensordict.set(self.out_keys[0], tensordict.get(self.out_keys[0]))
        return next_tensordict

    def _call(self, next_tensordict):
        raise RuntimeError(f"{type(self).__name__} can only be called within an environment step or reset.")

    def forward(self, tensordict):
        raise RuntimeError(f"{type(self).__name__} can only be called within an environment step or reset.")

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        return {"traj_count": int(self._traj_count.value)}

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        with self._traj_count.get_lock():
            self._traj_count.value = int(state_dict["traj_count"])

    # ---- arrays --------------------------------------------------------------------------------
    def _attach(self, env):
        self._key = self.out_keys[0]

    def on_reset(self, root, t, mask):
        out = root[self._key][t]
        if mask is None or mask.ndim == 0:
            out[...] = np.arange(out.size).reshape(out.shape) + self._take(out.size)
        else:
            rows = np.broadcast_to(mask.reshape(mask.shape + (1,) * (out.ndim - mask.ndim)), out.shape)
            n = int(rows.sum())
            out[rows] = np.arange(n) + self._take(n)

    def on_step(self, root, nxt, t):
        nxt[self._key][t] = root[self._key][t]
