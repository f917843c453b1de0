"""``GymEnv``: a gymnasium environment (or vector environment) behind reap's env protocol.

It takes TorchRL's ``GymEnv`` keywords and gives TorchRL's specs: a ``Discrete`` space is a
``OneHot`` spec unless ``categorical_action_encoding=True`` (then ``Categorical``), and the env
turns one-hot actions into indices before ``gym.step`` in a buffer it keeps; ``frame_skip``
repeats each action, summing the rewards and stopping at done; ``from_pixels=True`` adds the
rendered frame as ``"pixels"`` (alone when ``pixels_only``); a ``Dict`` observation's ``"state"``
is ``"observation"``.

Vector envs run with gymnasium's autoreset disabled: reap resets finished sub-envs itself
(``reset_mask``), so ``("next", "observation")`` is always the true final observation and
truncations added by transforms or ``max_frames_per_traj`` reset the env too. A vector env
instance built with ``AutoresetMode.SAME_STEP`` is taken as TorchRL takes it: the final
observation (gymnasium's ``info["final_obs"]``) is ``("next", "observation")``, and the
observation the vector env reset to is what reap's reset of that sub-env returns.
``GymEnv(env_id, num_workers=n)`` with ``n > 1`` is, as in TorchRL, a ``ParallelEnv`` of ``n``
such envs (reap-collectors-mp).

Examples:
    >>> from reap.envs import GymEnv
    >>> env = GymEnv("Pendulum-v1", num_envs=2)
    >>> env.rollout(3)["next", "observation"].shape
    torch.Size([2, 3, 3])
    >>> env.close()
    >>> type(GymEnv("CartPole-v1").action_spec).__name__
    'OneHot'
    >>> GymEnv("CartPole-v1", categorical_action_encoding=True).action_spec.shape
    torch.Size([])
"""

from __future__ import annotations

import difflib
import functools
import inspect

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.registration import load_env_creator
from tensordict import TensorDict

from reap.envs.base import EnvBase
from reap.envs.gym_info import BaseInfoDictReader, _autoreset_info_reader, default_info_dict_reader
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

_TORCH_DTYPES = {
    np.dtype("float32"): torch.float32,
    np.dtype("float64"): torch.float64,
    np.dtype("int64"): torch.int64,
    np.dtype("int32"): torch.int32,
    np.dtype("int8"): torch.int8,
    np.dtype("uint8"): torch.uint8,
    np.dtype("bool"): torch.bool,
}

#: TorchRL's GymEnv (and EnvBase) keywords reap takes at these values only, and what to do instead.
_TORCHRL_ONLY = {
    "convert_actions_to_numpy": ((True,), "gymnasium envs take NumPy actions, which reap gives them"),
    "num_workers": ((1,), "GymWrapper wraps one env instance; GymEnv(env_id, num_workers=n) runs n processes"),
    "native_autoreset": ((False,), "reap resets finished sub-envs itself"),
    "missing_obs_value": ((None,), "reap resets finished sub-envs itself, so no observation is missing"),
    "auto_reset": ((False,), "reap's rollout() and collectors reset done envs themselves"),
    "compile": ((None, False), "gymnasium steps outside torch; compile the policy (compile_with_warmup)"),
    "spec_locked": ((True, False), ""),  # reap's specs are never locked: either value holds
}


