"""Batch post-processing for a collector's ``postproc``: ``MultiStep`` n-step returns.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.postprocs import MultiStep
    >>> batch = TensorDict({"next": {"reward": torch.ones(4, 1), "done": torch.zeros(4, 1, dtype=torch.bool),
    ...                              "observation": torch.arange(4.0).unsqueeze(-1)}}, batch_size=[4])
    >>> out = MultiStep(gamma=0.5, n_steps=2)(batch)
    >>> out["next", "reward"].flatten().tolist(), out["next", "observation"].flatten().tolist()
    ([1.5, 1.5, 1.5, 1.0], [1.0, 2.0, 3.0, 3.0])
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

DONE_KEYS = ("done", "terminated", "truncated")


class MultiStep(torch.nn.Module):
    """n-step returns over each batch, TorchRL's ``MultiStep`` (use it as ``postproc=``).

    For each step, ``("next", "reward")`` becomes the discounted sum of up to ``n_steps``
    rewards of the same trajectory within the batch (the original is kept as
    ``("next", "original_reward")``), the other ``"next"`` entries (flags excepted) are those of
    the last of those steps, and ``steps_to_next_obs``, ``gamma`` (the discount of the value
    there) and ``nonterminal`` are added. The time dim is the batch's last.
    """

    def __init__(self, gamma: float, n_steps: int):
        super().__init__()
        if not isinstance(n_steps, int) or n_steps <= 0:
            raise ValueError(f"MultiStep: n_steps must be a positive int, got {n_steps!r}")
        if not 0 < gamma <= 1:
            raise ValueError(f"MultiStep: gamma must be in (0, 1], got {gamma!r}")
        self.gamma, self.n_steps = gamma, n_steps

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        td = tensordict.clone(False)
        done = td.get(("next", "done"))
        if done.shape != td.shape:
            if done.shape[:-1] != td.shape or done.shape[-1] != 1:
                raise ValueError(
                    f"MultiStep: ('next', 'done') has shape {tuple(done.shape)}; expected the batch "
                    f"shape {tuple(td.shape)} with a trailing 1"
                )
            done = done.squeeze(-1)
        *batch, T = td.batch_size
        time = torch.arange(T, device=done.device)
        ends = torch.where(done, time, T - 1)
        ends = ends.flip(-1).cummin(-1).values.flip(-1)  # the last step of each step's trajectory
        ahead = torch.clamp(ends - time, max=self.n_steps - 1)  # steps to the gathered "next"
        reward = td.get(("next", "reward"))
        summed = torch.zeros_like(reward)
        for i in range(self.n_steps):
            shifted = torch.zeros_like(reward)
            shifted[..., : T - i, :] = reward[..., i:, :]
            keep = (i <= ends - time).unsqueeze(-1)
            summed += (self.gamma**i) * shifted * keep
        index = time + ahead
        nxt = td.get("next")
        gathered = nxt.exclude("reward", *DONE_KEYS).apply(
            lambda x: x.gather(len(batch), _expand_index(index, x, len(batch)))
        )
        td.set("steps_to_next_obs", ahead + 1)
        nxt.rename_key_("reward", "original_reward")
        nxt.set("reward", summed)
        nxt.update(gathered)
        td.set("gamma", self.gamma ** (ahead + 1))
        td.set("nonterminal", ahead != 0)
        return td


def _expand_index(index: torch.Tensor, value: torch.Tensor, time_dim: int) -> torch.Tensor:
    shape = (*index.shape, *([1] * (value.ndim - index.ndim)))
    return index.reshape(shape).expand(*index.shape, *value.shape[time_dim + 1:])
