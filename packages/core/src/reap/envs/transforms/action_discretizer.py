"""``ActionDiscretizer``: a bounded continuous action as a discrete one (DQN on Pendulum, say).

Examples:
    >>> import torch
    >>> from reap.envs import GymEnv
    >>> env = GymEnv("Pendulum-v1").append_transform(ActionDiscretizer(num_intervals=4))
    >>> type(env.action_spec).__name__, env.action_spec.nvec, env.action_spec.dtype
    ('MultiCategorical', tensor([4]), torch.int64)
    >>> td = env.reset()
    >>> td["action"] = torch.tensor([3])
    >>> env.transform.inv(td)["action"]  # the middle of the last of 4 bins over [-2, 2]
    tensor([1.5000])
"""

from __future__ import annotations

from enum import IntEnum

import torch

from reap.envs.transforms.transform import Transform
from reap.specs import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot


class ActionDiscretizer(Transform):
    """The env's ``Bounded`` action becomes ``num_intervals`` bins per entry (TorchRL's
    ``ActionDiscretizer``): the policy picks a bin (``Categorical``/``MultiCategorical``, or
    one-hot with ``categorical=False``) and the env is stepped with a value inside it.

    Args:
        num_intervals (int or torch.Tensor): bins per action entry; a tensor gives one count per
            entry of the action's last dim.
        action_key (NestedKey): the continuous action the env reads. Defaults to ``"action"``.
        out_action_key (NestedKey, optional): where the policy writes the discrete action.
            Defaults to ``action_key``; another key keeps the continuous action in the data (it
            moves to the state spec, so only the discrete one is drawn at random).
        sampling (ActionDiscretizer.SamplingStrategy, optional): where in its bin the value
            lies: ``MEDIAN`` (the middle, default), ``LOW`` (its lower edge), ``HIGH`` (its upper
            edge) or ``RANDOM`` (the lower edge plus a uniform draw over the bin's width, drawn
            per element). Override :meth:`custom_arange` for other positions.
        categorical (bool): indices (True, default) or one-hot vectors.
    """

    class SamplingStrategy(IntEnum):
        MEDIAN = 0
        LOW = 1
        HIGH = 2
        RANDOM = 3

    def __init__(self, num_intervals, action_key="action", out_action_key=None, sampling=None,
                 categorical: bool = True):
        out_action_key = action_key if out_action_key is None else out_action_key
        super().__init__(in_keys_inv=[action_key], out_keys_inv=[out_action_key])
        self.action_key, self.out_action_key = action_key, out_action_key
        if isinstance(num_intervals, torch.Tensor):
            self.register_buffer("num_intervals", num_intervals)
        elif isinstance(num_intervals, int) and not isinstance(num_intervals, bool) and num_intervals > 0:
            self.num_intervals = num_intervals
        else:
            raise ValueError(f"ActionDiscretizer: num_intervals must be a positive int or a tensor of them, "
                             f"got {num_intervals!r}")
        self.sampling = self.SamplingStrategy.MEDIAN if sampling is None else self.SamplingStrategy(sampling)
        self.categorical = categorical
        self.bins = None  # per action entry, the value each bin steps the env with (set with the specs)

    def __repr__(self) -> str:
        fields = (f"num_intervals={self.num_intervals}", f"action_key={self.action_key}",
                  f"out_action_key={self.out_action_key}", f"sampling={self.sampling}",
                  f"categorical={self.categorical}")
        return f"{type(self).__name__}(\n" + ",\n".join(f"    {f}" for f in fields) + ")"

    def custom_arange(self, nint: int, device) -> torch.Tensor:
        """Where each of ``nint`` bins' values lie, as fractions of the action's range in
        ``[0, 1]``: ``k / nint`` (LOW, RANDOM), ``(k + 1) / nint`` (HIGH), ``(k + 0.5) / nint``
        (MEDIAN)."""
        lower = torch.arange(nint, dtype=self.dtype, device=device) / nint
        if self.sampling not in (self.SamplingStrategy.HIGH, self.SamplingStrategy.MEDIAN):
            return lower
        upper = (1 - lower).flip(0)  # computed from the top, as TorchRL's (the same floats)
        return upper if self.sampling == self.SamplingStrategy.HIGH else (lower + upper) / 2

    def transform_input_spec(self, input_spec):
        if self.parent is None:
            raise RuntimeError(f"Cannot execute transform {type(self).__name__} without a parent env.")
        spec = self.parent.full_action_spec_unbatched[self.action_key]
        if not isinstance(spec, Bounded):
            raise TypeError(f"action spec type {type(spec)} is not supported. The action spec type must be Bounded.")
        self.dtype = spec.dtype
        scalar = not spec.shape
        low, high = spec.space.low, spec.space.high
        counts = self._counts(spec)
        if scalar:
            self.bins = [low + self.custom_arange(counts[0], spec.device) * (high - low)]
            self.jitters = (high - low) / counts[0]
        else:
            low, high = low.reshape(-1, spec.shape[-1])[0], high.reshape(-1, spec.shape[-1])[0]
            self.bins = [lo + self.custom_arange(n, spec.device) * (hi - lo) for lo, hi, n in zip(low, high, counts)]
            self.jitters = (high - low) / torch.as_tensor(counts, dtype=self.dtype, device=spec.device)
        # TorchRL's buffers (its checkpoints hold them): the bins' values when one count was given, the counts
        if not isinstance(self.num_intervals, torch.Tensor):
            self.register_buffer("intervals", self.bins[0] if scalar else torch.stack(self.bins))
        self.register_buffer("nvec", torch.as_tensor(counts[0] if scalar else counts, device=spec.device))
        if scalar:
            discrete = (Categorical(counts[0], device=spec.device) if self.categorical
                        else OneHot(counts[0], device=spec.device))
        elif self.categorical:
            discrete = MultiCategorical(counts, shape=spec.shape, device=spec.device, remove_singleton=False)
        else:
            discrete = MultiOneHot(counts, shape=(*spec.shape[:-1], sum(counts)), device=spec.device)
        batch = tuple(self.parent.batch_size)
        if batch:
            discrete = discrete.expand(*batch, *discrete.shape)
        input_spec = input_spec.clone()
        continuous = input_spec["full_action_spec", self.action_key]
        input_spec["full_action_spec", self.out_action_key] = discrete
        if self.out_action_key != self.action_key:
            input_spec["full_state_spec", self.action_key] = continuous.clone()
            del input_spec["full_action_spec", self.action_key]
        return input_spec

    def _counts(self, spec) -> list[int]:
        """Bins per action entry, checked against the action's last dim."""
        given = self.num_intervals
        entries = spec.shape[-1] if spec.shape else 1
        if isinstance(given, torch.Tensor):
            if given.ndim > 1:
                raise RuntimeError(f"Cannot use num_intervals with shape {given.shape}")
            given = given.reshape(-1).tolist()
            if len(given) == 1:
                given = given * entries
            if len(given) != entries:
                raise ValueError(f"ActionDiscretizer: num_intervals has {len(given)} counts but the action "
                                 f"{self.action_key!r} has {entries} entries")
            return [int(n) for n in given]
        return [int(given)] * entries

    def _init(self) -> None:
        try:
            self.container.full_action_spec  # noqa: B018 (builds the specs, and with them the bins)
        except AttributeError:
            raise RuntimeError(f"Cannot execute transform {type(self).__name__} without a parent env.") from None

    def inv(self, tensordict):
        if self.out_action_key == self.action_key:
            return super().inv(tensordict)
        return self._inv_call(tensordict)  # the discrete action stays beside the continuous one

    def _inv_call(self, tensordict):
        if self.bins is None:
            self._init()
        action = tensordict.get(self.out_action_key)
        if self.nvec.ndim == 0:  # one entry: an index (or one-hot row) into its bins
            index = action if self.categorical else action.long().argmax(-1)
            value = self.bins[0][index.long()]
        else:
            if self.categorical:
                parts = action.long().unbind(-1)
            else:
                parts = [part.long().argmax(-1) for part in action.split(self.nvec.tolist(), dim=-1)]
            value = torch.stack([bins[index] for bins, index in zip(self.bins, parts)], -1)
        if self.sampling == self.SamplingStrategy.RANDOM:
            value = value + self.jitters * torch.rand_like(value)
        return tensordict.set(self.action_key, value)
