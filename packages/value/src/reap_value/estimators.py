"""Module estimators that read a TensorDict batch and write ``advantage`` and ``value_target``,
with TorchRL's constructors, keys, methods and keyword dispatch.

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
from tensordict.nn import TensorDictModuleBase, composite_lp_aggregate, dispatch, skip_existing
from tensordict.utils import unravel_key

from reap_value._checks import Coefficient, check_coefficient
from reap_value._standardize import standardize, standardize_by_group
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

    ``sample_log_prob`` (read by ``VTrace``) defaults to ``"sample_log_prob"``, or to
    ``"action_log_prob"`` when :func:`tensordict.nn.composite_lp_aggregate` is off, as in TorchRL.

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
    steps_to_next_obs: NestedKey = "steps_to_next_obs"
    sample_log_prob: NestedKey | None = None

    def __post_init__(self):
        if self.sample_log_prob is None:
            aggregate = composite_lp_aggregate(nowarn=True)
            self.sample_log_prob = "sample_log_prob" if aggregate else "action_log_prob"


def _positive_int(value, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer or None, got {type(value)}.")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}.")
    return value


class ValueEstimatorBase(TensorDictModuleBase):
    """Shared machinery: keys, the single value-network call and time-dimension handling.

    Keyword arguments common to every estimator (TorchRL's): ``value_network`` (a
    TensorDictModule, or None to read ``"state_value"`` and ``("next", "state_value")`` from
    the batch), ``shifted`` (a bool; reap calls the network once on root and ``"next"``
    whatever it says, so every step's values are exact and ``"shifted_valid"`` is all True),
    ``shifted_budget`` (>= 1), ``differentiable`` (grad mode on inside the call; the network's
    parameters never get gradients, the next value is detached), ``skip_existing`` (reuse values
    already in the batch), ``device``, ``deactivate_vmap`` (reap never vmaps: no effect),
    ``value_chunk_size`` / ``num_chunks`` (``num_chunk``) / ``value_chunk_dim`` (call the
    network on chunks of the batch), ``group_key`` (standardize within groups of this integer
    entry). ``advantage_key``, ``value_target_key`` and ``value_key`` are refused, as in
    TorchRL: use :meth:`set_keys`.

    Examples:
        >>> from reap_value import TD0Estimator
        >>> TD0Estimator(gamma=0.9, value_network=None).tensor_keys.advantage
        'advantage'
    """

    _AcceptedKeys = AcceptedKeys
    default_keys = AcceptedKeys
    _vmap_randomness = None

    def __init__(
        self,
        *,
        value_network: torch.nn.Module | None,
        shifted: bool = False,
        differentiable: bool = False,
        skip_existing: bool | None = None,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        device: torch.device | None = None,
        deactivate_vmap: bool = False,
        value_chunk_size: int | None = None,
        num_chunks: int | None = None,
        num_chunk: int | None = None,
        value_chunk_dim: int = 0,
        shifted_budget: int = 1,
        group_key: NestedKey | None = None,
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
        for name, key in (("advantage_key", advantage_key), ("value_target_key", value_target_key),
                          ("value_key", value_key)):
            if key is not None:
                raise RuntimeError(
                    f"Setting '{name}' via constructor is deprecated, use "
                    f".set_keys({name.removesuffix('_key')}='some_key') instead."
                )
        if shifted is not True and shifted is not False:
            raise ValueError(f"shifted must be a boolean, got {shifted!r}.")
        if isinstance(shifted_budget, bool) or not isinstance(shifted_budget, int) or shifted_budget < 1:
            raise ValueError(f"shifted_budget must be >= 1, got {shifted_budget}.")
        if time_dim is not None and (isinstance(time_dim, bool) or not isinstance(time_dim, int)):
            raise TypeError(f"time_dim must be an int or None, got {type(time_dim).__name__}")
        if isinstance(value_chunk_dim, bool) or not isinstance(value_chunk_dim, int):
            raise TypeError(f"value_chunk_dim must be an integer, got {type(value_chunk_dim)}.")
        self.value_chunk_size = _positive_int(value_chunk_size, "value_chunk_size")
        num_chunks, num_chunk = _positive_int(num_chunks, "num_chunks"), _positive_int(num_chunk, "num_chunk")
        if num_chunks is not None and num_chunk is not None and num_chunks != num_chunk:
            raise ValueError("num_chunks and num_chunk cannot both be set to different values.")
        self.num_chunks = num_chunks if num_chunk is None else num_chunk
        if self.value_chunk_size is not None and self.num_chunks is not None:
            raise ValueError(
                "value_chunk_size and num_chunks cannot both be set. Use value_chunk_size to "
                "specify a chunk size or num_chunks to specify a number of chunks."
            )
        # Not a submodule, as in TorchRL: the estimator's parameters and state_dict leave it out.
        self.__dict__["value_network"] = value_network
        self.value_chunk_dim = value_chunk_dim
        self.shifted = shifted
        self.shifted_budget = shifted_budget
        self.differentiable = bool(differentiable)
        self.skip_existing = skip_existing
        self.deactivate_vmap = deactivate_vmap
        self.group_key = None if group_key is None else unravel_key(group_key)
        self.time_dim = time_dim
        if device is None:
            device = torch.get_default_device()
        self._device = device
        self.dep_keys = {}
        self._tensor_keys = AcceptedKeys()

    @classmethod
    def for_loss(cls, loss_module, **hyperparams):
        """An estimator for ``loss_module``: its ``critic_network`` (or ``value_network``) unless
        ``value_network=`` is given, the other keyword arguments passed on.

        Examples:
            >>> from reap_value import TD0Estimator
            >>> class Loss:
            ...     critic_network = None
            >>> TD0Estimator.for_loss(Loss(), gamma=0.9).value_network is None
            True
        """
        if "value_network" not in hyperparams:
            network = getattr(loss_module, "critic_network", None)
            hyperparams["value_network"] = (
                network if network is not None else getattr(loss_module, "value_network", None)
            )
        return cls(**hyperparams)

    def _coefficient(self, name: str, value: Coefficient) -> None:
        check_coefficient(name, value)
        tensor = value.to(self._device) if isinstance(value, torch.Tensor) else torch.tensor(value, device=self._device)
        self.register_buffer(name, tensor)

    # ------------------------------------------------------------------ keys

    @property
    def tensor_keys(self) -> AcceptedKeys:
        """The keys in use (see :class:`AcceptedKeys`)."""
        return self._tensor_keys

    @tensor_keys.setter
    def tensor_keys(self, value: AcceptedKeys):
        if not isinstance(value, AcceptedKeys):
            raise ValueError("value must be an instance of _AcceptedKeys")
        self._tensor_keys = value

    advantage_key = property(lambda self: self._tensor_keys.advantage)
    value_key = property(lambda self: self._tensor_keys.value)
    value_target_key = property(lambda self: self._tensor_keys.value_target)
    reward_key = property(lambda self: self._tensor_keys.reward)
    done_key = property(lambda self: self._tensor_keys.done)
    terminated_key = property(lambda self: self._tensor_keys.terminated)
    steps_to_next_obs_key = property(lambda self: self._tensor_keys.steps_to_next_obs)
    sample_log_prob_key = property(lambda self: self._tensor_keys.sample_log_prob)

    def set_keys(self, **kwargs: NestedKey) -> ValueEstimatorBase:
        """Change the keys read and written; returns ``self``.

        Errors as TorchRL's: a ``KeyError`` for an unknown name or a value key the value
        network does not write, a ``ValueError`` for a key that is not a str or tuple of str.

        Examples:
            >>> from reap_value import TD0Estimator
            >>> est = TD0Estimator(gamma=0.9, value_network=None).set_keys(value="v")
            >>> est.tensor_keys.value
            'v'
        """
        known = {f.name for f in dataclasses.fields(AcceptedKeys)}
        for name, key in kwargs.items():
            if key is None:
                raise ValueError("tensordict keys cannot be None")
            if not isinstance(key, (str, tuple)):
                raise ValueError(
                    f"key name must be of type NestedKey (Union[str, Tuple[str]]) but got {type(key)}"
                )
            if name not in known:
                raise KeyError(
                    f"{name} is not an accepted tensordict key for advantages; accepted: {sorted(known)}"
                )
            key = kwargs[name] = unravel_key(key)
            out_keys = getattr(self.value_network, "out_keys", None)
            if name == "value" and out_keys is not None and key not in out_keys:
                raise KeyError(f"value key '{key}' not found in value network out_keys {out_keys}")
        self._tensor_keys = dataclasses.replace(self._tensor_keys, **kwargs)
        return self

    @property
    def in_keys(self) -> list[NestedKey]:
        keys = self._tensor_keys
        network_keys = list(getattr(self.value_network, "in_keys", None) or [])
        in_keys = []
        if network_keys:
            signals = [_next(keys.reward), _next(keys.done), _next(keys.terminated)]
            in_keys = network_keys + signals + [_next(k) for k in network_keys]
        if self.group_key is not None and self.group_key not in in_keys:
            in_keys.append(self.group_key)
        return in_keys

    @property
    def out_keys(self) -> list[NestedKey]:
        return [self._tensor_keys.advantage, self._tensor_keys.value_target]

    # ------------------------------------------------------------------ TorchRL's flags

    @property
    def is_functional(self) -> bool:
        return False

    @property
    def is_stateless(self) -> bool:
        return False

    @property
    def vmap_randomness(self):
        """Kept for TorchRL code; reap calls the value network without ``vmap``."""
        return "error" if self._vmap_randomness is None else self._vmap_randomness

    def set_vmap_randomness(self, value):
        self._vmap_randomness = value

    # ------------------------------------------------------------------ values

    def _values(self, tensordict, params, target_params, dim):
        """Value and next value (detached); one network call for both unless ``target_params``
        differ from ``params``."""
        key = self._tensor_keys.value
        next_key = _next(key)
        network = self.value_network
        present = key in tensordict.keys(True) and next_key in tensordict.keys(True)
        skip = self.skip_existing if self.skip_existing is not None else skip_existing()
        if network is None or (present and skip):
            if not present:
                missing = key if key not in tensordict.keys(True) else next_key
                raise KeyError(
                    f"value_network is None, so the batch must hold {key!r} and {next_key!r}; "
                    f"{missing!r} is missing"
                )
            next_value = tensordict.get(next_key)
            return tensordict.get(key), next_value if network is None else next_value.detach()
        root, nxt = self._network_inputs(tensordict, dim)
        if params is not None:
            params = params.detach()
        if target_params is None or target_params is params:
            n = root.batch_size[0]
            values = self._call_network(torch.cat([root, nxt], 0), params)
            value, next_value = values[:n], values[n:]
        else:
            value = self._call_network(root, params)
            next_value = self._call_network(nxt, target_params)
        tensordict.set(key, value)
        tensordict.set(next_key, next_value)
        return value, next_value.detach()

    def _network_inputs(self, tensordict, dim):
        """The network's inputs at the root and under ``"next"``, as TorchRL prepares them: NaN
        next inputs replaced by the root's, ``is_init`` of the root carried to ``"next"``, and
        (``shifted=True`` only) missing next inputs taken from the following root step."""
        in_keys = list(self.value_network.in_keys)
        root = tensordict.select(*in_keys, strict=False)
        nxt = tensordict.get("next").select(*in_keys, strict=False)
        for k in root.keys(True, True):
            if k == "is_init":
                nxt.set(k, root.get(k) | nxt.get(k, torch.zeros_like(root.get(k))))
                continue
            later = nxt.get(k, None)
            if later is None:
                if not self.shifted:
                    raise KeyError(
                        f"the value network reads {k!r}, but the batch has no {_next(k)!r} (with "
                        "shifted=True it is taken from the following step)"
                    )
                nxt.set(k, self._following(tensordict, root.get(k), dim))
            elif later.is_floating_point() and later.shape == root.get(k).shape:
                nan = later.isnan()
                if nan.any():
                    nxt.set(k, torch.where(nan, root.get(k), later))
        return root, nxt

    def _following(self, tensordict, x, dim):
        """``x`` at the next step along time: the same step at a truncation and at the end."""
        length = x.shape[dim]
        following = torch.cat([x.narrow(dim, 1, length - 1), x.narrow(dim, length - 1, 1)], dim)
        done = tensordict.get(_next(self._tensor_keys.done))
        terminated = tensordict.get(_next(self._tensor_keys.terminated), done)
        truncated = (done & ~terminated).reshape(*tensordict.shape, -1).any(-1)
        return torch.where(truncated.reshape(*truncated.shape, *[1] * (x.ndim - truncated.ndim)), x, following)

    def _call_network(self, data, params):
        network, key = self.value_network, self._tensor_keys.value
        params_context = contextlib.nullcontext() if params is None else params.to_module(network)
        frozen = _frozen(network) if params is None and torch.is_grad_enabled() else contextlib.nullcontext()
        chunks = self._split_value_net_input(data)
        with params_context, frozen:
            values = [_read_output(network(chunk), key, network) for chunk in chunks]
        return values[0] if len(values) == 1 else torch.cat(values, self._chunk_dim(data.ndim))

    def _chunk_dim(self, ndim: int) -> int:
        if not -ndim <= self.value_chunk_dim < ndim:
            raise ValueError(f"value_chunk_dim={self.value_chunk_dim} is out of bounds for ndim={ndim}.")
        return self.value_chunk_dim % ndim

    def _split_value_net_input(self, data: TensorDictBase) -> tuple[TensorDictBase, ...]:
        """``data`` in the chunks the value network is called on (one piece without chunking)."""
        if self.num_chunks is None and self.value_chunk_size is None:
            return (data,)
        dim = self._chunk_dim(data.ndim)
        size = data.shape[dim]
        if self.num_chunks is not None:
            if min(self.num_chunks, size) <= 1:
                return (data,)
            return tuple(data.tensor_split(min(self.num_chunks, size), dim=dim))
        if size <= self.value_chunk_size:
            return (data,)
        return tuple(data.split(self.value_chunk_size, dim=dim))

    def _next_value(self, tensordict, target_params, dim):
        """The next value alone (``value_estimate`` without ``next_value``)."""
        next_key = _next(self._tensor_keys.value)
        if self.value_network is None:
            return tensordict.get(next_key)
        _, nxt = self._network_inputs(tensordict, dim)
        params = None if target_params is None else target_params.detach()
        return self._call_network(nxt, params)

    # ------------------------------------------------------------------ signals

    def _signals(self, tensordict):
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

    def _buffer(self, name: str, like: torch.Tensor) -> Coefficient:
        """The buffer on ``like``'s device; a 0-dim one on the CPU as a number (the functions'
        fast path, no per-call range check; its value is the buffer's, as in TorchRL)."""
        value = getattr(self, name)
        if value.device != like.device:
            value = value.to(like.device)
            setattr(self, name, value)
        return value.item() if value.ndim == 0 and value.device.type == "cpu" else value

    def _gamma(self, tensordict, reward):
        """``gamma``, raised to ``steps_to_next_obs`` where the batch has it (``MultiStep``)."""
        gamma = self._buffer("gamma", reward)
        steps = tensordict.get(self._tensor_keys.steps_to_next_obs, None)
        if steps is None:
            return gamma
        return torch.as_tensor(gamma, dtype=reward.dtype, device=reward.device) ** steps.view_as(reward)

    def _group_ids(self, tensordict):
        if self.group_key is None:
            return None
        groups = tensordict.get(self.group_key, None)
        if groups is None:
            raise KeyError(
                f"group_key {self.group_key!r} is missing from the tensordict; it is needed to "
                "standardize within groups."
            )
        return groups

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
        if not -ndim <= time_dim < ndim:
            raise ValueError(
                f"time_dim={time_dim} is out of range for a batch with {ndim} batch dimension(s)"
            )
        return time_dim % ndim

    # ------------------------------------------------------------------ forward

    def _estimate(self, tensordict, value, next_value, time_dim):
        """``(advantage, value_target)`` from the values (each subclass)."""
        raise NotImplementedError

    @dispatch
    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
        time_dim: int | None = None,
    ) -> TensorDictBase:
        """Write the advantage and value target into ``tensordict`` and return it.

        Called with keyword tensors instead (``module(obs=..., next_reward=..., next_done=...,
        next_terminated=..., next_obs=...)``), it returns ``(advantage, value_target)``.
        """
        dim = _check_batch(tensordict, self, time_dim)
        with torch.set_grad_enabled(self.differentiable):
            value, next_value = self._values(tensordict, params, target_params, dim)
            advantage, target = self._estimate(tensordict, value, next_value, dim)
        keys = self._tensor_keys
        tensordict.set(keys.advantage, advantage)
        tensordict.set(keys.value_target, target)
        if self.shifted:
            tensordict.set("shifted_valid", torch.ones(tensordict.shape, dtype=torch.bool, device=advantage.device))
        return tensordict


