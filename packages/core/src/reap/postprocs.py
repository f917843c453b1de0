"""Batch post-processing for a collector's ``postproc``: ``MultiStep`` n-step returns and
``DensifyReward`` (each step's reward becomes its reward-to-go).

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
from tensordict import LazyStackedTensorDict, TensorDictBase, unravel_key
from tensordict.nn import TensorDictModuleBase

DONE_KEYS = ("done", "terminated", "truncated")


class MultiStep(torch.nn.Module):
    """n-step returns over each batch, TorchRL's ``MultiStep`` (use it as ``postproc=``).

    For each step, ``("next", "reward")`` becomes the discounted sum of up to ``n_steps``
    rewards of the same trajectory within the batch (the original is kept as
    ``("next", "original_reward")``), the other ``"next"`` entries (flags excepted) are those of
    the last of those steps, and ``steps_to_next_obs``, ``gamma`` (the discount of the value
    there) and ``nonterminal`` (False at a trajectory's last step and where
    ``("collector", "mask")`` is False) are added. Time is the batch's last dim; any number of
    leading dims, and ``n_steps`` longer than the batch, are fine. A ``("next", "done")`` with
    more dims than the batch (one flag per agent) makes those dims batch dims, as in TorchRL.
    The keys read are the attributes ``done_key``, ``done_keys``, ``reward_keys`` and
    ``mask_key``, as TorchRL's.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> done = torch.tensor([[False, True, False]]).unsqueeze(-1)
        >>> batch = TensorDict({"next": {"reward": torch.ones(1, 3, 1), "done": done}}, [1, 3])
        >>> MultiStep(gamma=0.9, n_steps=5)(batch)["steps_to_next_obs"].tolist()
        [[2, 1, 1]]
    """

    def __init__(self, gamma: float, n_steps: int):
        super().__init__()
        if not isinstance(n_steps, int) or n_steps <= 0:
            raise ValueError(f"MultiStep: n_steps must be a positive int, got {n_steps!r}")
        if not 0 < gamma <= 1:
            raise ValueError(f"MultiStep: gamma must be in (0, 1], got {gamma!r}")
        self.gamma, self.n_steps = gamma, n_steps
        gammas = torch.tensor([gamma**i for i in range(n_steps + 1)], dtype=torch.float)
        self.register_buffer("gammas", gammas.reshape(1, 1, -1))
        self.done_key = "done"
        self.done_keys = DONE_KEYS
        self.reward_keys = ("reward",)
        self.mask_key = ("collector", "mask")

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        td = tensordict.clone(False)
        ndim = td.batch_dims
        done = td.get(("next", self.done_key))
        if done.shape[:-1] == td.shape and done.shape[-1] == 1:
            done = done.squeeze(-1)
        elif done.shape != td.shape:
            try:  # one flag per agent: the done's dims become the batch's, time moved last
                td.batch_size = done.shape
            except RuntimeError as err:
                raise RuntimeError(
                    "MultiStep: the tensordict shape must be compatible with the done's shape (trailing "
                    f"singleton dimension excluded): ('next', {self.done_key!r}) has shape "
                    f"{tuple(done.shape)}, the batch {tuple(tensordict.shape)}; a done of more dims (one "
                    "per agent) needs every entry to start with its shape, and some do not"
                ) from err
            td = td.transpose(ndim - 1, td.batch_dims - 1)
            done = td.get(("next", self.done_key))
        *batch, length = td.batch_size
        time = torch.arange(length, device=done.device)
        ends = torch.where(done.bool(), time, length - 1).flip(-1).cummin(-1).values.flip(-1)
        span = ends - time  # later steps of the same trajectory within the batch
        ahead = span.clamp(max=self.n_steps - 1)
        nxt = td.get("next")
        rest, index = nxt.exclude(*self.reward_keys, *self.done_keys), time + ahead
        if isinstance(rest, LazyStackedTensorDict):  # a SerialEnv's rollouts: TensorDict's gather maps the stack
            gathered = rest.gather(len(batch), index)
        else:  # one gather per leaf: about half the time of TensorDict.gather on dense batches
            gathered = rest.apply(lambda x: x.gather(len(batch), _expand_right(index, x)))
        for key in self.reward_keys:
            reward = nxt.get(key)
            nxt.rename_key_(key, "original_reward")
            nxt.set(key, self._sum(reward, span, len(batch)))
        nxt.update(gathered)
        td.set("steps_to_next_obs", ahead + 1)
        td.set("gamma", self.gamma ** (ahead + 1))
        nonterminal = ahead != 0
        mask = td.get(self.mask_key, None) if self.mask_key is not None else None
        if mask is not None:
            nonterminal &= mask.reshape(nonterminal.shape)
        td.set("nonterminal", nonterminal)
        if td.batch_dims != ndim:
            td = td.transpose(ndim - 1, td.batch_dims - 1)
            td.batch_size = td.batch_size[:ndim]
        return td

    def _sum(self, reward: torch.Tensor, span: torch.Tensor, dim: int) -> torch.Tensor:
        """``sum_i gamma^i reward[t + i]`` over the ``n_steps`` steps from ``t`` in its trajectory."""
        length = reward.shape[dim]
        out = reward.clone()
        for i in range(1, min(self.n_steps, length)):
            later = reward.narrow(dim, i, length - i) * (self.gamma**i)
            later = later * _expand_right(span.narrow(-1, 0, length - i) >= i, later)
            out.narrow(dim, 0, length - i).add_(later)
        return out


def _expand_right(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``t`` with trailing singleton dims added and expanded to ``like``'s shape."""
    return t.reshape(*t.shape, *([1] * (like.ndim - t.ndim))).expand_as(like)


