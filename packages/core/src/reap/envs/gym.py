"""``GymEnv``: a gymnasium environment (or vector environment) behind reap's env protocol.

Vector envs run with gymnasium's autoreset disabled: reap resets finished sub-envs itself
(``reset_mask``), so ``("next", "observation")`` is always the true final observation and
truncations added by transforms or ``max_frames_per_traj`` reset the env too.

Examples:
    >>> from reap.envs import GymEnv
    >>> env = GymEnv("Pendulum-v1", num_envs=2)
    >>> env.rollout(3)["next", "observation"].shape
    torch.Size([2, 3, 3])
    >>> env.close()
"""

from __future__ import annotations

import difflib

import gymnasium as gym
import numpy as np
import torch

from reap.envs.base import EnvBase
from reap.specs import Binary, Bounded, Categorical, Composite, TensorSpec, Unbounded

_TORCH_DTYPES = {
    np.dtype("float32"): torch.float32,
    np.dtype("float64"): torch.float64,
    np.dtype("int64"): torch.int64,
    np.dtype("int32"): torch.int32,
    np.dtype("int8"): torch.int8,
    np.dtype("uint8"): torch.uint8,
    np.dtype("bool"): torch.bool,
}


def space_to_spec(space: gym.Space, batch=()) -> TensorSpec:
    """The reap spec of a single gymnasium space, with batch dims ``batch``."""
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
        return Categorical(int(space.n), shape=batch)
    if isinstance(space, gym.spaces.MultiBinary):
        return Binary(shape=(*batch, *np.atleast_1d(space.n)), dtype=torch.int8)
    raise TypeError(
        f"GymEnv: gymnasium space {space!r} is not supported; use Box, Discrete, MultiBinary "
        "or a Dict of those"
    )


class GymEnv(EnvBase):
    """Wrap a gymnasium env id, ``gym.Env`` or ``gym.vector.VectorEnv``.

    Args:
        env_name: a registered gymnasium id (``"CartPole-v1"``), or an env instance.
        num_envs: when given, a ``SyncVectorEnv`` of that many copies (batch ``[num_envs]``).
        **kwargs: passed to ``gymnasium.make`` / ``gymnasium.make_vec``.
    """

    def __init__(self, env_name, *, num_envs: int | None = None, device="cpu", **kwargs):
        if torch.device(device).type != "cpu":
            raise ValueError(
                f"GymEnv: device={device!r} is not supported, gymnasium steps on the CPU; "
                "leave device at 'cpu' and move batches with the collector's storing_device"
            )
        if num_envs is not None and (not isinstance(num_envs, int) or num_envs < 1):
            raise ValueError(f"GymEnv: num_envs must be a positive int or None, got {num_envs!r}")
        self.env_name = env_name
        self._env = self._make(env_name, num_envs, kwargs)
        self._vector = isinstance(self._env, gym.vector.VectorEnv)
        batch = (self._env.num_envs,) if self._vector else ()
        super().__init__(batch_size=batch, device=device)
        if self._vector:
            obs_space = self._env.single_observation_space
            act_space = self._env.single_action_space
        else:
            obs_space, act_space = self._env.observation_space, self._env.action_space
        if isinstance(obs_space, gym.spaces.Dict):
            self._obs_keys = tuple(obs_space.spaces)
            specs = {k: space_to_spec(s, batch) for k, s in obs_space.spaces.items()}
        else:
            self._obs_keys = None
            specs = {"observation": space_to_spec(obs_space, batch)}
        self.observation_spec = Composite(specs, shape=batch)
        self.action_spec = space_to_spec(act_space, batch)
        self._seed: int | None = None
        self._all = np.ones(batch, dtype=bool) if batch else None

    @staticmethod
    def _make(env_name, num_envs, kwargs):
        if isinstance(env_name, gym.vector.VectorEnv | gym.Env):
            if num_envs is not None:
                raise ValueError("GymEnv: num_envs applies to env ids, not to env instances")
            if isinstance(env_name, gym.vector.VectorEnv):
                mode = env_name.metadata.get("autoreset_mode")
                if mode is not gym.vector.AutoresetMode.DISABLED:
                    raise ValueError(
                        "GymEnv: a vector env instance must be built with "
                        "vector_kwargs={'autoreset_mode': gym.vector.AutoresetMode.DISABLED}; "
                        "reap resets finished sub-envs itself"
                    )
            return env_name
        if not isinstance(env_name, str):
            raise TypeError(f"GymEnv: env_name must be a gymnasium id or env, got {env_name!r}")
        if env_name not in gym.registry:
            close = difflib.get_close_matches(env_name, list(gym.registry), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"GymEnv: env_name {env_name!r} is not a registered gymnasium id.{hint}")
        if num_envs is None:
            return gym.make(env_name, **kwargs)
        vector_kwargs = {"autoreset_mode": gym.vector.AutoresetMode.DISABLED}
        return gym.make_vec(
            env_name,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs=vector_kwargs,
            **kwargs,
        )

    def _write_obs(self, dest: dict, t: int, obs, mask=None) -> None:
        if self._obs_keys is None:
            if mask is None:
                dest["observation"][t] = obs
            else:
                dest["observation"][t][mask] = obs[mask]
            return
        for key in self._obs_keys:
            if mask is None:
                dest[key][t] = obs[key]
            else:
                dest[key][t][mask] = obs[key][mask]

    def _reset_into(self, root, t, mask):
        seed, self._seed = self._seed, None
        if not self._vector:
            obs, _ = self._env.reset(seed=seed)
            self._write_obs(root, t, obs)
            return
        if mask is None or mask.all():
            obs, _ = self._env.reset(seed=seed)
            self._write_obs(root, t, obs)
        else:
            obs, _ = self._env.reset(seed=seed, options={"reset_mask": mask})
            self._write_obs(root, t, obs, mask)

    def _step_into(self, action, t, root, nxt):
        obs, reward, terminated, truncated, _ = self._env.step(action)
        self._write_obs(nxt, t, obs)
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

    def _set_seed(self, seed):
        self._seed = seed
        if seed is not None:
            self._env.action_space.seed(seed)

    def close(self) -> None:
        if not self.is_closed:
            self._env.close()
        super().close()

    def __repr__(self) -> str:
        return f"GymEnv({self.env_name!r}, batch_size={tuple(self.batch_size)})"