class GAE(ValueEstimatorBase):
    """Generalized advantage estimation over a TensorDict batch.

    Writes ``advantage`` (standardized over the whole batch, or within each group of
    ``group_key``, if ``average_gae``) and ``value_target = advantage + value`` (before
    standardization). ``auto_reset_env=True`` bootstraps truncated steps from the value of the
    step itself (``("next", "truncated")``), as TorchRL does for envs whose last ``"next"``
    observation is not valid. ``vectorized`` is kept for TorchRL code (reap always runs its scan).
    See :class:`ValueEstimatorBase` for the other keywords.

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
        auto_reset_env: bool = False,
        deactivate_vmap: bool = False,
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
            deactivate_vmap=deactivate_vmap,
            value_chunk_size=value_chunk_size,
            num_chunks=num_chunks,
            num_chunk=num_chunk,
            value_chunk_dim=value_chunk_dim,
            shifted_budget=shifted_budget,
            group_key=group_key,
            time_dim=time_dim,
        )
        self._coefficient("gamma", gamma)
        self._coefficient("lmbda", lmbda)
        self.average_gae = bool(average_gae)
        self.vectorized = vectorized
        self.auto_reset_env = bool(auto_reset_env)

    @property
    def vectorized(self):
        return False if torch.compiler.is_compiling() else self._vectorized

    @vectorized.setter
    def vectorized(self, value):
        self._vectorized = value

    # hooks that MultiAgentGAE overrides (TorchRL's names)
    def _prepare_signals(self, reward, done, terminated, value):
        return reward, done, terminated

    def _broadcast_optional(self, tensor, value):
        return tensor

    def _normalize_advantage(self, advantage, groups=None):
        if groups is not None:
            return standardize_by_group(advantage, groups)
        return standardize(advantage, eps=1e-4)

    def _advantage(self, tensordict, value, next_value, time_dim, *, auto_reset):
        reward, done, terminated = self._signals(tensordict)
        gamma = self._gamma(tensordict, reward)
        lmbda = self._buffer("lmbda", reward)
        reward, done, terminated = self._prepare_signals(reward, done, terminated, value)
        if auto_reset:
            truncated = self._broadcast_optional(tensordict.get(("next", "truncated")), value)
            if truncated.any():
                reward = reward + gamma * value * truncated
            terminated = done
        return vec_generalized_advantage_estimate(
            gamma, lmbda, value, next_value, reward, done, terminated, time_dim=time_dim
        )

    def _estimate(self, tensordict, value, next_value, time_dim):
        advantage, target = self._advantage(
            tensordict, value, next_value, time_dim, auto_reset=self.auto_reset_env
        )
        if self.average_gae:
            advantage = self._normalize_advantage(advantage, groups=self._group_ids(tensordict))
        return advantage, target

    def value_estimate(
        self,
        tensordict: TensorDictBase,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
        time_dim: int | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """The value target (``advantage + value``, unstandardized) for ``tensordict``; the values
        are written into it, the advantage is not.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> batch = TensorDict({"state_value": torch.zeros(1, 2, 1), "next": {
            ...     "state_value": torch.ones(1, 2, 1), "reward": torch.ones(1, 2, 1),
            ...     "done": torch.zeros(1, 2, 1, dtype=torch.bool)}}, [1, 2])
            >>> GAE(gamma=0.5, lmbda=1.0, value_network=None).value_estimate(batch).flatten()
            tensor([2.2500, 1.5000])
        """
        _no_extra_arguments("value_estimate", kwargs)
        dim = _check_batch(tensordict, self, time_dim)
        value, next_value = self._values(tensordict, params, target_params, dim)
        return self._advantage(tensordict, value, next_value, dim, auto_reset=False)[1]


class _ReturnEstimator(ValueEstimatorBase):
    """A return estimator: ``value_target`` is the return, ``advantage`` it minus the value."""

    _reward_eps = 1e-5

    def __init__(self, *, average_rewards: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.average_rewards = bool(average_rewards)

    def _returns(self, gamma, next_value, reward, done, terminated, time_dim):
        raise NotImplementedError

    def _estimate(self, tensordict, value, next_value, time_dim):
        target = self.value_estimate(tensordict, next_value=next_value, time_dim=time_dim)
        return target - value, target

    def value_estimate(
        self,
        tensordict: TensorDictBase,
        target_params: TensorDictBase | None = None,
        next_value: torch.Tensor | None = None,
        time_dim: int | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """The value target for ``tensordict``, from ``next_value`` if given (else the value
        network on ``"next"``, with ``target_params`` if given). With ``average_rewards`` the
        standardized rewards are written back into ``tensordict``, as in TorchRL.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> from reap_value import TD0Estimator
            >>> batch = TensorDict({"next": {"state_value": torch.ones(2, 1),
            ...     "reward": torch.ones(2, 1), "done": torch.zeros(2, 1, dtype=torch.bool)}}, [2])
            >>> TD0Estimator(gamma=0.5, value_network=None).value_estimate(batch).flatten()
            tensor([1.5000, 1.5000])
        """
        _no_extra_arguments("value_estimate", kwargs)
        dim = _check_batch(tensordict, self, time_dim)
        reward, done, terminated = self._signals(tensordict)
        gamma = self._gamma(tensordict, reward)
        if self.average_rewards:
            groups = self._group_ids(tensordict)
            if groups is None:
                reward = standardize(reward, eps=self._reward_eps)
            else:
                reward = standardize_by_group(reward, groups, eps=self._reward_eps)
            tensordict.set(_next(self._tensor_keys.reward), reward)
        if next_value is None:
            next_value = self._next_value(tensordict, target_params, dim)
        return self._returns(gamma, next_value, reward, done, terminated, dim)


class TD0Estimator(_ReturnEstimator):
    """One-step temporal-difference target: ``reward + gamma * (1 - terminated) * next_value``.

    See :class:`ValueEstimatorBase` for the keywords; ``average_rewards`` standardizes the
    rewards first (within ``group_key`` groups if set).

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
        deactivate_vmap: bool = False,
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
            average_rewards=average_rewards,
            differentiable=differentiable,
            advantage_key=advantage_key,
            value_target_key=value_target_key,
            value_key=value_key,
            skip_existing=skip_existing,
            device=device,
            deactivate_vmap=deactivate_vmap,
            value_chunk_size=value_chunk_size,
            num_chunks=num_chunks,
            num_chunk=num_chunk,
            value_chunk_dim=value_chunk_dim,
            shifted_budget=shifted_budget,
            group_key=group_key,
        )
        self._coefficient("gamma", gamma)

    def _returns(self, gamma, next_value, reward, done, terminated, time_dim):
        return td0_return_estimate(gamma, next_value, reward, terminated)


