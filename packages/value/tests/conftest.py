"""Test helpers of reap-value: make the reference loops importable as ``value_reference``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))


def make_batch(shape, *, dtype=torch.float32, seed=0, p_done=0.2, time_dim=-2):
    """Random values, rewards and flags with dones, truncations and terminations scattered,
    plus a done at the first and at the last step of every trajectory row."""
    gen = torch.Generator().manual_seed(seed)
    value = torch.randn(shape, generator=gen, dtype=dtype)
    next_value = torch.randn(shape, generator=gen, dtype=dtype)
    reward = torch.randn(shape, generator=gen, dtype=dtype)
    done = torch.rand(shape, generator=gen) < p_done
    terminated = done & (torch.rand(shape, generator=gen) < 0.5)
    length = shape[time_dim]
    done.narrow(time_dim, 0, 1).fill_(True)
    done.narrow(time_dim, length - 1, 1).fill_(True)
    return value, next_value, reward, done, terminated


@pytest.fixture
def batch():
    return make_batch