class DensifyReward(TensorDictModuleBase):
    """Each step's ``("next", reward_key)`` becomes its reward-to-go, TorchRL's ``DensifyReward``:
    the sum of the rewards from there to the end of its trajectory (``("next", done_key)``
    ends one; the last step of the batch too), discounted by ``discount``, written at
    ``("next", reward_key_out)`` (``reward_key`` by default). Time is the reward's
    second-to-last dim, as in TorchRL (``time_dim`` is kept for its signature).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> done = torch.tensor([False, True, False, False]).unsqueeze(-1)
        >>> batch = TensorDict({"next": {"reward": torch.tensor([0.0, 3.0, 0.0, 7.0]).unsqueeze(-1),
        ...                              "done": done}}, [4])
        >>> DensifyReward()(batch)["next", "reward"].flatten().tolist()
        [3.0, 3.0, 7.0, 7.0]
    """

    def __init__(self, *, reward_key="reward", done_key="done", reward_key_out=None, time_dim: int = 2,
                 discount: float = 1.0):
        super().__init__()
        self.in_keys = [unravel_key(reward_key), unravel_key(done_key)]
        self.out_keys = [unravel_key(reward_key if reward_key_out is None else reward_key_out)]
        self.time_dim = time_dim
        self.discount = discount

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        reward = tensordict.get(unravel_key(("next", self.in_keys[0])))
        done = tensordict.get(unravel_key(("next", self.in_keys[1])))
        if reward.shape != done.shape:
            raise RuntimeError(
                "DensifyReward: reward and done state are expected to have the same shape, got "
                f"reward.shape={tuple(reward.shape)} and done.shape={tuple(done.shape)}"
            )
        going_on = ~done.bool()
        out = reward.clone()
        dim = reward.ndim - 2
        for t in reversed(range(reward.shape[dim] - 1)):
            later = out.select(dim, t + 1) * going_on.select(dim, t)
            out.select(dim, t).add_(later, alpha=self.discount)
        tensordict.set(unravel_key(("next", self.out_keys[0])), out)
        return tensordict