class TDLambdaEstimator(_ReturnEstimator):
    """TD(lambda) target; ``advantage`` is the target minus the value.

    See :class:`ValueEstimatorBase` for the keywords; ``average_rewards`` standardizes the
    rewards first, ``vectorized`` is kept for TorchRL code (reap always runs its scan).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> batch = TensorDict({"state_value": torch.zeros(1, 2, 1), "next": {
        ...     "state_value": torch.zeros(1, 2, 1), "reward": torch.ones(1, 2, 1),
        ...     "done": torch.zeros(1, 2, 1, dtype=torch.bool)}}, [1, 2])
        >>> TDLambdaEstimator(gamma=1.0, lmbda=0.5, value_network=None)(batch)["value_target"].flatten()
        tensor([1.5000, 1.0000])
    """

    _reward_eps = 1e-4

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
        deactivate_vmap: bool = False,
        value_chunk_size: int | None = None,
        num_chunks: int | None = None,
        num_chunk: int | None = None,
        value_chunk_dim: int = 0,
        shifted_budget: int = 1,
        group_key: NestedKey | None = None,
    ):
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
            deactivate_vmap=deactivate_vmap,
            value_chunk_size=value_chunk_size,
            num_chunks=num_chunks,
            num_chunk=num_chunk,
            value_chunk_dim=value_chunk_dim,
            shifted_budget=shifted_budget,
            group_key=group_key,
        )
        self._coefficient("gamma", gamma)
        self._coefficient("lmbda", lmbda)
        self.vectorized = vectorized

    @property
    def vectorized(self):
        return False if torch.compiler.is_compiling() else self._vectorized

    @vectorized.setter
    def vectorized(self, value):
        self._vectorized = value

    def _returns(self, gamma, next_value, reward, done, terminated, time_dim):
        lmbda = self._buffer("lmbda", reward)
        return vec_td_lambda_return_estimate(
            gamma, lmbda, next_value, reward, done, terminated, time_dim=time_dim
        )


