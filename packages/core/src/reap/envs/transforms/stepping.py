"""Transforms that change how the env steps: ``FrameSkipTransform`` and ``NoopResetEnv`` step it
more than once, ``ConditionalSkip`` not at all where its condition holds.

The first two re-run the part of the chain before them (the base env and the transforms
preceding them) on the same preallocated arrays, as TorchRL's run their ``parent``.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import FrameSkipTransform, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), FrameSkipTransform(4))
    >>> env.append_transform(StepCounter()).rollout(3)["next", "step_count"].flatten().tolist()
    [1, 2, 3]
"""

from __future__ import annotations

import numpy as np
import torch

from reap.envs.transforms.transform import FailsWhenRun, Transform
from reap.envs.utils import step_mdp


class FrameSkipTransform(Transform):
    """Repeat each action ``frame_skip`` times, summing the rewards (TorchRL's ``FrameSkipTransform``).

    As in TorchRL, the repeats do not stop at a done step: the flags and observation are those
    of the last repeat.
    """

    _array_hooks = True

    def __init__(self, frame_skip: int = 1):
        if not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(f"frame_skip should have a value greater or equal to one (an int), got {frame_skip!r}")
        super().__init__()
        self.frame_skip = frame_skip

    def _step(self, tensordict, next_tensordict):
        parent = self.parent
        if parent is None:
            raise RuntimeError("parent not found for FrameSkipTransform")
        reward = next_tensordict.get(parent.reward_key)
        for _ in range(self.frame_skip - 1):
            next_tensordict = parent._step(tensordict)
            reward = reward + next_tensordict.get(parent.reward_key)
        return next_tensordict.set(parent.reward_key, reward)

    def forward(self, tensordict):
        raise RuntimeError("FrameSkipTransform can only be used when appended to a transformed env.")

    def _attach(self, env):
        self.__dict__["_env"] = env  # what on_step repeats (the container, without its look-up)
        self._reward_key = env.reward_key
        spec = env.next_specs()[self._reward_key]
        self._sum = np.zeros(tuple(spec.shape), dtype=spec.zero().numpy().dtype)

    def on_step(self, root, nxt, t):
        env = self._env
        reward = nxt[self._reward_key][t]
        views, action = env._active_views, env._active_action
        np.copyto(self._sum, reward)
        for _ in range(self.frame_skip - 1):
            env._step_upto(self._stage - 1, action, t, views)
            np.add(self._sum, reward, out=self._sum)
        np.copyto(reward, self._sum)


_BATCHED = ("NoopResetEnv: The parent environment batch-size is non-null: {}; it works on a single env. Put "
            "it inside each sub-env instead: SerialEnv(n, lambda: TransformedEnv(make_env(), NoopResetEnv()))")