def space_to_spec(space: gym.Space, batch=(), categorical_action_encoding: bool = False) -> TensorSpec:
    """The reap spec of a single gymnasium space, with batch dims ``batch`` (TorchRL's mapping:
    a ``Discrete`` space is ``OneHot`` unless ``categorical_action_encoding``)."""
    if isinstance(space, gym.spaces.Box):
        dtype = _TORCH_DTYPES[np.dtype(space.dtype)]
        shape = (*batch, *space.shape)
        if np.isfinite(space.low).all() and np.isfinite(space.high).all():
            low = torch.as_tensor(space.low, dtype=dtype).expand(shape)
            high = torch.as_tensor(space.high, dtype=dtype).expand(shape)
            return Bounded(low, high, shape=shape, dtype=dtype)
        return Unbounded(shape=shape, dtype=dtype)
    if isinstance(space, gym.spaces.Discrete):
        if space.start != 0:
            raise ValueError(f"GymEnv: Discrete spaces must start at 0, got start={space.start}")
        if categorical_action_encoding:
            return Categorical(int(space.n), shape=batch, dtype=_TORCH_DTYPES[np.dtype(space.dtype)])
        return OneHot(int(space.n), shape=(*batch, int(space.n)), dtype=torch.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec)
        if nvec.ndim != 1 or np.any(space.start != 0):
            raise TypeError(f"GymEnv: MultiDiscrete spaces must be 1-D and start at 0, got {space!r}; flatten it "
                            "with a gymnasium wrapper of your own")
        if categorical_action_encoding:
            return MultiCategorical(nvec.tolist(), shape=(*batch, len(nvec)), dtype=_TORCH_DTYPES[nvec.dtype])
        return MultiOneHot(nvec.tolist(), shape=(*batch, int(nvec.sum())), dtype=torch.int64)
    if isinstance(space, gym.spaces.MultiBinary):
        return Binary(shape=(*batch, *np.atleast_1d(space.n)), dtype=torch.int8)
    if isinstance(space, gym.spaces.Dict):
        return Composite({key: space_to_spec(sub, batch, categorical_action_encoding) for key, sub in space.items()},
                         shape=batch)
    raise TypeError(
        f"GymEnv: gymnasium space {space!r} is not supported; use Box, Discrete, MultiDiscrete, MultiBinary "
        "or a Dict of those"
    )


def _offsets(nvec) -> np.ndarray:
    """Where each entry of a multi-one-hot row starts."""
    return np.concatenate([[0], np.cumsum(nvec)[:-1]]).astype(np.intp)


def _takes_frameskip(env_name: str) -> bool:
    """Whether the env's constructor has its own ``frameskip`` (ALE's), which TorchRL uses."""
    entry_point = gym.spec(env_name).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    try:
        return "frameskip" in inspect.signature(creator).parameters
    except (TypeError, ValueError):
        return False


class _RegisteredIds:
    """``GymEnv.available_envs``: gymnasium's registered ids when read (TorchRL's class attribute)."""

    def __get__(self, instance, owner) -> list[str]:
        return list(gym.registry)