class TD1Estimator(_ReturnEstimator):
    """TD(1) (Monte-Carlo, bootstrapped at truncations) target; TD(lambda) with ``lmbda=1``.

    See :class:`ValueEstimatorBase` for the keywords.

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
        deactivate_vmap: bool = False,
        value_chunk_size: int | None = None,
        num_chunks: int | None = None,
        num_chunk: int | None = None,
        value_chunk_dim: int = 0,
        shifted_budget: int = 1,
        group_key: NestedKey | None = None,
    ):
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
            deactivate_vmap=deactivate_vmap,
            value_chunk_size=value_chunk_size,
            num_chunks=num_chunks,
            num_chunk=num_chunk,
            value_chunk_dim=value_chunk_dim,
            shifted_budget=shifted_budget,
            group_key=group_key,
        )
        self._coefficient("gamma", gamma)

    def _returns(self, gamma, next_value, reward, done, terminated, time_dim):
        return vec_td_lambda_return_estimate(
            gamma, 1.0, next_value, reward, done, terminated, time_dim=time_dim
        )


# ---------------------------------------------------------------------- helpers


def _next(key: NestedKey) -> tuple[str, ...]:
    return ("next", key) if isinstance(key, str) else ("next", *key)


def _check_batch(tensordict, module, time_dim) -> int:
    """The time index of ``tensordict``, after TorchRL's checks of the input."""
    if not isinstance(tensordict, TensorDictBase):
        raise TypeError(f"tensordict must be a TensorDict, got {type(tensordict).__name__}")
    if tensordict.batch_dims < 1:
        raise RuntimeError(
            "Expected input tensordict to have at least one dimension, got "
            f"tensordict.batch_size = {tensordict.batch_size}"
        )
    if not isinstance(tensordict.get("next", None), TensorDictBase):
        raise KeyError("the batch has no 'next' entry (a TensorDict of next observations, rewards and flags)")
    return module._time_dim(tensordict, time_dim)


def _no_extra_arguments(name: str, kwargs) -> None:
    if kwargs:
        raise TypeError(f"{name} got unexpected arguments {sorted(kwargs)}")


def _read_output(out: TensorDictBase, key: NestedKey, network) -> torch.Tensor:
    value = out.get(key, None)
    if value is None:
        raise KeyError(
            f"the value network did not write {key!r} (its out_keys are "
            f"{list(getattr(network, 'out_keys', []))}); set the value key with set_keys(value=...)"
        )
    return value


@contextlib.contextmanager
def _frozen(network: torch.nn.Module):
    """The network's parameters out of autograd for the call (TorchRL's ``hold_out_net``)."""
    params = [p for p in network.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)
