"""A small LSTM policy and its CartPole env, for tests and examples of recurrent collection.

They live in the package (not in a test folder) so that worker processes started with
``spawn`` or ``forkserver`` can import them by name: a test module is not importable there.

Examples:
    >>> from reap_rnn.testing import make_env, make_policy
    >>> policy, lstm = make_policy()
    >>> env = make_env()
    >>> policy(env.reset())["action"].shape
    torch.Size([3])
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from reap_rnn.modules import LSTMModule

NUM_ENVS, HIDDEN = 3, 8


class Head(torch.nn.Module):
    """Linear scores of the two CartPole actions, returned as the index of the best."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(HIDDEN, 2)

    def forward(self, embed):
        return self.linear(embed).argmax(-1)


def make_policy(backend: str = "scan"):
    """``(policy, lstm)``: a 2-layer LSTM (seeded weights) and a ``Head`` writing ``"action"``."""
    torch.manual_seed(0)
    lstm = LSTMModule(input_size=4, hidden_size=HIDDEN, num_layers=2, in_key="observation",
                      out_key="embed", recurrent_backend=backend)
    head = TensorDictModule(Head(), in_keys=["embed"], out_keys=["action"])
    return TensorDictSequential(lstm, head), lstm


def make_env():
    """``NUM_ENVS`` batched CartPole envs with ``InitTracker`` and the LSTM's primer."""
    from reap import GymEnv, InitTracker, TransformedEnv

    _, lstm = make_policy()
    env = GymEnv("CartPole-v1", num_envs=NUM_ENVS, categorical_action_encoding=True)  # Head gives indices
    return TransformedEnv(env, InitTracker()).append_transform(lstm.make_tensordict_primer())
