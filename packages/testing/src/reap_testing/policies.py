"""Small policies for tests: their output shows which weights made a batch.

Examples:
    >>> import torch
    >>> from reap_testing import ConstantPolicy
    >>> ConstantPolicy(2.0)(torch.zeros(3, 2)).flatten().tolist()
    [2.0, 2.0, 2.0]
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule

from reap_testing.faults import inject_fault


class ConstantPolicy(torch.nn.Module):
    """``action = weight`` for every env (a float parameter), whatever the observation."""

    def __init__(self, weight: float = 0.0):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([float(weight)]))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return (observation[..., :1] * 0 + self.weight).detach()

    def as_module(self) -> TensorDictModule:
        return TensorDictModule(self, in_keys=["observation"], out_keys=["action"])


def constant_policy(weight: float = 0.0) -> TensorDictModule:
    """A :class:`ConstantPolicy` as a ``TensorDictModule`` (``observation`` -> ``action``)."""
    return ConstantPolicy(weight).as_module()


class ConstantPolicyFactory:
    """A picklable ``policy_factory(env=None)`` (``Evaluator``'s form) making :func:`constant_policy`."""

    def __init__(self, weight: float = 0.0):
        self.weight = weight

    def __call__(self, env=None) -> TensorDictModule:
        return constant_policy(self.weight)


class FaultyPolicy(ConstantPolicy):
    """A ConstantPolicy with a fault (:func:`~reap_testing.faults.inject_fault` ``how``) at its
    ``at``-th call. A collector calls its policy once while starting (to learn its outputs), so
    ``at=1`` faults during start-up and a larger ``at`` mid-rollout."""

    def __init__(self, weight: float = 0.0, *, how: str, at: int = 1):
        super().__init__(weight)
        self.how, self.at, self.calls = how, at, 0

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.at:
            inject_fault(self.how, f"policy call {self.at}")
        return super().forward(observation)


class RaisingPolicy:
    """A policy that raises ``KeyError(message)`` when called."""

    def __init__(self, message: str = "policy blew up"):
        self.message = message

    def __call__(self, observation):
        raise KeyError(self.message)
