"""The reference every backend must match: torch.nn.LSTM/GRU run segment by segment, one step
at a time, restarting from zeros wherever ``is_init`` is set. Device-agnostic: the random draws
are made on the CPU (the same values everywhere) and callers move the batch where the module is."""

from __future__ import annotations

import contextlib

import torch
from tensordict import TensorDict


@contextlib.contextmanager
def ieee_float32(device):
    """On a CUDA ``device``, cuDNN's RNNs without TF32 (torch lets them use it by default, which is
    ~1e-3 off in float32) while the block runs; elsewhere nothing."""
    if torch.device(device).type != "cuda":
        yield
        return
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = before


def reference(rnn: torch.nn.RNNBase, x, state0, is_init):
    """``y`` ``[B, T, H]`` and the states after every step ``[B, T, L, H]`` (tuple)."""
    B, T = is_init.shape
    is_init = is_init.cpu()  # read step by step in Python: one copy, not a device sync per step
    lstm = rnn.mode == "LSTM"
    if type(rnn) not in (torch.nn.LSTM, torch.nn.GRU):  # reap's python-based layer: torch's own, same parameters
        torch_rnn = (torch.nn.LSTM if lstm else torch.nn.GRU)(rnn.input_size, rnn.hidden_size, rnn.num_layers,
                                                            bias=rnn.bias, batch_first=True, device="meta")
        for name, param in rnn.named_parameters():
            setattr(torch_rnn, name, param)
        rnn = torch_rnn
    ys, states = [], []
    for b in range(B):
        state = tuple(s[:, b : b + 1].contiguous() for s in state0)
        row_y, row_s = [], []
        for t in range(T):
            if is_init[b, t]:
                state = tuple(torch.zeros_like(s) for s in state)
            y, new = rnn(x[b : b + 1, t : t + 1], state if lstm else state[0])
            state = new if lstm else (new,)
            row_y.append(y[0, 0])
            row_s.append(tuple(s[:, 0] for s in state))
        ys.append(torch.stack(row_y))
        states.append(tuple(torch.stack([s[i] for s in row_s]) for i in range(len(state))))
    y = torch.stack(ys)
    return y, tuple(torch.stack([s[i] for s in states]) for i in range(len(states[0])))


def random_is_init(B, T, generator, p=0.2):
    """Resets at random places, including step 0 of some rows and back-to-back resets."""
    is_init = torch.rand(B, T, generator=generator) < p
    is_init[0, 0] = True
    if T > 3:
        is_init[-1, 2] = is_init[-1, 3] = True
    return is_init


def make_batch(module, B, T, dtype, generator, p=0.2):
    """A ``[B, T]`` TensorDict for ``module`` with random stored states and resets, on the CPU
    (``generator`` is a CPU one): move it with ``.to(device)``."""
    rnn = module._rnn
    sizes = module._state_sizes()
    data = {
        module.in_keys[0]: torch.randn(B, T, rnn.input_size, dtype=dtype, generator=generator),
        "is_init": random_is_init(B, T, generator, p).unsqueeze(-1),
    }
    for key, size in zip(module.in_keys[1:-1], sizes):
        data[key] = torch.randn(B, T, rnn.num_layers, size, dtype=dtype, generator=generator)
    return TensorDict(data, batch_size=[B, T])
