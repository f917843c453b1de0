"""``EndOfLifeTransform``: flag the step that costs a life in a game with lives (TorchRL's).

DQN-style training ends a value target at a lost life without resetting the env: the flag is an
observation (``"end-of-life"``, True where the lives dropped or the episode ended), not a done
flag, and ``register_keys(loss)`` points a loss's done/terminated keys at it. The lives are read
from the base env through ``eol_attribute`` (default ``"unwrapped.ale.lives"``: ALE games;
a ``GymEnv`` passes attributes it lacks to its gymnasium env).

Examples:
    >>> import gymnasium as gym
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import EndOfLifeTransform, TransformedEnv
    >>> base = GymEnv("CartPole-v1")
    >>> base.unwrapped.lives = lambda: 3  # a game's lives counter
    >>> env = TransformedEnv(base, EndOfLifeTransform(eol_attribute="unwrapped.lives"))
    >>> td = env.rollout(2)
    >>> td["lives"].tolist(), td["next", "end-of-life"].flatten().tolist()
    ([3, 3], [False, False])
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from reap.envs.transforms.transform import FORWARD_NOT_IMPLEMENTED, Transform, write_rows
from reap.specs import Unbounded

NO_PARENT_ERR = "The {} transform is being executed without a parent env. This is currently not supported."


def _warn_unless_gym(transform, base_env, stacklevel: int) -> None:
    """TorchRL's warning: the lives are looked up as in a gym env, other envs may lack them."""
    from reap.envs.gym import GymEnv

    if not isinstance(base_env, GymEnv):
        warnings.warn(f"The base_env is not a gym env. Compatibility of {type(transform)} is not guaranteed with "
                      "environment types that do not inherit from GymWrapper.", UserWarning, stacklevel=stacklevel + 1)


class EndOfLifeTransform(Transform):
    """Write ``lives_key`` (the base env's lives, int64, batch-shaped) and ``eol_key`` (shaped like
    ``done_key``: True at a step whose lives are fewer than before it, or that is done).

    Args:
        eol_key: where the flag goes.
        lives_key: where the lives go.
        done_key: the done flag the end-of-life flag extends.
        eol_attribute: the dotted path of the lives in the base env (a number, an array, or a
            callable returning one; a batched env's sub-envs are each asked).
    """

    _array_hooks = True

    def __init__(self, eol_key="end-of-life", lives_key="lives", done_key="done", eol_attribute="unwrapped.ale.lives"):
        super().__init__(in_keys=[done_key], out_keys=[eol_key, lives_key])
        self.eol_key, self.lives_key, self.done_key = eol_key, lives_key, done_key
        self.eol_attribute = eol_attribute.split(".")

    def _lives_of(self, base_env) -> torch.Tensor:
        lives = getattr(base_env, self.eol_attribute[0])
        for name in self.eol_attribute[1:]:
            lives = [getattr(x, name) for x in lives] if isinstance(lives, list) else getattr(lives, name)
        if isinstance(lives, list):
            lives = [x() if callable(x) else x for x in lives]
        elif callable(lives):
            lives = lives()
        return torch.as_tensor(lives, dtype=torch.int64)

    def _get_lives(self) -> torch.Tensor:
        if self.parent is None:
            raise RuntimeError(NO_PARENT_ERR.format(type(self)))
        base_env = self.parent.base_env
        _warn_unless_gym(self, base_env, stacklevel=3)
        return self._lives_of(base_env)

    def transform_observation_spec(self, observation_spec):
        parent = self.parent
        observation_spec[self.eol_key] = parent.output_spec["full_done_spec"][self.done_key].clone()
        observation_spec[self.lives_key] = Unbounded(parent.batch_size, device=parent.device, dtype=torch.int64)
        return observation_spec

    def _call(self, next_tensordict):
        return next_tensordict

    def _step(self, tensordict, next_tensordict):
        lives = self._get_lives()
        done = next_tensordict.get(self.done_key, None)
        if done is None:
            raise KeyError(f"The done value pointed by {self.done_key} cannot be found in tensordict with keys "
                           f"{list(tensordict.keys(True, True))}. Make sure to pass the appropriate done_key to the "
                           f"{type(self)} transform.")
        lost = tensordict.get(self.lives_key) > lives
        next_tensordict.set(self.eol_key, lost.reshape(*lost.shape, *[1] * (done.ndim - lost.ndim)) | done)
        next_tensordict.set(self.lives_key, lives)
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        lives = self._get_lives()
        shape = self.parent.full_done_spec[self.done_key].shape
        tensordict_reset.set(self.eol_key, torch.zeros(shape, dtype=torch.bool))
        tensordict_reset.set(self.lives_key, lives)
        return tensordict_reset

    def forward(self, tensordict):
        raise RuntimeError(FORWARD_NOT_IMPLEMENTED.format(type(self)))

    def register_keys(self, loss_or_advantage) -> None:
        """Point ``loss_or_advantage``'s done and terminated keys at the end-of-life flag."""
        loss_or_advantage.set_keys(done=self.eol_key, terminated=self.eol_key)

    # ---- arrays --------------------------------------------------------------------------------
    def _attach(self, env):
        self._base = env.base_env
        _warn_unless_gym(self, self._base, stacklevel=4)

    def _lives_array(self) -> np.ndarray:
        return self._lives_of(self._base).numpy()

    def on_reset(self, root, t, mask):
        lives = root[self.lives_key][t, ...]  # a view, also for a batch of one env (shape ())
        write_rows(lives, np.broadcast_to(self._lives_array(), lives.shape), mask)
        eol = root[self.eol_key][t]
        if mask is None or mask.ndim == 0:
            eol[...] = False
        else:
            eol[mask] = False

    def on_step(self, root, nxt, t):
        lives = np.broadcast_to(self._lives_array(), nxt[self.lives_key][t, ...].shape)
        lost = root[self.lives_key][t, ...] > lives
        done = nxt[self.done_key][t]
        np.logical_or(lost.reshape(lost.shape + (1,) * (done.ndim - lost.ndim)), done, out=nxt[self.eol_key][t])
        nxt[self.lives_key][t, ...] = lives
