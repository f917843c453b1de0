"""GAE for batches with an agent dimension that is never reduced over.

The value network gives one value per agent (``[*B, T, n_agents, 1]``); rewards and flags are
either per agent too or shared by the team (``[*B, T, 1]``), in which case they are broadcast
along the agent dimension. Each agent's advantages are computed on its own, and
``average_gae`` standardizes each agent's advantages with that agent's statistics.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap_value import MultiAgentGAE
    >>> batch = TensorDict({
    ...     "agents": TensorDict({"state_value": torch.zeros(2, 5, 3, 1)}, [2, 5, 3]),
    ...     "next": {
    ...         "agents": TensorDict({"state_value": torch.zeros(2, 5, 3, 1)}, [2, 5, 3]),
    ...         "reward": torch.ones(2, 5, 1),
    ...         "done": torch.zeros(2, 5, 1, dtype=torch.bool),
    ...     },
    ... }, [2, 5])
    >>> gae = MultiAgentGAE(gamma=0.9, lmbda=0.9, value_network=None)
    >>> gae = gae.set_keys(value=("agents", "state_value"), advantage=("agents", "advantage"))
    >>> gae(batch)["agents", "advantage"].shape
    torch.Size([2, 5, 3, 1])
"""

from __future__ import annotations

import torch

from reap_value._standardize import standardize, standardize_by_group
from reap_value.estimators import GAE

__all__ = ["MultiAgentGAE"]


class MultiAgentGAE(GAE):
    """:class:`~reap_value.GAE` with per-agent values and team or per-agent rewards.

    Keyword Args:
        agent_dim (int): the agent dimension of the value tensor; negative values count
            from its end. Defaults to ``-2`` (``[*B, T, n_agents, 1]``).

    All other keyword arguments are those of :class:`~reap_value.GAE`.

    Examples:
        >>> MultiAgentGAE(gamma=0.99, lmbda=0.95, value_network=None, agent_dim=-2).agent_dim
        -2
    """

    def __init__(self, *, agent_dim: int = -2, **kwargs):
        if isinstance(agent_dim, bool) or not isinstance(agent_dim, int):
            raise TypeError(f"agent_dim must be an int, got {type(agent_dim).__name__}")
        super().__init__(**kwargs)
        self.agent_dim = agent_dim

    def _agent_index(self, value: torch.Tensor) -> int:
        ndim = value.ndim
        if not -ndim <= self.agent_dim < ndim:
            raise ValueError(
                f"agent_dim={self.agent_dim} is out of range for a value of shape "
                f"{tuple(value.shape)}"
            )
        return self.agent_dim % ndim

    def _estimate(self, tensordict, value, next_value, time_dim):
        if self._agent_index(value) == time_dim:
            raise ValueError(
                f"agent_dim={self.agent_dim} is the time dimension ({time_dim}); "
                "the agent dimension must differ from it"
            )
        return super()._estimate(tensordict, value, next_value, time_dim)

    def _prepare_signals(self, reward, done, terminated, value):
        agent = self._agent_index(value)
        return tuple(
            self._broadcast(x, value, agent, name)
            for x, name in ((reward, "reward"), (done, "done"), (terminated, "terminated"))
        )

    def _broadcast_optional(self, tensor, value):
        return self._broadcast(tensor, value, self._agent_index(value), "truncated")

    def _normalize_advantage(self, advantage, groups=None):
        agent = self._agent_index(advantage)
        if groups is not None:  # a group per (group id, agent)
            while groups.ndim < advantage.ndim:
                groups = groups.unsqueeze(-1)
            n_agents = advantage.shape[agent]
            agents = torch.arange(n_agents, device=advantage.device)
            agents = agents.reshape([-1 if d == agent else 1 for d in range(advantage.ndim)])
            return standardize_by_group(advantage, groups.expand(advantage.shape) * n_agents + agents)
        return standardize(advantage, eps=1e-4, dims=[d for d in range(advantage.ndim) if d != agent])

    @staticmethod
    def _broadcast(x: torch.Tensor, value: torch.Tensor, agent: int, name: str) -> torch.Tensor:
        if x.ndim == value.ndim - 1:
            x = x.unsqueeze(agent)
        if x.ndim != value.ndim:
            raise ValueError(
                f"{name} of shape {tuple(x.shape)} fits neither the value shape "
                f"{tuple(value.shape)} nor that shape without the agent dimension"
            )
        try:
            return x.expand(value.shape)
        except RuntimeError:
            raise ValueError(
                f"{name} of shape {tuple(x.shape)} does not broadcast to the value shape "
                f"{tuple(value.shape)}"
            ) from None
