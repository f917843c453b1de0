"""Envs that reset themselves: ``AutoResetEnv`` and its ``AutoResetTransform`` (TorchRL's).

An auto-resetting env's ``_step`` starts the next episode of an env that is done and returns
that episode's first observation in place of the last one. ``SomeEnv(..., auto_reset=True)``
(any env class) wraps such an env in ``AutoResetEnv(env, AutoResetTransform())``: at a done step
the transform keeps the observations the env returned for the next reset and fills them in
``"next"`` with ``fill_float`` (NaN), ``fill_int`` (-1) and ``fill_bool`` (False); the reset that
follows (``rollout``, ``step_and_maybe_reset``, a collector) gives the kept observations without
calling the env's ``_reset``. ``replace=False`` leaves the returned observations in ``"next"``.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap.envs import EnvBase
    >>> from reap.specs import Categorical, Composite, Unbounded
    >>> class Counter(EnvBase):  # done at 2, then counts again from 0 on its own
    ...     def __init__(self, **kwargs):
    ...         super().__init__(**kwargs)
    ...         self.observation_spec = Composite(observation=Unbounded((1,)))
    ...         self.action_spec, self.reward_spec = Categorical(2, (1,)), Unbounded((1,))
    ...     def _reset(self, td):
    ...         self.count = torch.zeros(1)
    ...         return TensorDict(observation=self.count.clone())
    ...     def _step(self, td):
    ...         self.count += 1
    ...         done = self.count >= 2
    ...         obs = torch.zeros(1) if done else self.count.clone()
    ...         self.count = obs.clone()
    ...         return TensorDict(observation=obs, reward=torch.ones(1), done=done, terminated=done)
    ...     def _set_seed(self, seed):
    ...         pass
    >>> env = Counter(auto_reset=True)
    >>> rollout = env.rollout(4, break_when_any_done=False)
    >>> rollout["next", "observation"].flatten().tolist()
    [1.0, nan, 1.0, nan]
    >>> rollout["observation"].flatten().tolist()
    [0.0, 1.0, 0.0, 1.0]
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from reap.envs.done import complete_done
from reap.envs.transforms.transform import Transform
from reap.envs.transforms.transformed_env import TransformedEnv


class AutoResetTransform(Transform):
    """Keeps what an auto-resetting env returns at a done step for the reset that follows, and
    fills it in ``"next"`` (floats ``fill_float``, signed integers ``fill_int``, the rest
    ``fill_bool``; None: kept as returned). ``replace=False`` fills nothing. Its env must be an
    ``AutoResetEnv`` (``SomeEnv(..., auto_reset=True)`` builds one).
    """

    def __init__(self, *, replace: bool | None = None, fill_float="nan", fill_int: int | None = -1,
                 fill_bool: bool | None = False):
        super().__init__()
        if replace not in (None, True, False):
            raise TypeError(f"AutoResetTransform: replace must be True, False or None, got {replace!r}")
        fill_float = float("nan") if fill_float == "nan" else fill_float
        for name, value, kind in (("fill_float", fill_float, float), ("fill_int", fill_int, int),
                                  ("fill_bool", fill_bool, bool)):
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            fits = isinstance(value, bool) if kind is bool else numeric and (kind is float or isinstance(value, int))
            if value is not None and not fits:
                raise TypeError(f"AutoResetTransform: {name} must be a {kind.__name__} or None, got {value!r}")
        if replace is False:
            fill_float = fill_int = fill_bool = None
        self.fill_float = fill_float
        self.fill_int = fill_int
        self.fill_bool = fill_bool
        self._kept: list | None = None  # (group, part, key, value) of the last done step
        self._done_groups: list | None = None  # _groups' answer: the base env's specs do not change

    def _env(self) -> AutoResetEnv:
        if type(self.container) is not AutoResetEnv:
            raise RuntimeError(f"The {type(self).__name__} container must be of type AutoResetEnv.")
        return self.container

    def _fill(self, value: torch.Tensor):
        if value.dtype.is_floating_point:
            return self.fill_float
        return self.fill_int if value.dtype.is_signed else self.fill_bool

    def _groups(self) -> list:
        """(group key, done key, its observation keys relative to the group), per done group: the
        top-level one alone, or each nested group (TorchRL's simple and grouped cases)."""
        if self._done_groups is None:
            self._done_groups = self._find_groups(self._env().base_env)
        return self._done_groups

    @staticmethod
    def _find_groups(base) -> list:
        observations = list(base.full_observation_spec.keys(True, True))
        done_keys = [k for k in base.done_keys if (k if isinstance(k, str) else k[-1]) == "done"]
        if "done" in done_keys:
            return [((), "done", observations)]
        return [(key[:-1], key, [k[len(key) - 1:] for k in observations
                                 if isinstance(k, tuple) and k[:len(key) - 1] == key[:-1]]) for key in done_keys]

    @staticmethod
    def _parts(tensordict: TensorDictBase, group: tuple, mask: torch.Tensor) -> list:
        """(index, sub-TensorDict, its mask) of ``group``: one per stacked TensorDict of a lazy stack."""
        sub = tensordict.get(group) if group else tensordict
        if isinstance(sub, LazyStackedTensorDict):
            return list(zip(range(len(sub.tensordicts)), sub.tensordicts, mask.unbind(sub.stack_dim)))
        return [(None, sub, mask)]

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        kept = []
        for group, done_key, keys in self._groups():
            done = next_tensordict.get(done_key)
            if not done.any():
                continue
            for index, part, mask in self._parts(next_tensordict, group, done.squeeze(-1)):
                for key in keys:
                    value = part.get(key)
                    kept.append((group, index, key, value))
                    fill = self._fill(value)
                    if fill is not None:
                        rows = mask.reshape(*mask.shape, *[1] * (value.ndim - mask.ndim))
                        part.set(key, torch.where(rows, torch.full_like(value, fill), value))
        self._kept = kept or None
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        self._env()
        kept, self._kept = self._kept, None
        for group, index, key, value in kept or ():
            sub = tensordict_reset.get(group) if group else tensordict_reset
            (sub if index is None else sub.tensordicts[index]).set(key, value)
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(f"{type(self).__name__} acts in an AutoResetEnv only (it has no offline use)")


class AutoResetEnv(TransformedEnv):
    """The env of an auto-resetting env and its ``AutoResetTransform``: a reset of done envs
    gives what the transform kept at their done step, without calling the base env's ``_reset``
    (the first reset, and any without reset flags, call it). Steps on TensorDicts.
    """

    _resets_itself = True  # envs that hold it (TransformedEnv, SerialEnv, ParallelEnv) step on TensorDicts

    def _rebuild(self) -> None:
        super()._rebuild()
        self.__dict__["_on_tensordicts"] = True  # the base env's own steps reset: TorchRL's hooks order them

    def _reset_base(self, tensordict, **kwargs):
        base = self.base_env
        if tensordict is not None and any(key in tensordict.keys(True) for key in base.reset_keys):
            # the done envs reset themselves at their last step: the transform fills in what they gave
            return complete_done(base.full_done_spec, tensordict.exclude(*base.reset_keys))
        return super()._reset_base(tensordict, **kwargs)

    def insert_transform(self, index: int, transform) -> TransformedEnv:
        raise RuntimeError(f"Cannot insert a transform in {type(self).__name__}: wrap it in a TransformedEnv "
                           "(TransformedEnv(env, transform))")


__all__ = ["AutoResetEnv", "AutoResetTransform"]