class GymEnv(EnvBase):
    """Wrap a gymnasium env id, ``gym.Env`` or ``gym.vector.VectorEnv``, with TorchRL's keywords.

    Args:
        env_name: a registered gymnasium id (``"CartPole-v1"``), or an env instance.
        num_envs: when given (and not 0, TorchRL's default), a ``SyncVectorEnv`` of that many
            copies (batch ``[num_envs]``).
        num_workers: above 1, ``GymEnv`` returns a ``ParallelEnv`` of that many processes, each
            running this ``GymEnv`` (TorchRL's; needs reap-collectors-mp).
        categorical_action_encoding: ``Discrete`` spaces as ``Categorical`` indices instead of
            ``OneHot`` vectors (TorchRL's default, False).
        from_pixels: add the rendered frame (``render_mode="rgb_array"``) as ``"pixels"``.
        pixels_only: with ``from_pixels``, the frame is the only observation (default: True for
            an env id, False for an env instance, as TorchRL's ``GymEnv`` and ``GymWrapper``).
        frame_skip: repeat each action this many times, summing the rewards and stopping at the
            first done (in any sub-env); envs whose constructor takes ``frameskip`` (ALE) get it
            instead, as in TorchRL.
        device: None or ``"cpu"`` (gymnasium steps on the CPU).
        batch_size: None, or the batch the env has anyway (``()``, or ``(num_envs,)``).
        allow_done_after_reset: taken for TorchRL's signature; gymnasium resets are never done.
            So is ``run_type_checks`` (gymnasium's outputs are written into arrays of the specs'
            dtypes, so they always pass; ``env.run_type_checks`` says what was asked).
            So is ``spec_locked`` (reap's specs are never locked); TorchRL's other keywords
            are refused where reap cannot honour them, with what to do instead
            (``convert_actions_to_numpy=False``, ``auto_reset=True``, ...).
        **kwargs: passed to ``gymnasium.make`` / ``gymnasium.make_vec`` (``disable_env_checker``
            defaults to True, as in TorchRL).
    """

    _refuses_auto_reset = True  # its __init__ refuses the keyword: gymnasium envs do not reset themselves

    available_envs = _RegisteredIds()
    lib = gym  # TorchRL's: the library the env comes from

    def __new__(cls, *args, num_workers: int = 1, **kwargs):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"{cls.__name__}: num_workers must be a positive int, got {num_workers!r}")
        if cls is GymEnv and num_workers > 1:
            # TorchRL's: n processes, each running GymEnv(*args, **kwargs); reap-collectors-mp's
            # ParallelEnv, or an error naming the package to install
            from reap.envs import ParallelEnv

            return ParallelEnv(num_workers, functools.partial(GymEnv, *args, **kwargs))
        if num_workers != 1:
            kwargs["num_workers"] = num_workers  # refused by __init__, with the fix
        return super().__new__(cls, *args, **kwargs)

    @staticmethod
    def get_library_name(env) -> str:
        """The library ``env`` (a gym env instance) comes from: ``"gymnasium"`` (TorchRL's)."""
        if isinstance(getattr(env, "action_space", None), gym.spaces.Space):
            return "gymnasium"
        raise TypeError(f"GymEnv.get_library_name: {env!r} is not a gymnasium env (no gymnasium action_space)")

    def __init__(self, env_name, *, num_envs: int | None = None, categorical_action_encoding: bool = False,
                 from_pixels: bool = False, pixels_only: bool | None = None, frame_skip: int = 1,
                 device=None, batch_size=None, allow_done_after_reset: bool = False, backend=None,
                 run_type_checks: bool = False, **kwargs):
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError(
                f"GymEnv: device={device!r} is not supported, gymnasium steps on the CPU; "
                "leave device at 'cpu' and move batches with the collector's storing_device"
            )
        if num_envs is not None and (isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 0):
            raise ValueError(f"GymEnv: num_envs must be a non-negative int or None, got {num_envs!r}")
        num_envs = num_envs or None  # TorchRL's default, 0: a single env
        if not isinstance(frame_skip, int) or isinstance(frame_skip, bool) or frame_skip < 1:
            raise ValueError(f"GymEnv: frame_skip must be a positive int, got {frame_skip!r}")
        if backend not in (None, "gymnasium"):
            raise ValueError(f"GymEnv: backend={backend!r} is not supported; reap wraps gymnasium "
                             "(leave backend out)")
        for key, (accepted, instead) in _TORCHRL_ONLY.items():
            value = kwargs.pop(key, accepted[0])
            if not any(value is a or (type(value) is type(a) and value == a) for a in accepted):
                raise ValueError(f"GymEnv: {key}={value!r} is not supported ({instead}); leave {key} out")
        self.env_name = env_name
        self.from_pixels, self.frame_skip = from_pixels, frame_skip
        self._env, self._skip = self._make(env_name, num_envs, from_pixels, pixels_only, frame_skip, kwargs)
        self._vector = isinstance(self._env, gym.vector.VectorEnv)
        # SAME_STEP vector envs reset finished sub-envs inside step: (reset observation, info, which)
        self._same_step = self._vector and self._env.metadata.get("autoreset_mode") is gym.vector.AutoresetMode.SAME_STEP
        self._autoreset: tuple | None = None
        batch = (self._env.num_envs,) if self._vector else ()
        if batch_size is not None and tuple(batch_size) not in ((), batch):
            raise ValueError(f"GymEnv: batch_size={tuple(batch_size)} differs from the env's batch {batch}; "
                             "num_envs sets the batch (leave batch_size out)")
        super().__init__(batch_size=batch, device=device, allow_done_after_reset=allow_done_after_reset,
                         run_type_checks=run_type_checks)
        if self._vector:
            obs_space = self._env.single_observation_space
            act_space = self._env.single_action_space
        else:
            obs_space, act_space = self._env.observation_space, self._env.action_space
        as_spec = functools.partial(space_to_spec, batch=batch,
                                    categorical_action_encoding=categorical_action_encoding)
        for what, space in (("observation", obs_space), ("action", act_space)):
            if isinstance(space, gym.spaces.Dict) and any(isinstance(s, gym.spaces.Dict) for s in space.values()):
                raise TypeError(f"GymEnv: a Dict {what} space nested in a Dict is not supported ({space!r}); "
                                "flatten it with gymnasium.wrappers.FlattenObservation or a wrapper of your own")
        if isinstance(obs_space, gym.spaces.Dict):
            spaces = obs_space.spaces
            rename = "state" in spaces and "observation" not in spaces  # TorchRL's rule
            self._obs_keys = {("observation" if rename and k == "state" else k): k for k in spaces}
        else:  # the rendered frame alone (from_pixels, pixels_only) is "pixels", as in TorchRL
            spaces = {None: obs_space}
            self._obs_keys = {("pixels" if from_pixels else "observation"): None}
        specs = {key: as_spec(spaces[gym_key]) for key, gym_key in self._obs_keys.items()}
        self._one_hot_obs = {k for k, s in specs.items() if type(s) is OneHot}
        self._multi_one_hot_obs = {k: _offsets(s.nvec) for k, s in specs.items() if isinstance(s, MultiOneHot)}
        plain = (len(specs) == 1 and not self._one_hot_obs and not self._multi_one_hot_obs
                 and None in self._obs_keys.values())
        self._plain_obs = next(iter(specs)) if plain else None
        self.observation_spec = Composite(specs, shape=batch)
        self.action_spec = as_spec(act_space)
        # A MultiDiscrete action with an "action_mask" observation shaped as its nvec (a board's
        # cells, say) is one index into the grid, as TorchRL's (gym.step gets the grid coordinates)
        self._grid_action = None
        mask_spec = specs.get("action_mask")
        if isinstance(act_space, gym.spaces.MultiDiscrete) and mask_spec is not None and (
                tuple(mask_spec.shape) == (*batch, *np.atleast_1d(act_space.nvec))):
            self._grid_action = tuple(int(n) for n in np.atleast_1d(act_space.nvec))
            cells = int(np.prod(self._grid_action))
            self.action_spec = (Categorical(cells, shape=batch) if categorical_action_encoding
                                else OneHot(cells, shape=(*batch, cells), dtype=torch.bool))
        # a Dict action space: one action key per entry, gathered into a dict for gym.step
        self._dict_action = tuple(act_space.spaces) if isinstance(act_space, gym.spaces.Dict) else None
        flag = Categorical(2, shape=(*batch, 1), dtype=torch.bool)
        self.done_spec = Composite(done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=batch)
        # one-hot actions become indices (a vector env's in this buffer) before gym.step
        self._one_hot_action = type(self.action_spec) is OneHot
        self._action_index = np.zeros(batch, dtype=np.intp)
        self._rows = np.arange(batch[0]) if batch else None
        self.info_dict_reader: list = []  # TorchRL's attribute: set_info_dict_reader appends
        self._info_keys: list = []
        # TorchRL's GymLikeEnv hooks a subclass overrides: only those run, the others stay inline
        self._overridden = {name for name in ("read_obs", "read_action", "read_reward", "read_done")
                            if getattr(type(self), name) is not getattr(GymEnv, name)}
        # the general step: TorchRL's hooks, several actions, SAME_STEP, multi-discrete actions
        if (self._overridden - {"read_obs"} or self._dict_action or self._same_step
                or isinstance(act_space, gym.spaces.MultiDiscrete)):
            self._step_into = self._step_through_hooks
        if self._same_step:  # TorchRL's: such an env's info entries are observations
            self.set_info_dict_reader(_autoreset_info_reader())

    # ---- TorchRL's GymLikeEnv hooks (override one to change what the env reads) ---------------
    def read_obs(self, observations) -> dict:
        """The observation entries of one gymnasium observation, by key, as tensors (a subclass's
        override may add or change entries; set ``observation_spec`` to match)."""
        if isinstance(observations, dict):
            return {key: torch.as_tensor(observations[gym_key]) for key, gym_key in self._obs_keys.items()}
        return {next(iter(self._obs_keys)): torch.as_tensor(observations)}

    def read_action(self, action):
        """What gymnasium's ``step`` takes for ``action`` (a tensor of the action spec)."""
        return self.action_spec.to_numpy(action, safe=False)

    def read_reward(self, reward):
        """The reward gymnasium returned, as the env reports it."""
        return reward

    def read_done(self, terminated=None, truncated=None, done=None):
        """``(terminated, truncated, done, do_break)`` from gymnasium's flags (TorchRL's hook)."""
        return terminated, truncated, done, bool(np.any(done))

    # ---- info-dict readers (TorchRL's GymLikeEnv API) ---------------------------------------
    def set_info_dict_reader(self, info_dict_reader=None, ignore_private: bool = True) -> GymEnv:
        """Read entries of gymnasium's ``info`` into the data after each reset and step.

        ``info_dict_reader`` (default: a ``default_info_dict_reader`` of every public key) is
        called as ``reader(info, tensordict)``; its ``info_spec`` joins the observation spec (a
        reader without specs learns them from a first reset and step of the env, as TorchRL's).
        Returns the env.
        """
        reader = default_info_dict_reader(ignore_private=ignore_private) if info_dict_reader is None \
            else info_dict_reader
        if not isinstance(reader, BaseInfoDictReader):
            raise TypeError(f"{type(self).__name__}.set_info_dict_reader: expected a BaseInfoDictReader (__call__ "
                            f"and info_spec, e.g. default_info_dict_reader(keys)), got {type(reader).__name__}")
        if reader.info_spec is None:  # learn the keys and specs from the env's own info
            self._env.reset()
            reader(self._env.step(self._env.action_space.sample())[-1], TensorDict(batch_size=self.batch_size))
            self._env.reset()
        batch, observation_spec = tuple(self.batch_size), self.observation_spec.clone()
        for key, spec in reader.info_spec.items(True, True):
            if tuple(spec.shape[: len(batch)]) != batch:
                spec = spec.expand(*batch, *spec.shape)
            observation_spec[key] = spec
            if key not in self._info_keys:
                self._info_keys.append(key)
        self.observation_spec = observation_spec
        self.info_dict_reader.append(reader)
        return self

    def auto_register_info_dict(self, ignore_private: bool = True, *, info_dict_reader=None) -> GymEnv:
        """``set_info_dict_reader`` (keys an info lacks at reset are written as zeros); returns the env."""
        return self.set_info_dict_reader(info_dict_reader, ignore_private)

    def _read_info(self, info, dest: dict, t: int, mask=None) -> None:
        views = {key: torch.from_numpy(dest[key][t, ...]) for key in self._info_keys}
        td = TensorDict(dict(views), batch_size=self.batch_size)
        for reader in self.info_dict_reader:
            td = reader(info, td)
        for key in td.keys(True, True):
            if key not in views:
                raise KeyError(f"{type(self).__name__}: an info reader wrote {key!r}, which its info_spec does not "
                               "declare; add it to the reader's spec")
            value = td.get(key)
            if value is views[key]:
                continue
            row, value = dest[key][t, ...], value.numpy(force=True)
            if mask is None:
                row[...] = value
            else:
                row[mask] = np.broadcast_to(value, row.shape)[mask]

    @staticmethod
    def _make(env_name, num_envs, from_pixels, pixels_only, frame_skip, kwargs):
        """The gymnasium env, and how many times ``_step_into`` repeats an action."""
        if isinstance(env_name, gym.vector.VectorEnv | gym.Env):
            if num_envs is not None:
                raise ValueError("GymEnv: num_envs applies to env ids, not to env instances")
            if kwargs:
                raise ValueError(f"GymEnv: {sorted(kwargs)} go to gymnasium.make, which an env instance "
                                 "does not pass through; build the instance with them")
            if isinstance(env_name, gym.vector.VectorEnv):
                mode = env_name.metadata.get("autoreset_mode")
                if mode not in (gym.vector.AutoresetMode.DISABLED, gym.vector.AutoresetMode.SAME_STEP):
                    raise ValueError(
                        f"GymEnv: a vector env instance with autoreset_mode={mode} steps a finished sub-env's "
                        "reset in place of its next action; build it with "
                        "vector_kwargs={'autoreset_mode': gym.vector.AutoresetMode.DISABLED} (reap resets finished "
                        "sub-envs itself) or AutoresetMode.SAME_STEP"
                    )
                if from_pixels:
                    raise ValueError("GymEnv: from_pixels=True takes an env id or a single gym.Env, "
                                     "not a vector env instance")
                return env_name, frame_skip
            env = _add_pixels(env_name, False if pixels_only is None else pixels_only) if from_pixels else env_name
            return env, frame_skip
        if not isinstance(env_name, str):
            raise TypeError(f"GymEnv: env_name must be a gymnasium id or env, got {env_name!r}")
        if env_name not in gym.registry:
            close = difflib.get_close_matches(env_name, list(gym.registry), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"GymEnv: env_name {env_name!r} is not a registered gymnasium id.{hint}")
        kwargs = {"disable_env_checker": True, **kwargs}
        skip = frame_skip
        if _takes_frameskip(env_name):
            if "frameskip" in kwargs and frame_skip != 1:
                raise ValueError("GymEnv: pass frame_skip or frameskip, not both")
            kwargs.setdefault("frameskip", frame_skip)
            skip = 1
        wrappers = []
        if from_pixels:
            if kwargs.setdefault("render_mode", "rgb_array") != "rgb_array":
                raise ValueError(f"GymEnv: from_pixels=True needs render_mode='rgb_array', got "
                                 f"render_mode={kwargs['render_mode']!r}")
            wrappers.append(functools.partial(_add_pixels, pixels_only=True if pixels_only is None else pixels_only))
        if num_envs is None:
            env = gym.make(env_name, **kwargs)
            for wrap in wrappers:
                env = wrap(env)
            return env, skip
        vector_kwargs = {"autoreset_mode": gym.vector.AutoresetMode.DISABLED}
        env = gym.make_vec(env_name, num_envs=num_envs, vectorization_mode="sync",
                           vector_kwargs=vector_kwargs, wrappers=wrappers or None, **kwargs)
        return env, skip

    def _write_obs(self, dest: dict, t: int, obs, mask=None) -> None:
        if "read_obs" in self._overridden:
            values = self.read_obs(obs)
            for key in self._obs_keys_read():
                self._write(dest, key, t, np.asarray(values[key]), mask)
            return
        if self._plain_obs is not None and mask is None:  # one array observation: the hot path
            dest[self._plain_obs][t] = obs
            return
        for key, gym_key in self._obs_keys.items():
            self._write(dest, key, t, obs if gym_key is None else obs[gym_key], mask)

    def _write(self, dest: dict, key: str, t: int, value, mask) -> None:
        row = dest[key][t]
        if key in self._multi_one_hot_obs:  # a MultiDiscrete observation: a one-hot row per entry
            rows = row if mask is None else row[mask]
            rows[...] = 0
            np.put_along_axis(rows, np.asarray(value if mask is None else value[mask]) + self._multi_one_hot_obs[key],
                              1, axis=-1)
            if mask is not None:
                row[mask] = rows
        elif key in self._one_hot_obs:  # a Discrete observation: its index as a one-hot row
            if mask is not None:
                row = row[mask]
                value = value[mask]
            row[...] = 0
            if row.ndim == 1:
                row[value] = 1
            else:
                row[self._rows[: len(row)], value] = 1
            if mask is not None:
                dest[key][t][mask] = row
        elif mask is None:
            row[...] = value
        else:
            row[mask] = value[mask]

    def _obs_keys_read(self) -> list:
        """The observation keys an overriding ``read_obs`` writes: the spec's but the info entries."""
        return self._cached("_read_keys", lambda: [k for k in self.observation_spec.keys(True, True)
                                                   if k not in self._info_keys])

    def _reset_into(self, root, t, mask):
        seed, self._reset_seed = self._reset_seed, None  # reset(seed=...)'s
        pending, self._autoreset = self._autoreset, None
        if pending is not None and mask is not None:
            mask = self._take_autoreset(pending, root, t, mask)
            if mask is None:
                return
        if not self._vector or mask is None or mask.all():
            obs, info = self._env.reset(seed=seed)
            self._write_obs(root, t, obs)
            mask = None
        else:
            obs, info = self._env.reset(seed=seed, options={"reset_mask": mask})
            self._write_obs(root, t, obs, mask)
        if self.info_dict_reader:
            self._read_info(info, root, t, mask)

    def _step_into(self, action, t, root, nxt):
        if self._one_hot_action:  # a single env takes a NumPy scalar, as for Categorical
            action = np.argmax(action, axis=-1, out=self._action_index) if self._vector else action.argmax()
        obs, reward, terminated, truncated, info = self._env.step(action)
        if self._skip > 1:
            obs, reward, terminated, truncated, info = self._skip_frames(action, obs, reward, terminated, truncated,
                                                                         info)
        self._write_obs(nxt, t, obs)
        if self.info_dict_reader:
            self._read_info(info, nxt, t)
        if self._vector:
            nxt["reward"][t, :, 0] = reward
            nxt["terminated"][t, :, 0] = terminated
            nxt["truncated"][t, :, 0] = truncated
            nxt["done"][t, :, 0] = terminated | truncated
        else:
            nxt["reward"][t, 0] = reward
            nxt["terminated"][t, 0] = terminated
            nxt["truncated"][t, 0] = truncated
            nxt["done"][t, 0] = terminated or truncated

    def _step_through_hooks(self, action, t, root, nxt) -> None:
        """The general step: a subclass's TorchRL ``read_*`` hooks (each runs where TorchRL's does), a
        ``Dict`` action space, a ``SAME_STEP`` vector env."""
        self._autoreset = None
        if self._dict_action is not None:
            action = {key: root[key][t] for key in self._dict_action}
        if "read_action" in self._overridden:
            as_tensors = {k: torch.as_tensor(v) for k, v in action.items()} if isinstance(action, dict) else None
            action = self.read_action(torch.as_tensor(action) if as_tensors is None else as_tensors)
        elif self._dict_action is not None:
            action = {key: self._gym_action(self.action_spec[key], action[key]) for key in self._dict_action}
        elif self._one_hot_action and self._grid_action is None:
            action = np.argmax(action, axis=-1) if self._vector else action.argmax()
        else:
            action = self._gym_action(self.action_spec, action)
        obs, reward, terminated, truncated, info = self._env.step(action)
        if self._skip > 1:
            obs, reward, terminated, truncated, info = self._skip_frames(action, obs, reward, terminated, truncated,
                                                                         info)
        reward = self.read_reward(reward)
        if "read_done" in self._overridden:
            terminated, truncated, _, _ = self.read_done(terminated=terminated, truncated=truncated,
                                                         done=np.logical_or(terminated, truncated))
        self._write_obs(nxt, t, obs)
        if self.info_dict_reader:
            self._read_info(info, nxt, t)
        if self._same_step:
            self._keep_autoreset(nxt, t, obs, info)
        terminated, truncated = np.asarray(terminated), np.asarray(truncated)
        nxt["reward"][t] = np.asarray(reward, dtype=nxt["reward"].dtype).reshape(nxt["reward"][t].shape)
        nxt["terminated"][t] = terminated.reshape(nxt["terminated"][t].shape)
        nxt["truncated"][t] = truncated.reshape(nxt["truncated"][t].shape)
        nxt["done"][t] = (terminated | truncated).reshape(nxt["done"][t].shape)

    def _gym_action(self, spec, action):
        """An action (or one entry of a ``Dict`` action) as gymnasium takes it: an index for a
        one-hot, an index per entry for a multi-one-hot, grid coordinates for a grid index."""
        if isinstance(spec, MultiOneHot):
            return np.stack([np.argmax(part, axis=-1) for part in np.split(action, _offsets(spec.nvec)[1:], -1)], -1)
        if isinstance(spec, OneHot):
            action = np.argmax(action, axis=-1)
        if self._grid_action is not None and spec is self.action_spec:
            return np.stack(np.unravel_index(action, self._grid_action), axis=-1)
        return np.asarray(action)

    def _keep_autoreset(self, nxt, t, obs, info) -> None:
        """A SAME_STEP vector env: the sub-envs that finished report their final observation as
        the step's, and the observation they reset to is kept for reap's reset of them."""
        finished = info.get("_final_obs")
        if finished is None or not finished.any():
            return
        final = info["final_obs"]
        rows = np.flatnonzero(finished)
        if isinstance(obs, dict):
            last = {key: value.copy() for key, value in obs.items()}
            for i in rows:
                for key in last:
                    last[key][i] = final[i][key]
        else:
            last = obs.copy()
            for i in rows:
                last[i] = final[i]
        self._write_obs(nxt, t, last, finished)
        if self.info_dict_reader and "final_info" in info:
            self._read_info(info["final_info"], nxt, t, finished)
        self._autoreset = (obs, info, finished)

    def _take_autoreset(self, pending, root, t, mask):
        """Writes the reset observations a SAME_STEP vector env made (``pending``) for the ``mask``
        sub-envs; returns the mask of those it did not reset itself (None when there are none)."""
        obs, info, finished = pending
        done = mask & finished
        if done.any():
            self._write_obs(root, t, obs, done)
            if self.info_dict_reader:
                self._read_info(info, root, t, done)
        rest = mask & ~finished
        return rest if rest.any() else None

    def _skip_frames(self, action, obs, reward, terminated, truncated, info):
        """``frame_skip``: the action again, the rewards summed, until the first done (TorchRL's)."""
        for _ in range(self._skip - 1):
            if np.any(terminated) or np.any(truncated):
                break
            obs, more, terminated, truncated, info = self._env.step(action)
            reward = reward + more
        return obs, reward, terminated, truncated, info

    _reset_seed: int | None = None

    def _seed_reset(self, seed):
        self._reset_seed = seed
        if seed is not None:
            self._env.action_space.seed(seed)

    def _set_seed(self, seed):
        # TorchRL's: the env is reset with the seed now, so the next reset() starts the episode after
        # (the same seed gives the same observations on both)
        if seed is not None:
            self._env.reset(seed=seed)
            self._env.action_space.seed(seed)

    def close(self, *, raise_if_closed: bool = True) -> None:
        if not self.is_closed:
            self._env.close()
        super().close()

    def __repr__(self) -> str:
        name = self.env_name if isinstance(self.env_name, str) else self._env
        return f"{type(self).__name__}(env={name}, batch_size={self.batch_size}, device={self.device})"


    def __getattr__(self, name: str):
        """A public attribute the GymEnv lacks is its gymnasium env's (``env.unwrapped``,
        ``env.spec``, a game's ``ale``), as TorchRL's wrappers forward them."""
        env = self.__dict__.get("_env")
        if env is None or name.startswith("_"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
        try:
            return getattr(env, name)
        except AttributeError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}, nor has its "
                                 f"gymnasium env {env}") from None