class NoopResetEnv(Transform):
    """After each reset, take a random number (below ``noops``) of random steps (TorchRL's
    ``NoopResetEnv``); with ``random=False`` exactly ``noops`` (0: none).

    Like TorchRL's, it needs an env of one (unbatched) instance: wrap each sub-env of a batched
    env instead (``SerialEnv(4, lambda: TransformedEnv(GymEnv(...), NoopResetEnv()))``).
    Actions are drawn from the action spec with torch's global generator, as TorchRL does.
    """

    MAX_TRIALS = 10

    _array_hooks = True

    def __init__(self, noops: int = 30, random: bool = True):
        if not isinstance(noops, int) or noops < (1 if random else 0):
            raise ValueError(f"NoopResetEnv: noops must be an int of at least {1 if random else 0} with "
                             f"random={random}, got {noops!r}")
        super().__init__()
        self.noops, self.random = noops, random

    @property
    def base_env(self):
        return self.parent

    def _reset(self, tensordict, tensordict_reset):
        parent = self.parent
        if parent is None:
            raise RuntimeError("NoopResetEnv.parent not found. Make sure that the parent is set.")
        if parent.batch_size.numel() > 1:
            raise ValueError(_BATCHED.format(tuple(parent.batch_size)))
        td = tensordict_reset.clone(False)
        noops = self.noops if not self.random else int(torch.randint(self.noops, (1,)).item())
        for _ in range(self.MAX_TRIALS + 1):
            for _ in range(noops):
                td = parent.rand_step(td)
                done = any(td.get(("next", key)).any() for key in parent.done_keys)
                td = step_mdp(td, exclude_done=False)
                if done:
                    td = parent.reset(td.clone(False))
                    break
            else:
                return td.exclude(parent.reward_key, inplace=True)
        raise RuntimeError(f"Parent env was repeatedly done or truncated before the sampled number of noops "
                           f"(={noops}) could be applied.")

    def _attach(self, env):
        if env.batch_size.numel() > 1:
            raise FailsWhenRun(ValueError(_BATCHED.format(tuple(env.batch_size))))
        self._scratch = None

    def _scratch_arrays(self):
        env = self.container
        if self._scratch is None or self._scratch[0] != env.layout_version:
            root, nxt, _, _ = env.allocate(1)
            self._scratch = (env.layout_version, root, nxt, env._views(root, nxt))
        return self._scratch[1:]

    def on_reset(self, root, t, mask):
        if mask is not None and not mask.any():
            return
        env = self.container
        physical = env._active_root
        scratch_root, scratch_next, views = self._scratch_arrays()
        for key, array in scratch_root.items():
            array[0] = physical[key][t]
        noops = self.noops if not self.random else int(torch.randint(self.noops, (1,)).item())
        stage, actions = self._stage - 1, scratch_root[env.action_key]
        carried = [(scratch_root[k], scratch_next[k]) for k in env.state_keys]
        for _ in range(self.MAX_TRIALS + 1):
            completed = True
            for _ in range(noops):
                actions[0] = env.full_action_spec[env.action_key].rand().numpy()
                env._step_upto(stage, actions[0], 0, views)
                for dest, src in carried:
                    dest[0] = src[0]
                if scratch_next["done"][0].any():
                    env._reset_upto(stage, 0, None, views)
                    completed = False
                    break
            if completed:
                break
        else:
            raise RuntimeError(f"Parent env was repeatedly done or truncated before the sampled number of noops "
                               f"(={noops}) could be applied ({self.MAX_TRIALS + 1} tries); lower noops")
        for key, array in scratch_root.items():
            if key != env.action_key:
                physical[key][t] = array[0]

    def __repr__(self) -> str:
        return f"NoopResetEnv(noops={self.noops}, random={self.random})"


class ConditionalSkip(Transform):
    """Skip the env's step where ``cond(tensordict)`` is True (TorchRL's ``ConditionalSkip``).

    ``cond`` gets the step's input (the root, after the inverse of the transforms after this
    one) and returns a bool or a batch-shaped bool tensor. Its negation becomes the step's
    ``"_step"`` entry: where every env is skipped, neither the base env nor the transforms of
    this ``TransformedEnv`` step, and ``"next"`` holds the root's values (zero rewards); where
    some are, the base env steps the others (TorchRL's partial steps) and the transforms run on
    all. A ``TransformedEnv`` holding one steps on TensorDicts. Wrap it in another
    ``TransformedEnv(..., auto_unwrap=False)`` for transforms that must see every step.

    Examples:
        >>> from reap.envs import GymEnv, StepCounter, TransformedEnv
        >>> from reap.envs.transforms import ConditionalSkip
        >>> inner = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(step_count_key="inner"))
        >>> skipping = TransformedEnv(inner, ConditionalSkip(lambda td: td["step_count"] % 2 == 1), auto_unwrap=False)
        >>> env = TransformedEnv(skipping, StepCounter(), auto_unwrap=False)  # counts every step
        >>> env.rollout(5)["next", "inner"].flatten().tolist()
        [1, 1, 2, 2, 3]
    """

    #: the TransformedEnv holding it steps on TensorDicts (a skipped step leaves its transforms out)
    _skips_steps = True

    def __init__(self, cond):
        if not callable(cond):
            raise TypeError(f"ConditionalSkip: cond must be a callable of the step's input returning a bool or a "
                            f"batch-shaped bool tensor, got {cond!r}")
        super().__init__()
        self.cond = cond

    def _inv_call(self, tensordict):
        skip = torch.as_tensor(self.cond(tensordict), dtype=torch.bool, device=tensordict.device)
        step = ~skip.expand(tensordict.batch_size) if skip.ndim == 0 else ~skip.reshape(tensordict.batch_size)
        previous = tensordict.get("_step", None)
        return tensordict.set("_step", step if previous is None else previous.reshape(step.shape) & step)

    def forward(self, tensordict):
        raise NotImplementedError("ConditionalSkip acts on an env's steps only (append it to a TransformedEnv); it "
                                  "has no transform of data")
