"""The seed chain of TorchRL's ``env.set_seed``: each env returns the seed the next env uses.

TorchRL derives that next seed from the given one with a hash (NumPy's ``default_rng``), not
``seed + 1``, so that envs seeded one after the other (a ``SerialEnv``'s, a ``ParallelEnv``'s)
get unrelated streams; reap returns the same next seed, so a seed gives the same sub-env seeds
on both.

Examples:
    >>> seed_generator(100) == seed_generator(100) != seed_generator(101)
    True
    >>> 0 <= seed_generator(0) < 2**32 - 1
    True
"""

from __future__ import annotations

import numpy as np

_MODULUS = 2**32 - 1  # the seeds torch.manual_seed and gymnasium take


def seed_generator(seed: int) -> int:
    """The seed after ``seed`` in TorchRL's chain (``torchrl._utils.seed_generator``'s value)."""
    raw = np.random.default_rng(seed).bytes(8)
    return int.from_bytes(raw, "big") % _MODULUS


__all__ = ["seed_generator"]
