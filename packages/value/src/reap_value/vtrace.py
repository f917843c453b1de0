"""``VTrace``: IMPALA's off-policy targets over a TensorDict batch, with TorchRL's keywords.

The batch holds the log-probability of each action under the policy that collected it
(``"sample_log_prob"``, or ``"action_log_prob"`` when :func:`tensordict.nn.composite_lp_aggregate`
is off; see ``set_keys``). As in TorchRL 0.14.1, the current policy's ``log_pi`` is that of the
action the actor picks now under the current interaction type (its sample under
``InteractionType.RANDOM``, its deterministic action otherwise), so the batch needs no action.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import ProbabilisticTensorDictModule as Prob, TensorDictModule as Mod
    >>> from tensordict.nn import ProbabilisticTensorDictSequential as Seq
    >>> from reap_value import VTrace
    >>> actor = Seq(Mod(torch.nn.Linear(3, 4), in_keys=["obs"], out_keys=["logits"]),
    ...             Prob(in_keys=["logits"], out_keys=["action"], distribution_class=torch.distributions.Categorical))
    >>> value_net = Mod(torch.nn.Linear(3, 1), in_keys=["obs"], out_keys=["state_value"])
    >>> vtrace = VTrace(gamma=0.9, actor_network=actor, value_network=value_net)
    >>> batch = TensorDict({"obs": torch.randn(2, 5, 3), vtrace.sample_log_prob_key: torch.zeros(2, 5, 1), "next": {
    ...     "obs": torch.randn(2, 5, 3), "reward": torch.ones(2, 5, 1),
    ...     "done": torch.zeros(2, 5, 1, dtype=torch.bool)}}, [2, 5])
    >>> vtrace(batch)["advantage"].shape
    torch.Size([2, 5, 1])
"""

from __future__ import annotations

import contextlib

import torch
from tensordict import TensorDictBase, is_tensor_collection
from tensordict.nn import InteractionType
from tensordict.nn.probabilistic import interaction_type

from reap_value._checks import Coefficient
from reap_value._standardize import standardize, standardize_by_group
from reap_value.estimators import NestedKey, ValueEstimatorBase, _frozen
from reap_value.functional import vtrace_advantage_estimate

__all__ = ["VTrace"]


class VTrace(ValueEstimatorBase):
    """V-trace advantages and targets (:func:`~reap_value.vtrace_advantage_estimate`).

    Keyword Args:
        gamma: the discount, a number or a 0-dim tensor (a per-step gamma is refused with
            ``NotImplementedError``, as in TorchRL).
        actor_network: the current policy (a probabilistic TensorDict module: ``get_dist``).
        value_network: as in :class:`~reap_value.GAE`.
        rho_thresh, c_thresh: the clipping of the importance weights (default 1).
        average_adv: standardize the advantages (within ``group_key`` groups if set).

    The other keywords are :class:`~reap_value.estimators.ValueEstimatorBase`'s.

    Examples:
        >>> import torch
        >>> from reap_value import VTrace
        >>> VTrace(gamma=0.9, actor_network=torch.nn.Identity(), value_network=None).rho_thresh
        tensor(1.)
    """

    def __init__(
        self,
        *,
        gamma: Coefficient,
        actor_network: torch.nn.Module,
        value_network: torch.nn.Module | None,
        rho_thresh: float | torch.Tensor = 1.0,
        c_thresh: float | torch.Tensor = 1.0,
        average_adv: bool = False,
        differentiable: bool = False,
        skip_existing: bool | None = None,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        shifted: bool = False,
        device: torch.device | None = None,
        time_dim: int | None = None,
        value_chunk_size: int | None = None,
        num_chunks: int | None = None,
        num_chunk: int | None = None,
        value_chunk_dim: int = 0,
        shifted_budget: int = 1,
        group_key: NestedKey | None = None,
    ):
        super().__init__(
            value_network=value_network,
            shifted=shifted,
            differentiable=differentiable,
            skip_existing=skip_existing,
            advantage_key=advantage_key,
            value_target_key=value_target_key,
            value_key=value_key,
            device=device,
            value_chunk_size=value_chunk_size,
            num_chunks=num_chunks,
            num_chunk=num_chunk,
            value_chunk_dim=value_chunk_dim,
            shifted_budget=shifted_budget,
            group_key=group_key,
            time_dim=time_dim,
        )
        if isinstance(gamma, torch.Tensor) and gamma.shape != ():
            raise NotImplementedError("Per-value gamma is not supported yet. Gamma must be a scalar.")
        self._coefficient("gamma", gamma)
        for name, value in (("rho_thresh", rho_thresh), ("c_thresh", c_thresh)):
            self.register_buffer(name, torch.as_tensor(value, device=self._device))
        self.average_adv = bool(average_adv)
        self.actor_network = actor_network

    @classmethod
    def for_loss(cls, loss_module, **hyperparams):
        """An estimator for ``loss_module``: its critic (or value network) and actor unless given.

        Examples:
            >>> import torch
            >>> class Loss:
            ...     critic_network, actor_network = None, torch.nn.Identity()
            >>> isinstance(VTrace.for_loss(Loss(), gamma=0.9).actor_network, torch.nn.Identity)
            True
        """
        hyperparams.setdefault("actor_network", loss_module.actor_network)
        return super().for_loss(loss_module, **hyperparams)

    @property
    def in_keys(self) -> list[NestedKey]:
        return super().in_keys + [self._tensor_keys.sample_log_prob]

    def _log_pi(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The current policy's log-probability of the action it picks now (TorchRL's rule)."""
        actor = self.actor_network
        with _frozen(actor) if torch.is_grad_enabled() else contextlib.nullcontext():
            dist = actor.get_dist(tensordict.select(*actor.in_keys, strict=False))
            mode = interaction_type() or actor.default_interaction_type
            if mode is InteractionType.RANDOM:
                shape = getattr(actor, "num_samples", None) or torch.Size()
                action = dist.rsample(shape) if dist.has_rsample else dist.sample(shape)
            else:
                action = getattr(actor, "_last_module", actor)._dist_sample(dist, interaction_type=mode)
            return dist.log_prob(action)

    def _estimate(self, tensordict, value, next_value, time_dim):
        reward, done, terminated = self._signals(tensordict)
        gamma = self._gamma(tensordict, reward)
        key = self._tensor_keys.sample_log_prob
        log_mu = tensordict.get(key, None)
        if log_mu is None:
            raise KeyError(
                f"the batch has no {key!r} (the sample_log_prob key): the log-probability of each "
                "action under the policy that collected it; name it with set_keys(sample_log_prob=...)"
            )
        if is_tensor_collection(log_mu):
            log_mu = sum(log_mu.values(True, True))
        log_pi = self._log_pi(tensordict).view_as(value)
        advantage, target = vtrace_advantage_estimate(
            gamma, log_pi, log_mu.view_as(value), value, next_value, reward, done, terminated,
            rho_thresh=self._buffer("rho_thresh", reward), c_thresh=self._buffer("c_thresh", reward),
            time_dim=time_dim,
        )
        if self.average_adv:
            groups = self._group_ids(tensordict)
            if groups is None:
                advantage = standardize(advantage, eps=1e-5)
            else:
                advantage = standardize_by_group(advantage, groups, eps=1e-5)
        return advantage, target
