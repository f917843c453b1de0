"""Info-dict readers: entries of gymnasium's ``info`` as observations (TorchRL's readers).

``env.set_info_dict_reader(reader)`` makes a :class:`~reap.envs.GymEnv` call ``reader(info,
tensordict)`` after each reset and step, ``tensordict`` holding the env's arrays for the
reader's keys, and adds ``reader.info_spec`` to the observation spec. A reader is a
:class:`BaseInfoDictReader` (``__call__`` and ``info_spec``); :class:`default_info_dict_reader`
reads the keys it is given (all public ones by default, their specs from a first reset and
step).

Examples:
    >>> import numpy as np
    >>> from tensordict import TensorDict
    >>> reader = default_info_dict_reader(["x_position"])
    >>> reader({"x_position": np.float64(0.5), "other": 1}, TensorDict())["x_position"]
    tensor(0.5000, dtype=torch.float64)
    >>> reader.info_spec["x_position"].shape
    torch.Size([])
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from reap.specs import Composite, TensorSpec, Unbounded


class BaseInfoDictReader(abc.ABC):
    """What a GymEnv calls with each ``info``: writes entries into ``tensordict``, returns it."""

    @abc.abstractmethod
    def __call__(self, info_dict: dict[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        ...

    @property
    @abc.abstractmethod
    def info_spec(self) -> Composite | None:
        """The specs of the entries it writes (None while not known yet)."""


class default_info_dict_reader(BaseInfoDictReader):  # noqa: N801 (TorchRL's name)
    """Read ``keys`` of ``info`` into the data (all keys not starting with ``"_"`` when None).

    Args:
        keys: the info keys to read; None reads every key of the first info it sees (those
            starting with ``"_"`` left out if ``ignore_private``), its specs ``Unbounded`` of the
            values' shapes and dtypes.
        spec: the keys' specs: a ``Composite``, a dict, or a sequence matched to ``keys``
            (default: ``Unbounded(())`` each).
        ignore_private: leave out keys starting with ``"_"`` (when ``keys`` is None).

    A key missing from an ``info`` is written as its spec's zero (an error if it has no spec).
    """

    _left_out: frozenset = frozenset()  # keys never learnt (a SAME_STEP vector env's own entries)

    def __init__(self, keys: Sequence[str] | None = None,
                 spec: Sequence[TensorSpec] | dict[str, TensorSpec] | Composite | None = None,
                 ignore_private: bool = True):
        self.ignore_private = ignore_private
        self.keys = None if keys is None else list(keys)
        if spec is None:
            spec = None if keys is None else Composite({key: Unbounded(()) for key in self.keys}, shape=())
        elif isinstance(spec, Composite):
            spec = spec.clone()
        elif isinstance(spec, dict):
            spec = Composite(spec, shape=())
        else:
            spec = list(spec)
            if self.keys is None or len(spec) != len(self.keys):
                raise ValueError("default_info_dict_reader: a sequence of specs must have one spec per key "
                                 f"(keys={self.keys}, {len(spec)} specs); pass a dict or a Composite otherwise")
            spec = Composite(dict(zip(self.keys, spec)), shape=())
        self._info_spec = spec

    @property
    def info_spec(self) -> Composite | None:
        return self._info_spec

    def reset(self) -> None:
        """Forget the keys and specs read from data (a reader built without ``keys``)."""
        self.keys, self._info_spec = None, None

    def __call__(self, info_dict: dict[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        if not isinstance(info_dict, dict | TensorDictBase):
            warnings.warn(f"default_info_dict_reader: expected a dict of infos, got {type(info_dict).__name__}",
                          stacklevel=2)
            return tensordict
        if self.keys is None:
            self.keys = [k for k in info_dict if not (self.ignore_private and str(k).startswith("_"))
                         and k not in self._left_out]
        learnt = Composite(shape=()) if self._info_spec is None else None
        for key in self.keys:
            if key in info_dict:
                value = info_dict[key]
                if isinstance(value, np.ndarray) and value.dtype == object:  # a vector env's per-env objects
                    value = np.stack(list(value))
                tensordict.set(key, torch.as_tensor(value))
                if learnt is not None:
                    written = tensordict.get(key)
                    learnt[key] = Unbounded(written.shape, device=written.device, dtype=written.dtype)
            elif self._info_spec is not None and key in self._info_spec.keys():
                tensordict.set(key, self._info_spec[key].zero())
            else:
                raise KeyError(f"default_info_dict_reader: info has no {key!r} and the reader no spec for it "
                               "(give spec= for keys an info may lack)")
        if learnt is not None:
            self._info_spec = learnt
        return tensordict


class _autoreset_info_reader(default_info_dict_reader):  # noqa: N801
    """What a ``SAME_STEP`` vector env's ``GymEnv`` reads from ``info``, as TorchRL's: every public
    entry but gymnasium's ``final_obs``/``final_info`` (which the env reads itself)."""

    _left_out = frozenset({"final_obs", "final_info"})