class GymWrapper(GymEnv):
    """Wrap a gymnasium env instance (TorchRL's ``GymWrapper``); ``GymEnv`` takes an id too.

    The keywords are :class:`GymEnv`'s (``categorical_action_encoding``, ``from_pixels`` with
    ``pixels_only`` False by default, ``frame_skip``, ...). A vector env instance is built with
    ``autoreset_mode=gym.vector.AutoresetMode.DISABLED`` (reap resets finished sub-envs) or
    ``SAME_STEP`` (the final observation from its info); ``NEXT_STEP`` is refused, as in TorchRL.
    A ``Dict`` action space is one action key per entry.

    Examples:
        >>> import gymnasium as gym
        >>> env = GymWrapper(gym.make("CartPole-v1"), categorical_action_encoding=True)
        >>> env.action_spec.n, env.rollout(3)["next", "observation"].shape
        (2, torch.Size([3, 4]))
    """

    def __init__(self, env=None, categorical_action_encoding: bool = False, **kwargs):
        if not isinstance(env, gym.Env | gym.vector.VectorEnv):
            hint = f"; for an id use GymEnv({env!r})" if isinstance(env, str) else ""
            raise TypeError(f"GymWrapper: env must be a gymnasium env instance (gym.make(...)), got {env!r}{hint}")
        super().__init__(env, categorical_action_encoding=categorical_action_encoding, **kwargs)


def _add_pixels(env: gym.Env, pixels_only: bool) -> gym.Env:
    """``env`` with its rendered frame as the ``"pixels"`` observation (gymnasium's
    ``AddRenderObservation``); an env that cannot render is a clear error here."""
    if env.render_mode != "rgb_array":
        raise ValueError(f"GymEnv: from_pixels=True needs render_mode='rgb_array', got "
                         f"render_mode={env.render_mode!r}")
    try:
        return gym.wrappers.AddRenderObservation(env, render_only=pixels_only)
    except (gym.error.DependencyNotInstalled, TypeError) as exc:
        raise RuntimeError(f"GymEnv: from_pixels=True, but {env.spec.id if env.spec else env} cannot render "
                           f"rgb_array frames: {exc}") from exc
