"""``Compose``: transforms applied in order, and ``_CallableTransform`` for plain callables.

A ``Compose`` held by a ``TransformedEnv`` is live: ``append``, ``insert``, ``pop``, ``del`` and
item assignment rebuild the env's chain, as in TorchRL. Indexing with an int gives the
transform itself; a slice gives a new ``Compose`` of copies (``clone()``), which share the
buffers of the originals.

Examples:
    >>> from reap.envs import GymEnv
    >>> from reap.envs.transforms import Compose, RewardSum, StepCounter, TransformedEnv
    >>> env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter()))
    >>> env.transform.append(RewardSum())
    >>> sorted(env.reset().keys())
    ['done', 'episode_reward', 'observation', 'step_count', 'terminated', 'truncated']
    >>> type(env.transform[1:]).__name__, len(env.transform)
    ('Compose', 2)
"""

from __future__ import annotations

from textwrap import indent

from tensordict import TensorDictBase
from torch import nn

from reap.envs.transforms.transform import Transform


def as_transform(value, where: str) -> Transform:
    """``value`` as a transform: a callable ``td -> td`` is wrapped (TorchRL's rule)."""
    if isinstance(value, Transform):
        return value
    if type(value).__module__.startswith("torchrl."):
        from reap.envs.transforms.from_torchrl import as_reap_transform

        return as_reap_transform(value, where)
    if callable(value):
        return _CallableTransform(value)
    raise ValueError(f"{where} expected a transform or a callable, but received an object of type {type(value)} instead.")


