"""``Transform``, ``Compose`` and ``TransformedEnv``: how transforms act on the step arrays.

A transform acts on the step arrays in place, right after the base env wrote them:
``on_reset(root, t, mask)`` and ``on_step(root, nxt, t)``. It may add keys (``transform_root_specs``
/ ``transform_next_specs``) and carried state (``state_keys``).

Transforms that rename, hide or reshape an entry keep the hot path free of allocations too.
Every entry that exists at some point of the transform chain is one array, allocated once with
the batch; ``TransformedEnv`` names each array after the key it finally shows (an entry that is
excluded or replaced gets a hidden name, ``"_hidden:..."``, which batches and TensorDicts leave
out) and gives the base env and each transform a dict that maps the keys *they* know to those
arrays, built once per batch layout. So ``RenameTransform`` costs nothing per step, and a
transform that replaces an entry with a differently shaped one (``CatFrames``,
``UnsqueezeTransform``) reads the old array under ``("in", key)`` and writes the new one.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import Compose, RewardSum, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(), RewardSum()))
    >>> td = env.rollout(4)
    >>> td["next", "step_count"].flatten().tolist()
    [1, 2, 3, 4]
"""

from __future__ import annotations

import numpy as np

from reap.envs.base import FLAG_KEYS, HIDDEN_PREFIX, EnvBase
from reap.specs import Composite, TensorSpec


