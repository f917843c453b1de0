"""A reap env seen from gymnasium: what ``EnvBase.register_gym`` registers.

``ReapGymEnv`` is a ``gymnasium.Env`` that runs a reap env: its spaces come from the env's specs
(:func:`spec_to_space`, the inverse of ``reap.envs.gym.space_to_spec``), ``reset`` and ``step``
return gymnasium's tuples. The observation is a dict of the env's observation entries (nested
as their keys, as TorchRL gives it), each in its space's form (a ``OneHot`` entry as
its ``Discrete`` index); ``info_keys`` entries go to ``info`` instead of the observation; a
one-element reward is a ``float`` and one-element flags are ``bool``s; the other values are
tensors, or NumPy arrays with ``to_numpy=True`` (what gymnasium's env checker expects).

Examples:
    >>> import gymnasium
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import StepCounter
    >>> GymEnv.register_gym("reap/Pendulum-v1", env_name="Pendulum-v1", to_numpy=True)
    >>> env = gymnasium.make("reap/Pendulum-v1")
    >>> obs, info = env.reset(seed=0)
    >>> obs["observation"].shape, env.action_space
    ((3,), Box(-2.0, 2.0, (1,), float32))
    >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    >>> type(reward), terminated
    (<class 'float'>, False)
    >>> env = gymnasium.make("reap/Pendulum-v1", transform=StepCounter(), info_keys=["step_count"])
    >>> env.reset(seed=0)[1]
    {'step_count': array([0])}
    >>> env.close()
    >>> del gymnasium.registry["reap/Pendulum-v1"]
"""

from __future__ import annotations

import gymnasium
import numpy as np
import torch
from tensordict import TensorDictBase
from tensordict.utils import unravel_key

from reap.envs.transforms import TransformedEnv
from reap.specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    TensorSpec,
    Unbounded,
)

__all__ = ["ReapGymEnv", "spec_to_space"]

_SUPPORTED = "Bounded, Unbounded, Categorical, OneHot, MultiCategorical, MultiOneHot, Binary, Composite"


def _np_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty((), dtype=dtype).numpy().dtype


def _integer_dtype(dtype: torch.dtype, default=np.int64) -> np.dtype:
    """``dtype`` as NumPy's when it is an integer one (what ``Discrete`` spaces take), else ``default``."""
    np_dtype = _np_dtype(dtype)
    return np_dtype if np.issubdtype(np_dtype, np.integer) else np.dtype(default)


def _discrete(n: int, shape, dtype) -> gymnasium.Space:
    """``Discrete(n)`` for one index, ``MultiDiscrete`` (``n`` everywhere) for an array of them."""
    if int(np.prod(shape, dtype=np.int64)) == 1:
        return gymnasium.spaces.Discrete(n, dtype=dtype)
    return gymnasium.spaces.MultiDiscrete(np.full(tuple(shape), n), dtype=dtype)


def spec_to_space(spec: TensorSpec) -> gymnasium.Space:
    """The gymnasium space of a reap spec (the inverse of ``reap.envs.gym.space_to_spec``).

    ``Bounded`` and ``Unbounded`` are ``Box``es (an unbounded integer spec spans its dtype);
    ``Categorical`` and ``OneHot`` are ``Discrete`` (``MultiDiscrete`` when the spec holds
    several indices, e.g. a batch); ``MultiCategorical``/``MultiOneHot`` are ``MultiDiscrete``;
    ``Binary`` is ``MultiBinary``; ``Composite`` is a ``Dict`` (nested). Shapes are the specs'
    (batch dims included).
    """
    if isinstance(spec, Composite):
        return gymnasium.spaces.Dict({key: spec_to_space(sub) for key, sub in spec.items() if sub is not None})
    if isinstance(spec, Binary):
        return gymnasium.spaces.MultiBinary(spec.shape[0] if spec.ndim == 1 else list(spec.shape))
    if isinstance(spec, MultiCategorical):
        nvec = spec.nvec.expand(spec.shape).numpy(force=True)
        return gymnasium.spaces.MultiDiscrete(nvec, dtype=_integer_dtype(spec.dtype))
    if isinstance(spec, Categorical):
        return _discrete(spec.n, spec.shape, _integer_dtype(spec.dtype))
    if isinstance(spec, MultiOneHot):
        nvec = np.broadcast_to(np.asarray(list(spec.nvec)), (*spec.shape[:-1], len(spec.nvec)))
        return gymnasium.spaces.MultiDiscrete(nvec.copy())
    if isinstance(spec, OneHot):
        return _discrete(spec.n, spec.shape[:-1], np.int64)
    if isinstance(spec, Bounded):
        return gymnasium.spaces.Box(spec.low.numpy(force=True), spec.high.numpy(force=True),
                                    shape=tuple(spec.shape), dtype=_np_dtype(spec.dtype))
    if isinstance(spec, Unbounded):
        dtype = _np_dtype(spec.dtype)
        if dtype == np.bool_:
            low, high = False, True
        elif np.issubdtype(dtype, np.integer):
            low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
        else:
            low, high = -np.inf, np.inf
        return gymnasium.spaces.Box(low, high, shape=tuple(spec.shape), dtype=dtype)
    raise TypeError(f"spec_to_space: {type(spec).__name__} specs have no gymnasium space; "
                    f"supported: {_SUPPORTED}")