class Compose(Transform):
    """Compose transforms: ``Compose(t1, t2)``, ``Compose([t1, t2])`` or ``Compose(transforms=[...])``."""

    def __init__(self, *transforms, **kwargs):
        if not transforms and "transforms" in kwargs:
            transforms = kwargs.pop("transforms")
        elif len(transforms) == 1 and isinstance(transforms[0], list):
            transforms = transforms[0]
        if kwargs:
            raise ValueError(f"Compose: unexpected keyword arguments {sorted(kwargs)}; pass the transforms")
        super().__init__()
        transforms = [as_transform(t, "Compose") for t in transforms]
        self.transforms = nn.ModuleList(transforms)
        for t in transforms:
            t.set_container(self)

    # ---- the chain, as a list ------------------------------------------------------------------
    def __iter__(self):
        yield from self.transforms

    def __len__(self) -> int:
        return len(self.transforms)

    def __getitem__(self, item):
        chosen = self.transforms[item]
        if isinstance(chosen, Transform):
            return chosen
        out = Compose(*(t.clone() for t in chosen))
        out.set_container(self.parent)
        return out

    def __setitem__(self, index, value) -> None:
        old = self.transforms[index]
        value = as_transform(value, "Compose.__setitem__")
        old.reset_parent()
        self.transforms[index] = value
        value.set_container(self)
        self._changed()

    def __delitem__(self, index) -> None:
        for t in self.transforms[index] if isinstance(index, slice) else [self.transforms[index]]:
            t.reset_parent()
        del self.transforms[index]
        self._changed()

    def append(self, transform) -> None:
        """Append ``transform`` (a ``Compose``'s transforms one by one)."""
        transform = as_transform(transform, "Compose.append")
        transform.eval()
        if type(self) is type(transform) is Compose:
            for t in list(transform):
                t.reset_parent()
                self.append(t)
            return
        self.transforms.append(transform)
        transform.set_container(self)
        self._changed()

    def insert(self, index: int, transform) -> None:
        """Insert ``transform`` at ``index`` (negative counts from the end, as ``list.insert``)."""
        transform = as_transform(transform, "Compose.insert")
        if abs(index) > len(self.transforms):
            raise ValueError(
                f"Index expected to be between [-{len(self.transforms)}, {len(self.transforms)}] got index={index}"
            )
        if index < 0:
            index += len(self.transforms)
        transform.eval()
        self.transforms.insert(index, transform)
        transform.set_container(self)
        self._changed()

    def pop(self, index: int | None = None) -> Transform:
        """Remove and return the transform at ``index`` (the last by default)."""
        if not len(self.transforms):
            raise IndexError("pop index -1 is out of range: the Compose is empty")
        index = len(self.transforms) - 1 if index is None else index
        transform = self.transforms.pop(index)
        transform.reset_parent()
        self._changed()
        return transform

    def _changed(self) -> None:
        """The chain changed: the env that holds it rebuilds its arrays and specs."""
        self.empty_cache()
        env = self.container
        if env is not None:
            env._rebuild()

    # ---- TorchRL's hooks, each transform in turn -----------------------------------------------
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            next_tensordict = t._call(next_tensordict)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            tensordict = t(tensordict)
        return tensordict

    def _step(self, tensordict, next_tensordict):
        for t in self.transforms:
            next_tensordict = t._step(tensordict, next_tensordict)
        return next_tensordict

    def _reset(self, tensordict, tensordict_reset):
        for t in self.transforms:
            tensordict_reset = t._reset(tensordict, tensordict_reset)
        return tensordict_reset

    def _inv_call(self, tensordict):
        for t in reversed(self.transforms):
            tensordict = t._inv_call(tensordict)
        return tensordict

    def _reset_env_preprocess(self, tensordict):
        for t in reversed(self.transforms):
            tensordict = t._reset_env_preprocess(tensordict)
        return tensordict

    def init(self, tensordict) -> None:
        for t in self.transforms:
            t.init(tensordict)

    def close(self) -> None:
        for t in self.transforms:
            t.close()

    def dump(self, **kwargs) -> None:
        for t in self.transforms:
            t.dump(**kwargs)

    def _chained(self, hook: str, spec):
        for t in self.transforms:
            spec = getattr(t, hook)(spec)
        return spec

    def transform_output_spec(self, output_spec):
        return self._chained("transform_output_spec", output_spec)

    def transform_input_spec(self, input_spec):
        return self._chained("transform_input_spec", input_spec)

    def transform_observation_spec(self, observation_spec):
        return self._chained("transform_observation_spec", observation_spec)

    def transform_reward_spec(self, reward_spec):
        return self._chained("transform_reward_spec", reward_spec)

    def transform_done_spec(self, done_spec):
        return self._chained("transform_done_spec", done_spec)

    def transform_action_spec(self, action_spec):
        return self._chained("transform_action_spec", action_spec)

    def transform_state_spec(self, state_spec):
        return self._chained("transform_state_spec", state_spec)

    def transform_env_device(self, device):
        return self._chained("transform_env_device", device)

    def transform_env_batch_size(self, batch_size):
        return self._chained("transform_env_batch_size", batch_size)

    # ---- container, copies -----------------------------------------------------------------------
    def set_container(self, container) -> None:
        self.reset_parent()
        super().set_container(container)
        for t in self.transforms:
            t.set_container(self)

    def reset_parent(self) -> None:
        for t in self.transforms:
            t.reset_parent()
        super().reset_parent()

    def empty_cache(self) -> None:
        for t in self.transforms:
            t.empty_cache()
        super().empty_cache()

    def set_missing_tolerance(self, mode: bool = False) -> None:
        for t in self.transforms:
            t.set_missing_tolerance(mode)
        super().set_missing_tolerance(mode)

    def clone(self) -> Compose:
        return Compose(*(t.clone() for t in self.transforms))

    def to(self, *args, **kwargs) -> Compose:
        self.transforms = nn.ModuleList([t.to(*args, **kwargs) for t in self.transforms])
        return super().to(*args, **kwargs)

    def __repr__(self) -> str:
        if not len(self.transforms):
            return f"{type(self).__name__}()"
        inner = ",\n".join(indent(str(t), 4 * " ") for t in self.transforms)
        return f"{type(self).__name__}(\n{indent(inner, 4 * ' ')})"


class _CallableTransform(Transform):
    """A callable ``td -> td`` run on step and reset outputs (TorchRL's wrapper)."""

    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, *args, **kwargs):
        return self.func(*args, **kwargs)

    def _call(self, next_tensordict):
        return self.func(next_tensordict)

    def _inv_call(self, tensordict):
        return tensordict

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)