class Transform:
    """Base transform: does nothing; subclasses override what they need.

    Hooks a subclass may define besides ``on_reset``/``on_step`` and the spec methods:
    ``replaced_keys()`` (entries it replaces by a new array), ``reads_inputs()`` (entries it reads
    as they were before it, under ``("in", key)``), ``key_moves()`` (``{new: old}``: entries shown
    under a new name, no copy), ``observation_keys(keys)`` (which entries are observations after
    it) and ``passthrough_keys()`` (carried entries whose ``"next"`` value is the root's unless
    the policy writes it).
    """

    def __init__(self, in_keys=None):
        self.in_keys = list(in_keys) if in_keys is not None else None
        self.parent: EnvBase | None = None

    def set_container(self, env: EnvBase) -> None:
        self.parent = env
        if self.in_keys is None:
            self.in_keys = self.default_in_keys(env)
        missing = [k for k in self.in_keys if k not in env.root_specs() and k not in env.next_specs()]
        if missing:
            raise KeyError(
                f"{type(self).__name__}: in_keys {missing} are not produced by the env "
                f"(it has {sorted(k for k in {*env.root_specs(), *env.next_specs()} if not _hidden(k))})"
            )

    def default_in_keys(self, env: EnvBase) -> list[str]:
        return [k for k in env.observation_spec.keys()]

    def transform_root_specs(self, specs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
        return specs

    def transform_next_specs(self, specs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
        return specs

    def state_keys(self) -> tuple[str, ...]:
        return ()

    def replaced_keys(self) -> tuple[str, ...]:
        return ()

    def key_moves(self) -> dict[str, str]:
        return {}

    def reads_inputs(self) -> tuple[str, ...]:
        return ()

    def passthrough_keys(self) -> tuple[str, ...]:
        return ()

    def observation_keys(self, keys: list[str]) -> list[str]:
        return keys

    def on_reset(self, root: dict, t: int, mask: np.ndarray | None) -> None:
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        if state:
            raise KeyError(f"{type(self).__name__} has no state, got keys {sorted(state)}")

    def on_step(self, root: dict, nxt: dict, t: int) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(in_keys={self.in_keys})"


class Compose(Transform):
    """Apply transforms in order."""

    def __init__(self, *transforms: Transform):
        super().__init__(in_keys=[])
        self.transforms = list(transforms)

    def set_container(self, env):
        self.parent = env

    def __iter__(self):
        return iter(self.transforms)

    def __getitem__(self, index):
        return self.transforms[index]

    def __len__(self):
        return len(self.transforms)


def _hidden(key) -> bool:
    return isinstance(key, str) and key.startswith(HIDDEN_PREFIX)


class _Side:
    """The arrays of one side (root or next) across the transform chain."""

    def __init__(self, specs: dict[str, TensorSpec]):
        self.specs: list[TensorSpec] = []  # by array id
        self.origin: list[str] = []  # "<stage>:<key>" where each array was created
        self.stages: list[dict[str, int]] = [{k: self._new(0, k, s) for k, s in specs.items()}]
        self.inputs: list[dict[str, int]] = [{}]  # per stage: ("in", key) entries

    def _new(self, stage: int, key: str, spec: TensorSpec) -> int:
        self.specs.append(spec)
        self.origin.append(f"{stage}:{key}")
        return len(self.specs) - 1

    def logical_specs(self) -> dict[str, TensorSpec]:
        return {k: self.specs[i] for k, i in self.stages[-1].items()}

    def add_stage(self, after: dict[str, TensorSpec], moves: dict, replaced, reads) -> None:
        before, stage = self.stages[-1], len(self.stages)
        current, inputs = {}, {}
        for key, spec in after.items():
            if key in moves and moves[key] in before:
                current[key] = before[moves[key]]
            elif key in before and key not in replaced:
                current[key] = before[key]
            else:
                current[key] = self._new(stage, key, spec)
            self.specs[current[key]] = spec
        for key in reads:
            if key in before:
                inputs[("in", key)] = before[key]
        self.stages.append(current)
        self.inputs.append(inputs)

    def names(self) -> list[str]:
        final = {i: k for k, i in self.stages[-1].items()}
        return [final.get(i, f"{HIDDEN_PREFIX}{self.origin[i]}") for i in range(len(self.specs))]


class TransformedEnv(EnvBase):
    """An env whose steps pass through ``transform`` (one, or a ``Compose``).

    Args:
        env: the base env.
        transform: a ``Transform``; more can be added with ``append_transform`` /
            ``insert_transform``.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import RenameTransform, StepCounter, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(max_steps=2))
        >>> env = env.append_transform(RenameTransform(["observation"], ["obs"]))
        >>> sorted(env.reset().keys())
        ['done', 'obs', 'step_count', 'terminated', 'truncated']
    """

    def __init__(self, env: EnvBase, transform: Transform | None = None):
        if not isinstance(env, EnvBase):
            raise TypeError(f"TransformedEnv: env must be a reap EnvBase, got {type(env).__name__}")
        super().__init__(batch_size=env.batch_size, device=env.device)
        self.base_env = env
        self.transforms: list[Transform] = []
        self._step_mask = None  # the envs a partial step steps (see _partial_step_into)
        self._restart()
        if transform is not None:
            self.append_transform(transform)

    # ---- building the chain ----------------------------------------------------------------
    def _restart(self) -> None:
        env = self.base_env
        self._root = _Side(env.root_specs())
        self._next = _Side(env.next_specs())
        self._obs_keys = list(env.observation_spec.keys())
        self._state_logical: list[tuple[int, str]] = [(0, k) for k in env.state_keys]
        self._finish()

    def _finish(self) -> None:
        self._root_names = self._root.names()
        self._next_names = self._next.names()
        self._root_specs = {n: s for n, s in zip(self._root_names, self._root.specs)}
        self._next_specs = {n: s for n, s in zip(self._next_names, self._next.specs)}
        keys = []
        for stage, key in self._state_logical:
            root_id = self._root.stages[stage].get(key)
            next_id = self._next.stages[stage].get(key)
            if root_id is None or next_id is None:
                continue
            root_name, next_name = self._root_names[root_id], self._next_names[next_id]
            if root_name != next_name:
                raise ValueError(
                    f"TransformedEnv: the carried entry {key!r} is shown as {root_name!r} on the root "
                    f"but {next_name!r} in 'next'; rename or exclude it on both sides"
                )
            if root_name not in keys:
                keys.append(root_name)
        self._state_keys = tuple(keys)
        stages = len(self._root.stages)
        self._identity = [
            not self._root.inputs[j] and not self._next.inputs[j]
            and all(self._root_names[i] == k for k, i in self._root.stages[j].items())
            and all(self._next_names[i] == k for k, i in self._next.stages[j].items())
            for j in range(stages)
        ]
        self._view_cache: dict[int, tuple] = {}
        # bound hooks and the stage view each one reads, so a step builds no list
        self._on_reset = [(t.on_reset, t._stage) for t in self.transforms]
        self._on_step = [(t.on_step, t._stage) for t in self.transforms]

    @property
    def transform(self) -> Compose:
        return Compose(*self.transforms)

    def append_transform(self, transform: Transform) -> TransformedEnv:
        """Add ``transform`` (or each transform of a ``Compose``) at the end; returns ``self``."""
        if isinstance(transform, Compose):
            for inner in transform:
                self.append_transform(inner)
            return self
        from reap.envs.transforms.from_torchrl import as_reap_transform  # it imports this module

        transform = as_reap_transform(transform, "append_transform")
        transform.set_container(self)
        root_after = transform.transform_root_specs(self._root.logical_specs())
        next_after = transform.transform_next_specs(self._next.logical_specs())
        moves, replaced = transform.key_moves(), tuple(transform.replaced_keys())
        for key in FLAG_KEYS:
            if key not in next_after or key in moves.values() or key in replaced:
                raise ValueError(
                    f"{type(transform).__name__}: the done flags ({', '.join(FLAG_KEYS)}) must stay "
                    "as they are; the collector reads them"
                )
        if self.action_key not in root_after or self.action_key in replaced:
            raise ValueError(f"{type(transform).__name__}: the action entry {self.action_key!r} must stay")
        reads = tuple(transform.reads_inputs())
        self._root.add_stage(root_after, moves, replaced, reads)
        self._next.add_stage(next_after, moves, replaced, reads)
        obs = [next((new for new, old in moves.items() if old == k), k) for k in self._obs_keys]
        self._obs_keys = [k for k in transform.observation_keys(obs) if k in root_after]
        stage = len(self._root.stages) - 1
        self._state_logical = [*self._state_logical, *((stage, k) for k in transform.state_keys())]
        self.transforms.append(transform)
        transform._stage = stage
        self._finish()
        self.layout_version = getattr(self, "layout_version", 0) + 1
        return self

    def insert_transform(self, index: int, transform: Transform) -> TransformedEnv:
        """Insert ``transform`` at ``index`` of the chain; returns ``self``."""
        from reap.envs.transforms.from_torchrl import as_reap_transform  # it imports this module

        transform = as_reap_transform(transform, "insert_transform")
        if not -len(self.transforms) - 1 <= index <= len(self.transforms):
            raise IndexError(
                f"insert_transform: index {index} is out of range for {len(self.transforms)} transforms"
            )
        chain = list(self.transforms)
        chain.insert(index if index >= 0 else len(chain) + 1 + index, transform)
        self.transforms = []
        self._restart()
        for t in chain:
            self.append_transform(t)
        return self

    # ---- specs as seen after the transforms ----------------------------------------------
    @property
    def observation_spec(self) -> Composite:
        return Composite({k: self._root_specs[k] for k in self._obs_keys}, shape=self.batch_size)

    @observation_spec.setter
    def observation_spec(self, value):  # EnvBase.__init__ assigns a default
        pass

    @property
    def action_spec(self):
        return self._root_specs[self.action_key]

    @action_spec.setter
    def action_spec(self, value):
        pass

    @property
    def reward_spec(self):
        return self._next_specs["reward"]

    @reward_spec.setter
    def reward_spec(self, value):
        pass

    def root_specs(self):
        return dict(self._root_specs)

    def next_specs(self):
        return dict(self._next_specs)

    @property
    def state_keys(self):
        return self._state_keys

    @property
    def passthrough_keys(self) -> tuple:
        keys = list(self.base_env.passthrough_keys)
        for transform in self.transforms:
            keys.extend(k for k in transform.passthrough_keys() if k not in keys)
        return tuple(k for k in keys if k in self._state_keys)

    # ---- the hot path ----------------------------------------------------------------------
    def _views(self, root: dict, nxt: dict | None = None) -> list:
        """Per stage, the (root, next) dicts under that stage's keys: built once per layout."""
        cached = self._view_cache.get(id(root))
        if cached is not None and cached[0] is root and (nxt is None or cached[1] is nxt):
            return cached[2]
        if len(self._view_cache) > 4:  # the TensorDict API allocates new arrays per call
            self._view_cache.clear()
        views = []
        for j, identity in enumerate(self._identity):
            if identity:
                views.append((root, nxt))
                continue
            r = self._stage_view(self._root, self._root_names, j, root)
            x = None if nxt is None else self._stage_view(self._next, self._next_names, j, nxt)
            views.append((r, x))
        self._view_cache[id(root)] = (root, nxt, views)
        return views

    @staticmethod
    def _stage_view(side: _Side, names, j: int, arrays: dict) -> dict:
        view = {k: arrays[names[i]] for k, i in side.stages[j].items()}
        view.update({k: arrays[names[i]] for k, i in side.inputs[j].items()})
        return view

    def _reset_upto(self, stage: int, t: int, mask, views: list) -> None:
        self.base_env._reset_into(views[0][0], t, mask)
        chain = self._on_reset if stage == len(self.transforms) else self._on_reset[:stage]
        for on_reset, index in chain:
            on_reset(views[index][0], t, mask)

    def _step_upto(self, stage: int, action, t: int, views: list) -> None:
        self._active_views = views  # what FrameSkipTransform repeats
        self._active_action = action
        root, nxt = views[0]
        if self._step_mask is None:
            self.base_env._step_into(action, t, root, nxt)
        else:
            self.base_env._partial_step_into(action, t, root, nxt, self._step_mask)
        chain = self._on_step if stage == len(self.transforms) else self._on_step[:stage]
        for on_step, index in chain:
            r, x = views[index]
            on_step(r, x, t)

    def _reset_into(self, root, t, mask):
        views = self._views(root)
        self._active_root, self._active_views = root, views
        self._reset_upto(len(self.transforms), t, mask, views)

    def _step_into(self, action, t, root, nxt):
        views = self._views(root, nxt)
        self._step_upto(len(self.transforms), action, t, views)

    def _partial_step_into(self, action, t, root, nxt, mask):
        # the base env steps what it can of the batch (repeats by FrameSkipTransform too); the
        # transforms run on every row, as TorchRL's do on the zeros of the envs not stepped
        self._step_mask = mask
        try:
            self._step_into(action, t, root, nxt)
        finally:
            self._step_mask = None

    def _set_seed(self, seed):
        self.base_env._set_seed(seed)

    def state_dict(self) -> dict:
        state = {f"transforms.{i}": t.state_dict() for i, t in enumerate(self.transforms)}
        state = {k: v for k, v in state.items() if v}
        base = self.base_env.state_dict()
        if base:
            state["base_env"] = base
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        for key, value in state_dict.items():
            if key == "base_env":
                self.base_env.load_state_dict(value)
            else:
                self.transforms[int(key.split(".")[1])].load_state_dict(value)

    def close(self):
        self.base_env.close()
        super().close()

    def __repr__(self):
        return f"TransformedEnv(env={self.base_env!r}, transforms={self.transforms})"
