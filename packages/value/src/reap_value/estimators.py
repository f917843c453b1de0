"""Module estimators that read a TensorDict batch and write ``advantage`` and ``value_target``.

A batch has TorchRL's layout: ``[*B, T]`` batch dimensions, the value network's inputs at the
root and under ``"next"``, and ``("next", "reward")``, ``("next", "done")`` and
``("next", "terminated")`` with a trailing dimension of 1. The value network is called once
for the root and ``"next"`` together (their inputs are concatenated along the first batch
dimension), and the values are written back at ``"state_value"`` and
``("next", "state_value")``. Keys are configurable with :meth:`ValueEstimatorBase.set_keys`.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule
    >>> from reap_value import GAE
    >>> value_net = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["obs"], out_keys=["state_value"])
    >>> batch = TensorDict(
    ...     {
    ...         "obs": torch.randn(4, 10, 3),
    ...         "next": {
    ...             "obs": torch.randn(4, 10, 3),
    ...             "reward": torch.randn(4, 10, 1),
    ...             "done": torch.zeros(4, 10, 1, dtype=torch.bool),
    ...             "terminated": torch.zeros(4, 10, 1, dtype=torch.bool),
    ...         },
    ...     },
    ...     batch_size=[4, 10],
    ... )
    >>> batch = GAE(gamma=0.99, lmbda=0.95, value_network=value_net)(batch)
    >>> batch["advantage"].shape
    torch.Size([4, 10, 1])
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase

from reap_value._checks import Coefficient, check_coefficient
from reap_value.functional import (
    td0_return_estimate,
    vec_generalized_advantage_estimate,
    vec_td_lambda_return_estimate,
)

__all__ = ["ValueEstimatorBase", "GAE", "TD0Estimator", "TD1Estimator", "TDLambdaEstimator"]

NestedKey = str | tuple[str, ...]


@dataclasses.dataclass
class AcceptedKeys:
    """The TensorDict keys an estimator reads and writes; change them with ``set_keys``.

    Examples:
        >>> AcceptedKeys().value
        'state_value'
    """

    advantage: NestedKey = "advantage"
    value_target: NestedKey = "value_target"
    value: NestedKey = "state_value"
    reward: NestedKey = "reward"
    done: NestedKey = "done"
    terminated: NestedKey = "terminated"


def _standardize(x: torch.Tensor, dims: list[int] | None = None) -> torch.Tensor:
    """``(x - mean) / std`` over ``dims`` (all by default), the std kept above 1e-4."""
    if dims is None:
        dims = list(range(x.ndim))
    loc = x.mean(dim=dims, keepdim=True)
    scale = x.std(dim=dims, keepdim=True).clamp_min(1e-4)
    return (x - loc) / scale


class ValueEstimatorBase(TensorDictModuleBase):
    """Shared machinery: keys, the single value-network call and time-dimension handling.

    Subclasses implement :meth:`_estimate`, which returns ``(advantage, value_target)`` from
    the value, next value, reward, done and terminated tensors.

    Examples:
        >>> from reap_value import TD0Estimator
        >>> TD0Estimator(gamma=0.9, value_network=None).tensor_keys.advantage
        'advantage'
    """

    default_keys = AcceptedKeys

    def __init__(
        self,
        *,
        value_network: torch.nn.Module | None,
        differentiable: bool = False,
        skip_existing: bool | None = None,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        shifted: bool = False,
        device: torch.device | None = None,
        time_dim: int | None = None,
    ):
        super().__init__()
        if value_network is not None and not isinstance(value_network, torch.nn.Module):
            raise TypeError(
                "value_network must be a TensorDictModule (or None to read values from the "
                f"batch), got {type(value_network).__name__}"
            )
        if value_network is not None and not hasattr(value_network, "in_keys"):
            raise TypeError("value_network must have in_keys (wrap it in a TensorDictModule)")
        if time_dim is not None and (isinstance(time_dim, bool) or not isinstance(time_dim, int)):
            raise TypeError(f"time_dim must be an int or None, got {type(time_dim).__name__}")
        self.value_network = value_network
        self.differentiable = bool(differentiable)
        self.skip_existing = skip_existing
        # One call of the value network serves root and "next" whatever ``shifted`` says, so
        # the flag is kept for TorchRL compatibility only.
        self.shifted = shifted
        self.device = device
        self.time_dim = time_dim
        self._tensor_keys = AcceptedKeys()
        renames = {
            "advantage": advantage_key,
            "value_target": value_target_key,
            "value": value_key,
        }
        self.set_keys(**{name: key for name, key in renames.items() if key is not None})

    # ------------------------------------------------------------------ keys

    @property
    def tensor_keys(self) -> AcceptedKeys:
        """The keys in use (see :class:`AcceptedKeys`)."""
        return self._tensor_keys

    def set_keys(self, **kwargs: NestedKey) -> ValueEstimatorBase:
        """Change the keys read and written; returns ``self``.

        Examples:
            >>> from reap_value import TD0Estimator
            >>> est = TD0Estimator(gamma=0.9, value_network=None).set_keys(value="v")
            >>> est.tensor_keys.value
            'v'
        """
        known = {f.name for f in dataclasses.fields(AcceptedKeys)}
        for name, key in kwargs.items():
            if name not in known:
                raise ValueError(
                    f"set_keys got an unknown key name {name!r}; known: {sorted(known)}"
                )
            if key is None or not (
                isinstance(key, str)
                or (isinstance(key, tuple) and key and all(isinstance(k, str) for k in key))
            ):
                raise TypeError(f"set_keys: {name} must be a str or a tuple of str, got {key!r}")
        self._tensor_keys = dataclasses.replace(self._tensor_keys, **kwargs)
        return self

    @property
    def in_keys(self) -> list[NestedKey]:
        keys = self._tensor_keys
        network_keys = list(self.value_network.in_keys) if self.value_network is not None else []
        flat = [("next", k) if isinstance(k, str) else ("next", *k) for k in network_keys]
        signals = [keys.reward, keys.done, keys.terminated]
        return network_keys + flat + [_next(k) for k in signals]

    @property
    def out_keys(self) -> list[NestedKey]:
        keys = self._tensor_keys
        return [keys.advantage, keys.value_target, keys.value, _next(keys.value)]

    # ------------------------------------------------------------------ values

    def _values(
        self, tensordict: TensorDictBase, params, target_params
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Value and next value; one network call for both unless ``target_params`` is given."""
        key = self._tensor_keys.value
        next_key = _next(key)
        present = key in tensordict.keys(True) and next_key in tensordict.keys(True)
        network = self.value_network
        if network is None or (present and self.skip_existing):
            if not present:
                missing = key if key not in tensordict.keys(True) else next_key
                raise KeyError(
                    f"value_network is None, so the batch must hold {key!r} and {next_key!r}; "
                    f"{missing!r} is missing"
                )
            return tensordict.get(key), tensordict.get(next_key)
        in_keys = list(network.in_keys)
        for k in in_keys:
            for full in (k, _next(k)):
                if full not in tensordict.keys(True):
                    raise KeyError(f"the value network reads {k!r}, but the batch has no {full!r}")
        root = tensordict.select(*in_keys)
        nxt = tensordict.get("next").select(*in_keys)
        if target_params is None or target_params is params:
            if tensordict.batch_dims:
                both = torch.cat([root, nxt], 0)
            else:
                both = torch.stack([root, nxt], 0)
            with _params_context(params, network):
                both = network(both)
            values = _read_output(both, key, network)
            n = tensordict.batch_size[0] if tensordict.batch_dims else 1
            value, next_value = values[:n], values[n:]
            if not tensordict.batch_dims:
                value, next_value = value[0], next_value[0]
        else:
            with _params_context(params, network):
                value = _read_output(network(root), key, network)
            with _params_context(target_params, network):
                next_value = _read_output(network(nxt), key, network)
        tensordict.set(key, value)
        tensordict.set(next_key, next_value)
        return value, next_value

    def _signals(self, tensordict: TensorDictBase):
        keys = self._tensor_keys
        out = []
        for name in ("reward", "done"):
            full = _next(getattr(keys, name))
            if full not in tensordict.keys(True):
                raise KeyError(f"the batch has no {full!r} ({name} key {getattr(keys, name)!r})")
            out.append(tensordict.get(full))
        terminated = tensordict.get(_next(keys.terminated), None)
        out.append(out[1] if terminated is None else terminated)
        return out

    def _time_dim(self, tensordict: TensorDictBase, time_dim: int | None) -> int:
        ndim = tensordict.batch_dims
        if time_dim is None:
            time_dim = self.time_dim
        if time_dim is None:
            try:
                names = list(tensordict.names)
            except (RuntimeError, ValueError):
                names = [None] * ndim
            time_dim = names.index("time") if "time" in names else ndim - 1
        if ndim == 0:
            raise ValueError("the batch needs a time dimension; got batch_size=[]")
        if not -ndim <= time_dim < ndim:
            raise ValueError(
                f"time_dim={time_dim} is out of range for a batch with {ndim} batch dimension(s)"
            )
        return time_dim % ndim

    # ------------------------------------------------------------------ forward

    def _estimate(self, value, next_value, reward, done, terminated, time_dim):
        raise NotImplementedError

    def _grad_context(self):
        return contextlib.nullcontext() if self.differentiable else torch.no_grad()

    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
        time_dim: int | None = None,
    ) -> TensorDictBase:
        """Write the advantage and value target into ``tensordict`` and return it."""
        if not isinstance(tensordict, TensorDictBase):
            raise TypeError(f"tensordict must be a TensorDict, got {type(tensordict).__name__}")
        dim = self._time_dim(tensordict, time_dim)
        with self._grad_context():
            value, next_value = self._values(tensordict, params, target_params)
            reward, done, terminated = self._signals(tensordict)
            advantage, target = self._estimate(value, next_value, reward, done, terminated, dim)
        keys = self._tensor_keys
        tensordict.set(keys.advantage, advantage)
        tensordict.set(keys.value_target, target)
        return tensordict

    def value_estimate(
        self,
        tensordict: TensorDictBase,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
        time_dim: int | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """The value target for ``tensordict`` (written into it as well).

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from reap_value import TD0Estimator
            >>> batch = TensorDict({"state_value": torch.zeros(2, 1), "next": {
            ...     "state_value": torch.ones(2, 1), "reward": torch.ones(2, 1),
            ...     "done": torch.zeros(2, 1, dtype=torch.bool)}}, [2])
            >>> TD0Estimator(gamma=0.5, value_network=None).value_estimate(batch).flatten()
            tensor([1.5000, 1.5000])
        """
        if kwargs:
            raise TypeError(f"value_estimate got unexpected arguments {sorted(kwargs)}")
        self.forward(tensordict, params=params, target_params=target_params, time_dim=time_dim)
        return tensordict.get(self._tensor_keys.value_target)


class GAE(ValueEstimatorBase):
    """Generalized advantage estimation over a TensorDict batch.

    Writes ``advantage`` (standardized over the whole batch if ``average_gae``) and
    ``value_target = advantage + value`` (before standardization).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({"state_value": torch.zeros(1, 3, 1), "next": {
        ...     "state_value": torch.zeros(1, 3, 1), "reward": torch.ones(1, 3, 1),
        ...     "done": torch.zeros(1, 3, 1, dtype=torch.bool)}}, [1, 3])
        >>> GAE(gamma=0.5, lmbda=1.0, value_network=None)(batch)["advantage"].flatten()
        tensor([1.7500, 1.5000, 1.0000])
    """

    def __init__(
        self,
        *,
        gamma: Coefficient,
        lmbda: Coefficient,
        value_network: torch.nn.Module | None,
        average_gae: bool = False,
        differentiable: bool = False,
        vectorized: bool | None = None,
        skip_existing: bool | None = None,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        shifted: bool = False,
        device: torch.device | None = None,
        time_dim: int | None = None,
    ):
        check_coefficient("gamma", gamma)
        check_coefficient("lmbda", lmbda)
        super().__init__(
            value_network=value_network,
            differentiable=differentiable,
            skip_existing=skip_existing,
            advantage_key=advantage_key,
            value_target_key=value_target_key,
            value_key=value_key,
            shifted=shifted,
            device=device,
            time_dim=time_dim,
        )
        self.gamma = gamma
        self.lmbda = lmbda
        self.average_gae = bool(average_gae)
        # Always vectorised; accepted so that TorchRL code keeps working.
        self.vectorized = vectorized

    def _estimate_plain(self, value, next_value, reward, done, terminated, time_dim):
        return vec_generalized_advantage_estimate(
            self.gamma, self.lmbda, value, next_value, reward, done, terminated, time_dim=time_dim
        )

    def _estimate(self, value, next_value, reward, done, terminated, time_dim):
        advantage, target = self._estimate_plain(
            value, next_value, reward, done, terminated, time_dim
        )
        if self.average_gae:
            advantage = _standardize(advantage)
        return advantage, target


class _ReturnEstimator(ValueEstimatorBase):
    """A return estimator: ``value_target`` is the return, ``advantage`` it minus the value."""

    def __init__(self, *, average_rewards: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.average_rewards = bool(average_rewards)

    def _returns(self, next_value, reward, done, terminated, time_dim):
        raise NotImplementedError

    def _estimate(self, value, next_value, reward, done, terminated, time_dim):
        if self.average_rewards:
            reward = _standardize(reward)
        target = self._returns(next_value, reward, done, terminated, time_dim)
        return target - value, target


class TD0Estimator(_ReturnEstimator):
    """One-step temporal-difference target: ``reward + gamma * (1 - terminated) * next_value``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({"state_value": torch.zeros(2, 1), "next": {
        ...     "state_value": torch.full((2, 1), 2.0), "reward": torch.ones(2, 1),
        ...     "done": torch.tensor([[False], [True]])}}, [2])
        >>> TD0Estimator(gamma=0.5, value_network=None)(batch)["value_target"].flatten()
        tensor([2., 1.])
    """

    def __init__(
        self,
        *,
        gamma: Coefficient,
        value_network: torch.nn.Module | None,
        shifted: bool = False,
        average_rewards: bool = False,
        differentiable: bool = False,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        skip_existing: bool | None = None,
        device: torch.device | None = None,
    ):
        check_coefficient("gamma", gamma)
        super().__init__(
            value_network=value_network,
            shifted=shifted,
            average_rewards=average_rewards,
            differentiable=differentiable,
            advantage_key=advantage_key,
            value_target_key=value_target_key,
            value_key=value_key,
            skip_existing=skip_existing,
            device=device,
        )
        self.gamma = gamma

    def _time_dim(self, tensordict, time_dim):
        # TD(0) needs no time dimension: any batch shape works.
        return 0

    def _returns(self, next_value, reward, done, terminated, time_dim):
        return td0_return_estimate(self.gamma, next_value, reward, terminated)


class TDLambdaEstimator(_ReturnEstimator):
    """TD(lambda) target; ``advantage`` is the target minus the value.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({"state_value": torch.zeros(1, 2, 1), "next": {
        ...     "state_value": torch.zeros(1, 2, 1), "reward": torch.ones(1, 2, 1),
        ...     "done": torch.zeros(1, 2, 1, dtype=torch.bool)}}, [1, 2])
        >>> TDLambdaEstimator(gamma=1.0, lmbda=0.5, value_network=None)(batch)["value_target"].flatten()
        tensor([1.5000, 1.0000])
    """

    def __init__(
        self,
        *,
        gamma: Coefficient,
        lmbda: Coefficient,
        value_network: torch.nn.Module | None,
        average_rewards: bool = False,
        differentiable: bool = False,
        vectorized: bool = True,
        skip_existing: bool | None = None,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        shifted: bool = False,
        device: torch.device | None = None,
        time_dim: int | None = None,
    ):
        check_coefficient("gamma", gamma)
        check_coefficient("lmbda", lmbda)
        super().__init__(
            value_network=value_network,
            average_rewards=average_rewards,
            differentiable=differentiable,
            skip_existing=skip_existing,
            advantage_key=advantage_key,
            value_target_key=value_target_key,
            value_key=value_key,
            shifted=shifted,
            device=device,
            time_dim=time_dim,
        )
        self.gamma = gamma
        self.lmbda = lmbda
        self.vectorized = vectorized

    def _returns(self, next_value, reward, done, terminated, time_dim):
        return vec_td_lambda_return_estimate(
            self.gamma, self.lmbda, next_value, reward, done, terminated, time_dim=time_dim
        )


class TD1Estimator(TDLambdaEstimator):
    """TD(1) (Monte-Carlo, bootstrapped at truncations) target; TD(lambda) with ``lmbda=1``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({"state_value": torch.zeros(1, 2, 1), "next": {
        ...     "state_value": torch.zeros(1, 2, 1), "reward": torch.ones(1, 2, 1),
        ...     "done": torch.zeros(1, 2, 1, dtype=torch.bool)}}, [1, 2])
        >>> TD1Estimator(gamma=0.5, value_network=None)(batch)["value_target"].flatten()
        tensor([1.5000, 1.0000])
    """

    def __init__(
        self,
        *,
        gamma: Coefficient,
        value_network: torch.nn.Module | None,
        average_rewards: bool = False,
        differentiable: bool = False,
        skip_existing: bool | None = None,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        shifted: bool = False,
        device: torch.device | None = None,
        time_dim: int | None = None,
    ):
        super().__init__(
            gamma=gamma,
            lmbda=1.0,
            value_network=value_network,
            average_rewards=average_rewards,
            differentiable=differentiable,
            skip_existing=skip_existing,
            advantage_key=advantage_key,
            value_target_key=value_target_key,
            value_key=value_key,
            shifted=shifted,
            device=device,
            time_dim=time_dim,
        )


# ---------------------------------------------------------------------- helpers


def _next(key: NestedKey) -> tuple[str, ...]:
    return ("next", key) if isinstance(key, str) else ("next", *key)


def _read_output(out: TensorDictBase, key: NestedKey, network) -> torch.Tensor:
    value = out.get(key, None)
    if value is None:
        raise KeyError(
            f"the value network did not write {key!r} (its out_keys are "
            f"{list(getattr(network, 'out_keys', []))}); set the value key with set_keys(value=...)"
        )
    return value


def _params_context(params, network):
    if params is None:
        return contextlib.nullcontext()
    return params.to_module(network)
