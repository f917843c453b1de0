"""TorchRL transforms handed to a reap env: a ``TensorDictPrimer`` is converted, others refused.

TorchRL's ``LSTMModule.make_tensordict_primer()`` makes a TorchRL ``TensorDictPrimer``; a reap env
takes it as reap's primer with the same keys, specs, defaults and options. Any other TorchRL
transform is an error naming reap's transform of the same name to use instead, where reap has one.

Examples:
    >>> from reap.envs.transforms import StepCounter
    >>> from reap.envs.transforms.from_torchrl import as_reap_transform
    >>> type(as_reap_transform(StepCounter(), "append_transform")).__name__
    'StepCounter'
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from reap.envs.transforms.primer import TensorDictPrimer
from reap.envs.transforms.transform import Transform
from reap.specs import Binary, Bounded, Categorical, Unbounded


def as_reap_transform(transform, where: str) -> Transform:
    """``transform`` as a reap ``Transform`` (a TorchRL primer converted), else a ``TypeError``."""
    if isinstance(transform, Transform):
        return transform
    name = type(transform).__name__
    if not type(transform).__module__.startswith("torchrl."):
        raise TypeError(f"{where}: expected a Transform, got {name}")
    if name == "TensorDictPrimer":
        return _primer(transform, where)
    import reap.envs.transforms as ours

    fix = (f"use reap's (`from reap.envs import {name}`) with the same arguments"
           if name in ours.__all__ else "reap has no transform of that name")
    raise TypeError(f"{where}: {name} is TorchRL's transform; a reap env takes reap's transforms: {fix}")


def _primer(theirs, where: str) -> TensorDictPrimer:
    """Reap's ``TensorDictPrimer`` with the keys, specs, defaults and options of TorchRL's ``theirs``."""
    defaults = theirs.default_value  # one per key (a dict or TensorDict), or one callable for all
    if isinstance(defaults, TensorDictBase):
        defaults = dict(defaults.items(True, True))
    if isinstance(defaults, dict):
        defaults = {k: float(v) if isinstance(v, torch.Tensor) and v.numel() == 1 else v for k, v in defaults.items()}
    specs = {key: _spec(key, spec, where) for key, spec in theirs.primers.items(True, True)}
    return TensorDictPrimer(specs, random=theirs.random, default_value=None if theirs.random else defaults,
                            expand_specs=theirs.expand_specs, single_default_value=theirs.single_default_value)


def _spec(key, spec, where: str):
    """Reap's spec for a TorchRL leaf spec of ``TensorDictPrimer``'s ``key``."""
    from torchrl.data import Binary as TBinary
    from torchrl.data import Bounded as TBounded
    from torchrl.data import Categorical as TCategorical
    from torchrl.data import Unbounded as TUnbounded

    shape, dtype = tuple(spec.shape), spec.dtype
    if isinstance(spec, TUnbounded):
        return Unbounded(shape=shape, dtype=dtype)
    if isinstance(spec, TBounded):
        return Bounded(spec.space.low, spec.space.high, shape=shape, dtype=dtype)
    if isinstance(spec, TBinary):
        return Binary(shape=shape, dtype=dtype)
    if isinstance(spec, TCategorical):
        return Categorical(spec.space.n, shape=shape, dtype=dtype)
    raise TypeError(
        f"{where}: TorchRL's TensorDictPrimer has a {type(spec).__name__} spec at {key!r}, "
        "which reap does not convert; build reap's TensorDictPrimer with reap's specs: "
        "`from reap.envs import TensorDictPrimer`"
    )
