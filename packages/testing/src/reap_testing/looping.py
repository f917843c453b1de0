"""``LoopingEnv``: an env that resets itself when done (an auto-resetting env, as TorchRL's
``auto_reset=True`` expects), written once on either library's ``EnvBase``
(``looping_env_class``). It lives here (not in a test file) so that worker processes import it.

Two envs count their steps (``count`` a float, ``parity`` an int64, ``odd`` a bool); env ``i`` is
done at count ``LIMITS[i]`` and its step returns the first observation of the next episode
(all zeros), as an env that resets itself does. Its ``_reset`` refuses reset flags: an
``AutoResetEnv`` must not call it for done envs.

Examples:
    >>> env = LoopingEnv(auto_reset=True)
    >>> rollout = env.rollout(3, break_when_any_done=False)
    >>> rollout["next", "count"][0].flatten().tolist()
    [1.0, nan, 1.0]
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from reap.envs import EnvBase
from reap.specs import Categorical, Composite, Unbounded

LIMITS = (2, 3)


def looping_env_class(base, composite, unbounded, categorical):
    """``LoopingEnv`` on the given library's ``EnvBase`` and specs."""

    class LoopingEnv(base):
        def __init__(self, **kwargs):
            super().__init__(batch_size=(2,), **kwargs)
            self.observation_spec = composite(
                count=unbounded(shape=(2, 1)), parity=unbounded(shape=(2, 1), dtype=torch.int64),
                odd=categorical(2, shape=(2, 1), dtype=torch.bool), shape=(2,))
            self.action_spec = categorical(2, shape=(2, 1))
            self.reward_spec = unbounded(shape=(2, 1))
            self.count = torch.zeros(2, 1)

        def _observe(self, done=None):
            count = self.count.clone()
            return TensorDict(count=count, parity=count.long() % 2, odd=count.long() % 2 == 1, batch_size=(2,))

        def _reset(self, tensordict):
            if tensordict is not None and "_reset" in tensordict.keys():
                raise RuntimeError("LoopingEnv resets itself: _reset was called with reset flags")
            self.count.zero_()
            return self._observe()

        def _step(self, tensordict):
            self.count += 1
            done = self.count >= torch.tensor(LIMITS, dtype=torch.float32).unsqueeze(-1)
            self.count[done] = 0  # the next episode starts now
            out = self._observe()
            out.set("reward", torch.ones(2, 1))
            out.set("done", done)
            out.set("terminated", done.clone())
            return out

        def _set_seed(self, seed):
            pass

    return LoopingEnv


LoopingEnv = looping_env_class(EnvBase, Composite, Unbounded, Categorical)
