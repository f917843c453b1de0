"""Transforms: ``TransformedEnv`` and the transforms TorchRL's PPO examples use.

A transform acts on the step arrays in place, right after the base env wrote them:
``on_reset(root, t, mask)`` and ``on_step(root, nxt, t)``. It may add keys (``root_specs`` /
``next_specs``) and carried state (``state_keys``).

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
import torch

from reap.envs.base import EnvBase
from reap.specs import Bounded, Composite, TensorSpec, Unbounded


class Transform:
    """Base transform: does nothing; subclasses override what they need."""

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
                f"(it has {sorted(set(env.root_specs()) | set(env.next_specs()))})"
            )

    def default_in_keys(self, env: EnvBase) -> list[str]:
        return [k for k in env.observation_spec.keys()]

    def transform_root_specs(self, specs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
        return specs

    def transform_next_specs(self, specs: dict[str, TensorSpec]) -> dict[str, TensorSpec]:
        return specs

    def state_keys(self) -> tuple[str, ...]:
        return ()

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


class TransformedEnv(EnvBase):
    """An env whose steps pass through ``transform`` (one, or a ``Compose``).

    Args:
        env: the base env.
        transform: a ``Transform``; more can be added with ``append_transform``.
    """

    def __init__(self, env: EnvBase, transform: Transform | None = None):
        if not isinstance(env, EnvBase):
            raise TypeError(f"TransformedEnv: env must be a reap EnvBase, got {type(env).__name__}")
        super().__init__(batch_size=env.batch_size, device=env.device)
        self.base_env = env
        self.transforms: list[Transform] = []
        self._root_specs = env.root_specs()
        self._next_specs = env.next_specs()
        self._state_keys = tuple(env.state_keys)
        if transform is not None:
            self.append_transform(transform)

    @property
    def transform(self) -> Compose:
        return Compose(*self.transforms)

    def append_transform(self, transform: Transform) -> TransformedEnv:
        if isinstance(transform, Compose):
            for inner in transform:
                self.append_transform(inner)
            return self
        if not isinstance(transform, Transform):
            raise TypeError(f"append_transform: expected a Transform, got {type(transform).__name__}")
        transform.set_container(self)
        self._root_specs = transform.transform_root_specs(dict(self._root_specs))
        self._next_specs = transform.transform_next_specs(dict(self._next_specs))
        self._state_keys = self._state_keys + tuple(
            k for k in transform.state_keys() if k not in self._state_keys
        )
        self.transforms.append(transform)
        return self

    # specs as seen after the transforms
    @property
    def observation_spec(self) -> Composite:
        keys = self.base_env.observation_spec.keys()
        return Composite({k: self._root_specs[k] for k in keys}, shape=self.batch_size)

    @observation_spec.setter
    def observation_spec(self, value):  # EnvBase.__init__ assigns a default
        pass

    @property
    def action_spec(self):
        return self.base_env.action_spec

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

    def _reset_into(self, root, t, mask):
        self.base_env._reset_into(root, t, mask)
        for transform in self.transforms:
            transform.on_reset(root, t, mask)

    def _step_into(self, action, t, root, nxt):
        self.base_env._step_into(action, t, root, nxt)
        for transform in self.transforms:
            transform.on_step(root, nxt, t)

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


class StepCounter(Transform):
    """Count steps per trajectory in ``step_count``; truncate at ``max_steps`` when given."""

    def __init__(self, max_steps: int | None = None, *, step_count_key: str = "step_count"):
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(f"StepCounter: max_steps must be a positive int or None, got {max_steps!r}")
        super().__init__(in_keys=[])
        self.max_steps = max_steps
        self.key = step_count_key

    def _spec(self, specs):
        batch = self.parent.batch_size
        return Unbounded(shape=(*batch, 1), dtype=torch.int64)

    def transform_root_specs(self, specs):
        specs[self.key] = self._spec(specs)
        return specs

    def transform_next_specs(self, specs):
        specs[self.key] = self._spec(specs)
        return specs

    def state_keys(self):
        return (self.key,)

    def on_reset(self, root, t, mask):
        if mask is None or mask.ndim == 0:
            root[self.key][t] = 0
        else:
            root[self.key][t][mask] = 0

    def on_step(self, root, nxt, t):
        count = nxt[self.key][t]
        np.add(root[self.key][t], 1, out=count)
        if self.max_steps is not None:
            hit = count >= self.max_steps
            np.logical_or(nxt["truncated"][t], hit, out=nxt["truncated"][t])
            np.logical_or(nxt["done"][t], hit, out=nxt["done"][t])


class RewardSum(Transform):
    """Accumulate the reward of each trajectory in ``episode_reward``."""

    def __init__(self, in_keys=("reward",), out_keys=("episode_reward",)):
        super().__init__(in_keys=in_keys)
        self.out_keys = list(out_keys)

    def transform_root_specs(self, specs):
        for src, dst in zip(self.in_keys, self.out_keys):
            specs[dst] = Unbounded(shape=self.parent.next_specs()[src].shape)
        return specs

    def transform_next_specs(self, specs):
        for src, dst in zip(self.in_keys, self.out_keys):
            specs[dst] = Unbounded(shape=specs[src].shape)
        return specs

    def state_keys(self):
        return tuple(self.out_keys)

    def on_reset(self, root, t, mask):
        for key in self.out_keys:
            if mask is None or mask.ndim == 0:
                root[key][t] = 0
            else:
                root[key][t][mask] = 0

    def on_step(self, root, nxt, t):
        for src, dst in zip(self.in_keys, self.out_keys):
            np.add(root[dst][t], nxt[src][t], out=nxt[dst][t])


class DoubleToFloat(Transform):
    """Store float64 observations (and reward) as float32."""

    def default_in_keys(self, env):
        specs = {**env.root_specs(), **env.next_specs()}
        return [k for k, v in specs.items() if v.dtype == torch.float64]

    def _convert(self, specs):
        for key in self.in_keys:
            if key in specs and specs[key].dtype == torch.float64:
                spec = specs[key]
                if isinstance(spec, Bounded):
                    specs[key] = Bounded(spec.low.float(), spec.high.float(), shape=spec.shape)
                else:
                    specs[key] = Unbounded(shape=spec.shape, dtype=torch.float32)
        return specs

    # the arrays are allocated from these specs, so the base env's writes cast on the fly
    transform_root_specs = _convert
    transform_next_specs = _convert


class ClipTransform(Transform):
    """Clip ``in_keys`` (observations by default) to ``[low, high]``."""

    def __init__(self, in_keys=None, *, low: float | None = None, high: float | None = None):
        if low is None and high is None:
            raise ValueError("ClipTransform: give low, high or both")
        if low is not None and high is not None and low > high:
            raise ValueError(f"ClipTransform: low={low} must not exceed high={high}")
        super().__init__(in_keys=in_keys)
        self.low, self.high = low, high

    def _clip(self, array):
        np.clip(array, self.low, self.high, out=array)

    def on_reset(self, root, t, mask):
        for key in self.in_keys:
            if key in root:
                self._clip(root[key][t])

    def on_step(self, root, nxt, t):
        for key in self.in_keys:
            if key in nxt:
                self._clip(nxt[key][t])


class ObservationNorm(Transform):
    """``(obs - loc) / scale`` (or ``obs * scale + loc`` with ``standard_normal=False``).

    ``init_stats(num_iter)`` estimates loc and scale from a random rollout of the parent.
    """

    def __init__(self, loc=None, scale=None, in_keys=None, *, standard_normal: bool = True,
                 eps: float = 1e-6):
        super().__init__(in_keys=in_keys)
        self.loc = None if loc is None else torch.as_tensor(loc, dtype=torch.float32)
        self.scale = None if scale is None else torch.as_tensor(scale, dtype=torch.float32)
        self.standard_normal = standard_normal
        self.eps = eps

    @property
    def initialized(self) -> bool:
        return self.loc is not None and self.scale is not None

    def init_stats(self, num_iter: int, reduce_dim=0, cat_dim=0, key=None) -> None:
        """Estimate ``loc`` and ``scale`` from ``num_iter`` random steps of the parent env."""
        if self.parent is None:
            raise RuntimeError("ObservationNorm.init_stats: add the transform to a TransformedEnv first")
        key = key or self.in_keys[0]
        base = self.parent.base_env
        data = base.rollout(num_iter, break_when_any_done=False)["next", key]
        data = data.reshape(-1, *data.shape[len(base.batch_size) + 1:]).float()
        self.loc = data.mean(0)
        self.scale = data.std(0).clamp_min(self.eps)

    def state_dict(self) -> dict:
        return {} if not self.initialized else {"loc": self.loc.clone(), "scale": self.scale.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.loc, self.scale = state["loc"].clone(), state["scale"].clone()

    def _apply(self, array):
        if not self.initialized:
            raise RuntimeError(
                "ObservationNorm: loc and scale are not set; pass them or call init_stats() first"
            )
        loc, scale = self.loc.numpy(), self.scale.numpy()
        if self.standard_normal:
            np.subtract(array, loc, out=array)
            np.divide(array, scale, out=array)
        else:
            np.multiply(array, scale, out=array)
            np.add(array, loc, out=array)

    def on_reset(self, root, t, mask):
        for key in self.in_keys:
            if mask is None or mask.ndim == 0:
                self._apply(root[key][t])
            else:
                rows = root[key][t][mask]
                self._apply(rows)
                root[key][t][mask] = rows

    def on_step(self, root, nxt, t):
        for key in self.in_keys:
            self._apply(nxt[key][t])


class VecNorm(Transform):
    """Normalise observations with running, exponentially decayed statistics.

    The statistics live in torch tensors; ``share_memory()`` moves them to shared memory so that
    every worker of a multi-process collector updates and reads the same ones.
    """

    def __init__(self, in_keys=None, *, decay: float = 0.9999, eps: float = 1e-4,
                 shared_data: dict | None = None):
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"VecNorm: decay must be in (0, 1], got {decay}")
        super().__init__(in_keys=in_keys)
        self.decay, self.eps = decay, eps
        self._stats: dict[str, dict[str, torch.Tensor]] = shared_data or {}
        self._shared = False
        self._np: dict[str, dict[str, np.ndarray]] = {}

    def set_container(self, env):
        super().set_container(env)
        batch = len(env.batch_size)
        for key in self.in_keys:
            if key not in self._stats:
                shape = env.root_specs()[key].shape[batch:]
                self._stats[key] = {
                    "sum": torch.zeros(shape, dtype=torch.float64),
                    "ssq": torch.zeros(shape, dtype=torch.float64),
                    "count": torch.zeros((), dtype=torch.float64),
                }
        if self._shared:
            self.share_memory()
        self._bind_arrays()

    def _bind_arrays(self) -> None:
        self._np = {k: {n: v.numpy() for n, v in d.items()} for k, d in self._stats.items()}

    def share_memory(self) -> VecNorm:
        """Move the statistics to shared memory (now, and for keys created later)."""
        self._shared = True
        for stats in self._stats.values():
            for tensor in stats.values():
                tensor.share_memory_()
        self._bind_arrays()  # share_memory_ moves the storage: re-point the numpy views
        return self

    def get_extra_state(self) -> dict:
        """The statistics, to share with another VecNorm (``shared_data=``)."""
        return self._stats

    def state_dict(self) -> dict:
        return {f"{k}.{n}": v.clone() for k, d in self._stats.items() for n, v in d.items()}

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            key, _, stat = name.rpartition(".")
            self._stats[key][stat].copy_(value)

    def _update_and_normalize(self, key, array):
        stats = self._np[key]
        flat = array.reshape(-1, *stats["sum"].shape)
        stats["sum"] *= self.decay
        stats["ssq"] *= self.decay
        stats["count"] *= self.decay
        stats["sum"] += flat.sum(0)
        stats["ssq"] += np.square(flat, dtype=np.float64).sum(0)
        stats["count"] += flat.shape[0]
        mean = stats["sum"] / stats["count"]
        var = np.maximum(stats["ssq"] / stats["count"] - mean * mean, 0.0)
        std = np.maximum(np.sqrt(var), self.eps)
        array[...] = (array - mean) / std

    def on_reset(self, root, t, mask):
        for key in self.in_keys:
            if mask is None or mask.ndim == 0:
                self._update_and_normalize(key, root[key][t])
            else:
                rows = root[key][t][mask]
                self._update_and_normalize(key, rows)
                root[key][t][mask] = rows

    def on_step(self, root, nxt, t):
        for key in self.in_keys:
            self._update_and_normalize(key, nxt[key][t])

    def to_observation_norm(self) -> ObservationNorm:
        """A frozen ``ObservationNorm`` with the current statistics (for evaluation)."""
        norms = []
        for key in self.in_keys:
            stats = self._stats[key]
            mean = stats["sum"] / stats["count"]
            std = (stats["ssq"] / stats["count"] - mean**2).clamp_min(0).sqrt().clamp_min(self.eps)
            norms.append(ObservationNorm(mean.float(), std.float(), in_keys=[key]))
        return norms[0] if len(norms) == 1 else Compose(*norms)


class InitTracker(Transform):
    """Write ``is_init``: True at the step where a trajectory starts (after every reset).

    Recurrent policies read it to restart their hidden state. ``("next", "is_init")`` is False.

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import InitTracker, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), InitTracker())
        >>> env.rollout(3)["is_init"].flatten().tolist()
        [True, False, False]
    """

    def __init__(self, init_key: str = "is_init"):
        if not isinstance(init_key, str):
            raise TypeError(f"InitTracker: init_key must be a string, got {init_key!r}")
        super().__init__(in_keys=[])
        self.init_key = init_key

    def _add(self, specs):
        specs[self.init_key] = Unbounded(shape=(*self.parent.batch_size, 1), dtype=torch.bool)
        return specs

    transform_root_specs = transform_next_specs = _add

    def state_keys(self):
        return (self.init_key,)

    def on_reset(self, root, t, mask):
        if mask is None or mask.ndim == 0:
            root[self.init_key][t] = True
        else:
            root[self.init_key][t][mask] = True

    def on_step(self, root, nxt, t):
        nxt[self.init_key][t] = False


class TensorDictPrimer(Transform):
    """Add entries (e.g. a recurrent policy's hidden states) that the env resets to a default.

    Each key is allocated on the root and ``"next"`` sides from its spec, set to
    ``default_value`` at every reset, and carried from ``("next", key)`` to the next step's
    root, where the policy writes it (``LSTMModule`` writes ``("next", "recurrent_state_h")``).
    Specs omit the env's batch dims when ``expand_specs=True`` (the default).

    Examples:
        >>> from reap.envs import GymEnv
        >>> from reap.envs.transforms import TensorDictPrimer, TransformedEnv
        >>> from reap.specs import Unbounded
        >>> env = TransformedEnv(GymEnv("Pendulum-v1", num_envs=2),
        ...                      TensorDictPrimer({"hidden": Unbounded(shape=(1, 8))}))
        >>> env.reset()["hidden"].shape
        torch.Size([2, 1, 8])
    """

    def __init__(self, primers=None, *, default_value: float = 0.0, expand_specs: bool = True,
                 **kwargs):
        primers = dict(primers.items() if primers is not None else {}, **kwargs)
        if not primers:
            raise ValueError("TensorDictPrimer: give at least one key and its spec")
        for key, spec in primers.items():
            if not isinstance(key, str):
                raise TypeError(f"TensorDictPrimer: keys must be plain strings (reap's flat keys), got {key!r}")
            if not isinstance(spec, TensorSpec):
                raise TypeError(f"TensorDictPrimer: the spec of {key!r} must be a TensorSpec, got {spec!r}")
        super().__init__(in_keys=[])
        self.primers = primers
        self.default_value = default_value
        self.expand_specs = expand_specs

    def _add(self, specs):
        batch = tuple(self.parent.batch_size)
        for key, spec in self.primers.items():
            if self.expand_specs:
                spec = spec.expand(*batch)
            elif tuple(spec.shape[: len(batch)]) != batch:
                raise ValueError(
                    f"TensorDictPrimer: the spec of {key!r} has shape {tuple(spec.shape)}, which does not "
                    f"start with the env's batch dims {batch}; pass expand_specs=True"
                )
            specs[key] = spec
        return specs

    transform_root_specs = transform_next_specs = _add

    def state_keys(self):
        return tuple(self.primers)

    def on_reset(self, root, t, mask):
        for key in self.primers:
            if mask is None or mask.ndim == 0:
                root[key][t] = self.default_value
            else:
                root[key][t][mask] = self.default_value
