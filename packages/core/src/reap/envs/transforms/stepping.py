"""Transforms that step the env more than once: ``FrameSkipTransform`` and ``NoopResetEnv``.

Both re-run the part of the chain before them (the base env and the transforms preceding
them) on the same preallocated arrays, as TorchRL's run their ``parent``.

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

from reap.envs.transforms.transformed_env import Transform


class FrameSkipTransform(Transform):
    """Repeat each action ``frame_skip`` times, summing the rewards (TorchRL's ``FrameSkipTransform``).

    As in TorchRL, the repeats do not stop at a done step: the flags and observation are those
    of the last repeat.
    """

    def __init__(self, frame_skip: int = 1):
        if not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(f"FrameSkipTransform: frame_skip must be an int >= 1, got {frame_skip!r}")
        super().__init__(in_keys=[])
        self.frame_skip = frame_skip

    def set_container(self, env):
        super().set_container(env)
        spec = env.next_specs()[env.reward_key]
        self._sum = np.zeros(tuple(spec.shape), dtype=spec.zero().numpy().dtype)

    def on_step(self, root, nxt, t):
        env, reward = self.parent, nxt[self.parent.reward_key][t]
        views, action = env._active_views, env._active_action
        np.copyto(self._sum, reward)
        for _ in range(self.frame_skip - 1):
            env._step_upto(self._stage - 1, action, t, views)
            np.add(self._sum, reward, out=self._sum)
        np.copyto(reward, self._sum)


class NoopResetEnv(Transform):
    """After each reset, take a random number (below ``noops``) of random steps (TorchRL's
    ``NoopResetEnv``); with ``random=False`` exactly ``noops``.

    Like TorchRL's, it needs an env of one (unbatched) instance: wrap each sub-env of a batched
    env instead (``SerialEnv(4, lambda: TransformedEnv(GymEnv(...), NoopResetEnv()))``).
    Actions are drawn from the action spec with torch's global generator, as TorchRL does.
    """

    MAX_TRIALS = 10

    def __init__(self, noops: int = 30, random: bool = True):
        if not isinstance(noops, int) or noops < 1:
            raise ValueError(f"NoopResetEnv: noops must be a positive int, got {noops!r}")
        super().__init__(in_keys=[])
        self.noops, self.random = noops, random

    def set_container(self, env):
        super().set_container(env)
        if env.batch_size.numel() > 1:
            raise ValueError(
                f"NoopResetEnv: the env has batch size {tuple(env.batch_size)}; it works on a single "
                "env. Put it inside each sub-env instead: SerialEnv(n, lambda: "
                "TransformedEnv(make_env(), NoopResetEnv()))"
            )
        self._scratch = None

    def _scratch_arrays(self):
        env = self.parent
        if self._scratch is None or self._scratch[0] != env.layout_version:
            root, nxt, _, _ = env.allocate(1)
            self._scratch = (env.layout_version, root, nxt, env._views(root, nxt))
        return self._scratch[1:]

    def on_reset(self, root, t, mask):
        if mask is not None and not mask.any():
            return
        env = self.parent
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
                actions[0] = env.action_spec.rand().numpy()
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
            raise RuntimeError(
                f"NoopResetEnv: the env was done before {noops} noops in {self.MAX_TRIALS + 1} tries; "
                "lower noops"
            )
        for key, array in scratch_root.items():
            if key != env.action_key:
                physical[key][t] = array[0]