def _to_space_form(spec: TensorSpec, space: gymnasium.Space, value: torch.Tensor) -> torch.Tensor:
    """A spec's value as its space holds it: one-hot vectors as indices, shaped as the space."""
    if isinstance(spec, OneHot):  # MultiOneHot too
        value = spec.to_categorical(value, safe=False)
    return value.reshape(space.shape)


def _to_spec_form(spec: TensorSpec, value) -> torch.Tensor:
    """A space's value (NumPy, number or tensor) as the spec holds it (a one-hot spec's index: encoded)."""
    value = torch.as_tensor(value, device=spec.device)
    if isinstance(spec, OneHot) and value.shape != spec.shape:  # an index, not a one-hot vector
        value = spec.encode(value.reshape(*spec.shape[:-1], -1))
    return value.to(spec.dtype).reshape(spec.shape)


def _nest(flat: dict) -> dict:
    """``{("a", "b"): v, "c": w}`` as ``{"a": {"b": v}, "c": w}``."""
    out: dict = {}
    for key, value in flat.items():
        *path, last = (key,) if isinstance(key, str) else key
        node = out
        for name in path:
            node = node.setdefault(name, {})
        node[last] = value
    return out


class ReapGymEnv(gymnasium.Env):
    """A reap env behind gymnasium's ``Env`` API (TorchRL's ``_TorchRLGymnasiumWrapper``).

    Args:
        entry_point: builds the reap env: ``entry_point(**kwargs)``.
        transform: a transform (or a ``Compose``) the env is wrapped with (``TransformedEnv``).
        info_keys: entries given in ``info`` rather than in the observation (nested keys as
            tuples; a key covers the entries below it).
        to_numpy: observation and info values (and a reward or flags of several elements) as
            NumPy arrays rather than tensors.
        **kwargs: passed to ``entry_point``.

    The observation space is a ``Dict`` of the observation entries, nested as their keys (as
    TorchRL's). The action space is the action's, a ``Dict`` for several action keys (``step``
    then takes a nested dict). ``reset(seed=s)`` is ``env.set_seed(s)``
    then ``env.reset(**options)``, as in TorchRL.
    """

    def __init__(self, entry_point, transform=None, info_keys=None, to_numpy: bool = False, **kwargs):
        super().__init__()
        env = entry_point(**kwargs)
        if transform is not None:
            env = TransformedEnv(env, transform)
        self.reap_env = env
        self.to_numpy = to_numpy
        self.info_keys = [unravel_key(key) for key in (info_keys or ())]
        self._info_paths = [(key,) if isinstance(key, str) else key for key in self.info_keys]
        obs_spec = env.full_observation_spec
        self._obs_keys = [key for key in obs_spec.keys(True, True) if not self._is_info(key)]
        self._obs_specs = {key: obs_spec[key] for key in self._obs_keys}
        self._obs_spaces = {}
        for key, spec in self._obs_specs.items():
            try:
                self._obs_spaces[key] = spec_to_space(spec)
            except TypeError as err:
                raise TypeError(f"ReapGymEnv: observation {key!r}: {err}; give it in info (info_keys=) or "
                                "leave it out with a transform (ExcludeTransform)") from err
        self.observation_space = self._joined(self._obs_spaces, gymnasium.spaces.Dict, always=True)
        self._action_specs = {key: env.full_action_spec[key] for key in env.action_keys}
        self._action_spaces = {key: spec_to_space(spec) for key, spec in self._action_specs.items()}
        self.action_space = self._joined(self._action_spaces, gymnasium.spaces.Dict)
        self._reward_key = env.reward_key
        done_keys = env.done_keys
        self._terminated_key = next((k for k in ("terminated", "done") if k in done_keys), done_keys[0])
        self._truncated_key = "truncated" if "truncated" in done_keys else None
        self._td: TensorDictBase | None = None

    @property
    def torchrl_env(self):
        """The reap env (TorchRL's attribute name)."""
        return self.reap_env

    def seed(self, seed: int):
        """Seed the reap env (TorchRL's wrapper method); returns ``set_seed``'s next seed."""
        return self.reap_env.set_seed(seed)

    def _is_info(self, key) -> bool:
        key = (key,) if isinstance(key, str) else key
        return any(key[:len(path)] == path for path in self._info_paths)

    def _joined(self, by_key: dict, as_dict, always: bool = False):
        """The entries as a nested dict (``as_dict`` of it); a single one itself unless ``always``."""
        if len(by_key) == 1 and not always:
            return next(iter(by_key.values()))
        nested = _nest(by_key)

        def build(node):
            return as_dict({k: build(v) if isinstance(v, dict) else v for k, v in node.items()})

        return build(nested)

    def _out(self, value):
        if isinstance(value, torch.Tensor):
            return value.numpy(force=True) if self.to_numpy else value
        if isinstance(value, TensorDictBase):
            return {k: self._out(v) for k, v in value.items()}
        return value

    def _observation(self, td: TensorDictBase):
        values = {}
        for key in self._obs_keys:
            space = self._obs_spaces[key]
            value = self._out(_to_space_form(self._obs_specs[key], space, td.get(key)))
            if isinstance(space, gymnasium.spaces.Discrete) and isinstance(value, np.ndarray):
                value = space.dtype.type(value)  # an np.int64, as gymnasium's Discrete envs give
            values[key] = value
        return self._joined(values, dict, always=True)

    def _info(self, td: TensorDictBase) -> dict:
        return _nest({key: self._out(td.get(key)) for key in self.info_keys if key in td.keys(True)})

    def _scalar(self, value: torch.Tensor, kind):
        return kind(value.item()) if value.numel() == 1 else self._out(value)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """``(observation, info)`` of a new episode; ``options`` are keywords of the env's ``reset``."""
        super().reset(seed=seed)
        if seed is not None:
            self.reap_env.set_seed(seed)
        self._td = self.reap_env.reset(**(options or {}))
        return self._observation(self._td), self._info(self._td)

    def step(self, action):
        """``(observation, reward, terminated, truncated, info)`` after ``action``."""
        if self._td is None:
            raise RuntimeError("ReapGymEnv.step: call reset() first")
        td = self._td
        if len(self._action_specs) == 1:
            key, spec = next(iter(self._action_specs.items()))
            td.set(key, _to_spec_form(spec, action))
        else:
            for key, spec in self._action_specs.items():
                value = action
                for name in (key,) if isinstance(key, str) else key:
                    value = value[name]
                td.set(key, _to_spec_form(spec, value))
        td = self.reap_env.step(td)
        nxt = td.get("next")
        terminated = self._scalar(nxt.get(self._terminated_key), bool)
        truncated = False if self._truncated_key is None else self._scalar(nxt.get(self._truncated_key), bool)
        out = (self._observation(nxt), self._scalar(nxt.get(self._reward_key), float), terminated, truncated,
               self._info(nxt))
        self._td = self.reap_env.step_mdp(td)
        return out

    def close(self) -> None:
        """Close the reap env."""
        if not getattr(self.reap_env, "is_closed", False):
            self.reap_env.close()
