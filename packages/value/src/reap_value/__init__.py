"""Vectorised advantage and return estimators: GAE, TD(lambda), TD(1), TD(0), V-trace.

Examples:
    >>> import torch
    >>> import reap_value
    >>> adv, target = reap_value.vec_generalized_advantage_estimate(
    ...     0.99, 0.95, torch.zeros(4, 1), torch.zeros(4, 1), torch.ones(4, 1),
    ...     torch.zeros(4, 1, dtype=torch.bool),
    ... )
    >>> adv.shape
    torch.Size([4, 1])
"""

from reap_value.estimators import (
    GAE,
    TD0Estimator,
    TD1Estimator,
    TDLambdaEstimator,
    ValueEstimatorBase,
)
from reap_value.functional import (
    generalized_advantage_estimate,
    reward2go,
    td0_advantage_estimate,
    td0_return_estimate,
    td1_advantage_estimate,
    td1_return_estimate,
    td_lambda_advantage_estimate,
    td_lambda_return_estimate,
    vec_generalized_advantage_estimate,
    vec_td1_advantage_estimate,
    vec_td1_return_estimate,
    vec_td_lambda_advantage_estimate,
    vec_td_lambda_return_estimate,
    vtrace_advantage_estimate,
)
from reap_value.multiagent import MultiAgentGAE
from reap_value.vtrace import VTrace

__all__ = [
    "GAE",
    "MultiAgentGAE",
    "TD0Estimator",
    "TD1Estimator",
    "TDLambdaEstimator",
    "VTrace",
    "ValueEstimatorBase",
    "generalized_advantage_estimate",
    "vec_generalized_advantage_estimate",
    "td0_return_estimate",
    "td0_advantage_estimate",
    "td1_return_estimate",
    "vec_td1_return_estimate",
    "td1_advantage_estimate",
    "vec_td1_advantage_estimate",
    "td_lambda_return_estimate",
    "vec_td_lambda_return_estimate",
    "td_lambda_advantage_estimate",
    "vec_td_lambda_advantage_estimate",
    "vtrace_advantage_estimate",
    "reward2go",
]
