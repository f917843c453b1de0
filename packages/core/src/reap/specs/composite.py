"""``Composite``: specs by (nested) key, with the batch shape they share (TorchRL's ``Composite``).

Examples:
    >>> import torch
    >>> from reap.specs import Categorical, Composite, Unbounded
    >>> spec = Composite(observation=Unbounded(shape=(2, 3)), shape=(2,))
    >>> spec["agents", "action"] = Categorical(4, shape=(2,))
    >>> sorted(spec.keys(include_nested=True, leaves_only=True), key=str)
    [('agents', 'action'), 'observation']
    >>> spec.rand()["agents", "action"].shape, spec[0].shape
    (torch.Size([2]), torch.Size([]))
"""

from __future__ import annotations

import copy
import weakref

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import unravel_key

from reap.specs.base import TensorSpec, _indexed_shape, _ordinal, _safe, _size, _torchrl_data

_FORBIDDEN = {"shape", "device", "dtype", "space"}
_MISSING = object()


def _is_key(key) -> bool:
    return isinstance(key, str) or (isinstance(key, tuple) and bool(key) and all(
        isinstance(k, str) or (isinstance(k, tuple) and _is_key(k)) for k in key))


def _not_composite(cls) -> bool:
    return not issubclass(cls, Composite)


class _Items:
    """``Composite.items(...)``: nested entries before the entry holding them, as TorchRL lists them."""

    def __init__(self, composite, include_nested, leaves_only, is_leaf=None, step_mdp_static_only=False):
        self.composite = composite
        self.include_nested, self.leaves_only = include_nested, leaves_only
        self.is_leaf, self.step_mdp_static_only = is_leaf, step_mdp_static_only

    def __iter__(self):
        is_leaf = self.is_leaf if callable(self.is_leaf) else _not_composite
        if self.step_mdp_static_only and getattr(self.composite, "step_mdp_static", False):
            return
        for key, item in self.composite._items():
            if self.include_nested and isinstance(item, Composite):
                for sub, value in item.items(True, self.leaves_only, is_leaf=self.is_leaf,
                                             step_mdp_static_only=self.step_mdp_static_only):
                    yield (key, *(sub if isinstance(sub, tuple) else (sub,))), value
            static = self.step_mdp_static_only and getattr(item, "step_mdp_static", False)
            if static or not self.leaves_only or is_leaf(type(item)):
                yield key, item

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, item) -> bool:
        return any(pair == item for pair in self)

    def __repr__(self) -> str:
        return f"_CompositeSpecItemsView(keys={[k for k, _ in self]})"


class _Keys:
    def __init__(self, items: _Items):
        self._items = items

    def __iter__(self):
        return (key for key, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key) -> bool:
        key = unravel_key(key) if _is_key(key) else key
        return any(k == key for k in self)

    def __repr__(self) -> str:
        return f"_CompositeSpecKeysView(keys={list(self)})"


class _Values:
    def __init__(self, items: _Items):
        self._items = items

    def __iter__(self):
        return (value for _, value in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"_CompositeSpecValuesView(values={list(self)})"


class Composite(TensorSpec):
    """Specs by key (a key may hold a ``Composite``: nested keys), all starting with ``shape``.

    An entry may be None (TorchRL's modules set one for an output without a spec). ``device``
    None leaves each entry on its own device; set, it moves the entries there.
    """

    domain = "composite"
    dtype = torch.get_default_dtype()  # TorchRL's Composite inherits a dtype field it never uses

    def __init__(self, *args, shape=None, device=None, data_cls=None, step_mdp_static: bool = False, names=None,
                 **kwargs):
        batch_size = kwargs.pop("batch_size", None)
        if batch_size is not None:
            if shape is not None:
                raise TypeError("Cannot specify both batch_size and shape.")
            shape = batch_size
        if len(args) > 1:
            raise RuntimeError("Got multiple arguments, when at most one is expected for Composite.")
        object.__setattr__(self, "_shape", _size(() if shape is None else shape))
        object.__setattr__(self, "_device", _ordinal(device))
        self._specs: dict = {}
        self._is_locked = False
        self.step_mdp_static = step_mdp_static
        self.data_cls = data_cls
        self._td_dim_names = None if names is None else list(names)
        if args:
            if not isinstance(args[0], (dict, Composite)):
                raise RuntimeError(f"Expected a dictionary of specs, but got an argument of type {type(args[0])}.")
            for key, item in args[0].items():
                self[key] = Composite(item, shape=shape, device=self._device) if isinstance(item, dict) else item
        for key, item in kwargs.items():
            self[key] = item
        if names is not None:
            self.names = names

    # ---- shape, device, names ---------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        return self._shape

    @shape.setter
    def shape(self, value) -> None:
        if self._is_locked:
            raise RuntimeError("Cannot modify shape of locked composite spec.")
        value = _size(value)
        for key, spec in self._specs.items():
            if isinstance(spec, Composite):
                if spec.shape[: len(value)] != value:
                    spec.shape = value
            elif spec is not None and spec.shape[: len(value)] != value:
                raise ValueError(f"The shape of the spec and the Composite mismatch during shape resetting: the "
                                 f"{self.ndim} first dimensions should match but got self['{key}'].shape="
                                 f"{spec.shape} and Composite.shape={self.shape}.")
        object.__setattr__(self, "_shape", value)

    @property
    def batch_size(self) -> torch.Size:
        return self._shape

    @batch_size.setter
    def batch_size(self, value) -> None:
        object.__setattr__(self, "_shape", _size(value))

    @property
    def device(self):
        return self._device

    @device.setter
    def device(self, device) -> None:
        if device is None:
            if self._device is not None:
                raise RuntimeError("To erase the device of a composite spec, call spec.clear_device_().")
            return
        device = _ordinal(device)
        for key, spec in self._specs.items():
            if spec is not None:
                self._specs[key] = spec.to(device)
        object.__setattr__(self, "_device", device)

    def clear_device_(self):
        """Forget the device (here and in nested ``Composite`` entries)."""
        object.__setattr__(self, "_device", None)
        for spec in self._specs.values():
            if spec is not None:
                spec.clear_device_()
        return self

    @property
    def names(self) -> list:
        return list(self._td_dim_names) if self._td_dim_names is not None else [None] * self.ndim

    @names.setter
    def names(self, value) -> None:
        if value is None:
            self._td_dim_names = None
            return
        if len(value) != self.ndim:
            raise ValueError(f"Expected {self.ndim} names, but got {len(value)} names: {value}")
        self._td_dim_names = list(value)
        for spec in self._specs.values():
            if isinstance(spec, Composite) and spec.ndim >= self.ndim:
                spec.names = [*value, *[None] * (spec.ndim - self.ndim)]

    def _has_names(self) -> bool:
        return self._td_dim_names is not None

    def _erase_names(self) -> None:
        self._td_dim_names = None

    def refine_names(self, *names):
        """Name the dims (``...`` stands for the unnamed ones); a different name is an error."""
        if Ellipsis in names:
            at = names.index(Ellipsis)
            names = (*names[:at], *[None] * (self.ndim - len(names) + 1), *names[at + 1:])
        for current, name in zip(self.names, names):
            if current is not None and current != name:
                raise RuntimeError(f"refine_names: cannot coerce Composite names {self.names} with {names}.")
        self.names = list(names)
        return self

    def _names_without(self, dims) -> list | None:
        if not self._has_names():
            return None
        names = [n for i, n in enumerate(self.names) if i not in dims]
        return names if any(n is not None for n in names) else None

    def _like(self, specs, shape=None, device=_MISSING, names=None) -> Composite:
        """A Composite like this one (data_cls, step_mdp_static) with ``specs``."""
        return type(self)(specs, shape=self.shape if shape is None else shape,
                          device=self._device if device is _MISSING else device, data_cls=self.data_cls,
                          step_mdp_static=self.step_mdp_static, names=names)

    # ---- entries ----------------------------------------------------------------------------
    def _items(self):
        return self._specs.items()

    def __getitem__(self, idx):
        if _is_key(idx):
            key = unravel_key(idx)
            if isinstance(key, tuple):
                return self[key[0]][key[1:] if len(key) > 2 else key[1]]
            if key in _FORBIDDEN:
                raise AttributeError(f"Composite has no key {key}")
            return self._specs[key]
        shape = _indexed_shape(self.shape, idx)
        specs = {}
        for key, value in self._specs.items():
            sub = idx
            if isinstance(idx, tuple) and value is not None:
                sub = (*idx, *(slice(None),) * (value.ndim - self.ndim - value._protected))
            specs[key] = None if value is None else value[sub]
        names = None
        if self._has_names():
            dropped = {i for i, j in enumerate(idx if isinstance(idx, tuple) else (idx,)) if isinstance(j, int)}
            names = [n for i, n in enumerate(self.names) if i not in dropped] if len(shape) == self.ndim - len(
                dropped) else None
        return self._like(specs, shape=shape, names=names)

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key, value) -> None:
        if isinstance(key, tuple):
            key = unravel_key(key)
            if isinstance(key, tuple):
                head, rest = key[0], key[1:] if len(key) > 2 else key[1]
                if head not in self._specs:
                    self[head] = Composite(shape=self.shape, device=self._device)
                self[head][rest] = value
                return
        if not isinstance(key, str):
            raise TypeError(f"Got key of type {type(key)} when a string was expected.")
        if key in _FORBIDDEN:
            raise AttributeError(f"Composite[{key}] cannot be set")
        if isinstance(value, dict):
            value = Composite(value, device=self._device, shape=self.shape)
        self.set(key, value)

    def set(self, name, spec) -> Composite:
        """Set entry ``name`` (checked against this Composite's device and shape); returns self."""
        if not isinstance(name, str):
            self[name] = spec
            return self
        if self._is_locked:
            raise RuntimeError("Cannot modify a locked Composite.")
        if spec is not None and not hasattr(spec, "shape"):
            raise TypeError(f"Composite entries are specs (or None), got {type(spec).__name__} for {name!r}")
        if spec is not None and self._device is not None and spec.device != self._device:
            if spec.device is not None:
                raise RuntimeError(f"Setting a new attribute ({name}) with spec type {type(spec).__name__} on "
                                   f"another device ({spec.device} against {self.device}). All devices of "
                                   "Composite must match.")
            spec = spec.clone().to(self._device)
        if spec is not None and spec.shape[: self.ndim] != self.shape:
            if isinstance(spec, Composite) and spec.ndim < self.ndim and self.shape[: spec.ndim] == spec.shape:
                spec = spec.clone()
                spec.shape = self.shape
            else:
                raise ValueError(f"The shapes of the spec {type(spec).__name__} and the {type(self).__name__} "
                                 f"mismatch: the first {self.ndim} dimensions should match but got spec.shape="
                                 f"{spec.shape} and Composite.shape={self.shape}.")
        self._specs[name] = spec
        return self

    def __delitem__(self, key) -> None:
        key = unravel_key(key)
        if isinstance(key, tuple):
            del self[key[:-1] if len(key) > 2 else key[0]][key[-1]]
            return
        if not isinstance(key, str):
            raise TypeError(f"Got key of type {type(key)} when a string or a tuple of strings was expected.")
        if key in _FORBIDDEN:
            raise ValueError(f"Key name {key} is prohibited.")
        del self._specs[key]

    def __iter__(self):
        return iter(self._specs)

    def __contains__(self, key) -> bool:
        return key in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def keys(self, include_nested: bool = False, leaves_only: bool = False, *, is_leaf=None,
             step_mdp_static_only: bool = False) -> _Keys:
        """Keys (``include_nested``: tuples for the nested ones; ``leaves_only``: no Composites)."""
        return _Keys(_Items(self, include_nested, leaves_only, is_leaf, step_mdp_static_only))

    def items(self, include_nested: bool = False, leaves_only: bool = False, *, is_leaf=None,
              step_mdp_static_only: bool = False) -> _Items:
        return _Items(self, include_nested, leaves_only, is_leaf, step_mdp_static_only)

    def values(self, include_nested: bool = False, leaves_only: bool = False, *, is_leaf=None,
               step_mdp_static_only: bool = False) -> _Values:
        return _Values(_Items(self, include_nested, leaves_only, is_leaf, step_mdp_static_only))

    def is_empty(self, recurse: bool = False) -> bool:
        """No entry (``recurse``: no entry but empty Composites and None)."""
        if recurse:
            return all(spec is None or (isinstance(spec, Composite) and spec.is_empty(recurse=True))
                       for spec in self._specs.values())
        return not self._specs

    def pop(self, key, default=_MISSING):
        key = unravel_key(key)
        if key in self.keys(True, True):
            result = self[key]
            del self[key]
            return result
        if default is not _MISSING:
            return default
        raise KeyError(f"{key} not found in composite spec.")

    def separates(self, *keys, default=None) -> Composite | None:
        """Pop ``keys`` into a new Composite (None when none of them is here)."""
        out = None
        for key in keys:
            result = self.pop(key, default=default)
            if result is not None:
                if out is None:
                    out = Composite(batch_size=self.batch_size, device=self.device)
                out[key] = result
        return out

    def update(self, dict_or_spec) -> Composite:
        """Set the entries of ``dict_or_spec``, merging nested Composites; returns self."""
        for key, item in dict_or_spec.items():
            if key in self.keys(True) and isinstance(self[key], Composite) and item is not None:
                self[key].update(item)
                continue
            if isinstance(item, TensorSpec) and item.device != self._device:
                item = copy.deepcopy(item)
                if self._device is not None:
                    item = item.to(self._device)
            self[key] = item
        return self

    def empty(self) -> Composite:
        """A Composite like this one, without entries."""
        return self._like({})

    # ---- values -----------------------------------------------------------------------------
    def _td(self, data: dict, shape) -> TensorDictBase:
        batch = [*_size(shape or ()), *_safe(self.shape)]
        if self.data_cls is not None:
            return self.data_cls.from_dict(data, batch_size=batch, device=self._device)
        return TensorDict(data, batch_size=batch, device=self._device, names=self._names_for(shape))

    def _names_for(self, shape):
        if not self._has_names():
            return None
        return [*[None] * len(_size(shape or ())), *self._td_dim_names]

    def rand(self, shape=None, *, generator=None) -> TensorDictBase:
        return self._td({k: v.rand(shape, generator=generator) for k, v in self._specs.items() if v is not None},
                        shape)

    def zero(self, shape=None) -> TensorDictBase:
        return self._td({k: v.zero(shape) for k, v in self._specs.items() if v is not None}, shape)

    def one(self, shape=None) -> TensorDictBase:
        return self._td({k: v.one(shape) for k, v in self._specs.items() if v is not None}, shape)

    def rand_update(self, val: TensorDictBase) -> TensorDictBase:
        return val.update(self.rand())

    def zeros_update(self, val: TensorDictBase) -> TensorDictBase:
        return val.update(self.zeros())

    def ones_update(self, val: TensorDictBase) -> TensorDictBase:
        return val.update(self.ones())

    def is_in(self, val) -> bool:
        """Whether every entry of ``val`` is in its spec (a missing entry is a ``KeyError``)."""
        if self.data_cls is not None and type(val) is not self.data_cls:
            return False
        for key, spec in self._specs.items():
            if spec is None or (isinstance(spec, Composite) and spec.is_empty()):
                continue
            if not spec.is_in(_entry(val, key)):
                return False
        return True

    def project(self, val: TensorDictBase) -> TensorDictBase:
        """``val`` with each entry outside its spec mapped into it (in place)."""
        for key, spec in self._specs.items():
            if spec is not None:
                item = _entry(val, key)
                if not spec.is_in(item):
                    val.set(key, spec.project(item))
        return val

    def _project(self, val):
        return self._td({k: v._project(val[k]) for k, v in self._specs.items() if v is not None}, None)

    def encode(self, vals, *, ignore_device: bool = False):
        """A TensorDict of ``vals`` (a dict of arrays or numbers) encoded by each entry's spec."""
        out = vals.empty() if isinstance(vals, TensorDictBase) else {} if self.data_cls is not None else \
            TensorDict({}, batch_size=_safe(self.shape))
        for key, item in vals.items():
            if item is None:
                raise RuntimeError("Composite.encode cannot be used with missing values.")
            try:
                out[key] = self[key].encode(item, ignore_device=ignore_device)
            except KeyError as err:
                raise KeyError(f"The Composite instance with keys {self.keys()} does not have a '{key}' key.") from err
            except RuntimeError as err:
                raise RuntimeError(f"Encoding key {key} raised a RuntimeError. Scroll up to know more.") from err
        return self.data_cls.from_dict(out) if self.data_cls is not None else out

    def to_numpy(self, val, safe: bool | None = None) -> dict:
        return {key: self[key].to_numpy(value) for key, value in val.items()}

    def type_check(self, value, selected_keys=None) -> None:
        if isinstance(value, torch.Tensor) and isinstance(selected_keys, str):
            value, selected_keys = {selected_keys: value}, [selected_keys]
        for key, spec in self._specs.items():
            if spec is not None and (selected_keys is None or key in selected_keys):
                spec.type_check(value[key], key)

    def cardinality(self) -> int:
        n = 0
        for spec in self._specs.values():
            if spec is not None:
                n = (n or 1) * spec.cardinality()
        return n

    def enumerate(self, use_mask: bool = False) -> TensorDictBase:
        """Every combination of the entries' values, stacked along a new first dim."""
        one = self
        while one.ndim:
            one = one[0]
        samples = {key: spec.enumerate(use_mask) for key, spec in one.items()}
        if not samples:
            return self._td({}, None)
        grids = torch.meshgrid(*(torch.arange(s.shape[0]) for s in samples.values()), indexing="ij")
        picks = [g.reshape(-1) for g in grids]
        out = TensorDict({k: s[i] for (k, s), i in zip(samples.items(), picks)}, batch_size=picks[0].shape[:1],
                         device=self._device)
        if self.ndim:
            out = out.reshape(-1, *(1,) * self.ndim).expand(out.shape[0], *self.shape)
        return out

    def index(self, index, tensor_to_index):
        raise NotImplementedError("`index` is not implemented for Composite specs.")

    # ---- shape ops ----------------------------------------------------------------------------
    def expand(self, *shape) -> Composite:
        shape = _size(shape)
        tail = shape[len(shape) - self.ndim:] if self.ndim else ()
        if any(new != old and old != 1 for new, old in zip(tail, self.shape)):
            raise ValueError(f"The last {self.ndim} of the expanded shape {shape} must match the shape of the "
                             f"{type(self).__name__} spec in expand().")
        specs = {k: None if v is None else v.expand((*shape, *v.shape[self.ndim:])) for k, v in self._specs.items()}
        names = [*[None] * (len(shape) - self.ndim), *self.names] if self._has_names() else None
        return Composite(specs, shape=shape, device=self._device, data_cls=self.data_cls,
                         step_mdp_static=self.step_mdp_static, names=names)

    def squeeze(self, dim: int | None = None) -> Composite:
        if dim is None:
            out = self
            while 1 in out.shape:
                out = out.squeeze(out.shape.index(1))
            return out
        dim = dim + self.ndim if dim < 0 else dim
        if self.shape[dim] != 1:
            return self
        shape = [s for i, s in enumerate(self.shape) if i != dim]
        return self._like({k: None if v is None else v.squeeze(dim) for k, v in self._specs.items()}, shape=shape,
                          names=self._names_without({dim}))

    def unsqueeze(self, dim: int) -> Composite:
        dim = dim + self.ndim + 1 if dim < 0 else dim
        shape = list(self.shape)
        shape.insert(dim, 1)
        names = None
        if self._has_names():
            names = self.names
            names.insert(dim, None)
        return self._like({k: None if v is None else v.unsqueeze(dim) for k, v in self._specs.items()},
                          shape=shape, names=names)

    def unbind(self, dim: int = 0) -> tuple:
        orig = dim
        dim = dim + self.ndim if dim < 0 else dim
        if not 0 <= dim < self.ndim or self.shape[dim] < 0:
            raise ValueError(f"Cannot unbind along dim {orig} with shape {self.shape}.")
        shape = [s for i, s in enumerate(self.shape) if i != dim]
        parts = {k: v.unbind(dim) for k, v in self._specs.items()}
        names = self._names_without({dim})
        return tuple(self._like({k: v[i] for k, v in parts.items()}, shape=shape, names=names)
                     for i in range(self.shape[dim]))

    def reshape(self, *shape) -> Composite:
        shape = _size(shape)
        return self._like({k: v.reshape((*shape, *v.shape[self.ndim:])) for k, v in self._specs.items()},
                          shape=shape)

    view = reshape

    def _index_select(self, dim: int, index: torch.Tensor) -> Composite:
        shape = list(self.shape)
        shape[dim] = index.numel()
        specs = {k: None if v is None else torch.index_select(v, dim, index) for k, v in self._specs.items()}
        return Composite(specs, shape=shape, device=self._device)

    # ---- devices, copies, comparison ------------------------------------------------------------
    def to(self, dest) -> Composite:
        if dest is None:
            return self
        if isinstance(dest, torch.dtype):
            return self._like({k: None if v is None else v.to(dest) for k, v in self._specs.items()},
                              names=self._td_dim_names)
        if not isinstance(dest, (str, int, torch.device)):
            raise ValueError("Only device/dtype casting is allowed with specs of type Composite.")
        device = _ordinal(dest)
        if self._device is not None and self._device == device:
            return self
        return self._like({k: None if v is None else v.to(device) for k, v in self._specs.items()}, device=device,
                          names=self._td_dim_names)

    def clone(self) -> Composite:
        return self._like({k: None if v is None else v.clone() for k, v in self._specs.items()},
                          names=self._td_dim_names)

    def _eq(self, other) -> bool:
        return (type(self) is type(other) and self.shape == other.shape and self._device == other._device
                and set(self._specs) == set(other._specs)
                and all(self._specs[k] == v for k, v in other._specs.items()) and self.data_cls == other.data_cls)

    def to_torchrl(self):
        """The equivalent TorchRL ``Composite`` (needs TorchRL installed)."""
        specs = {k: None if v is None else v.to_torchrl() for k, v in self._specs.items()}
        return _torchrl_data().Composite(specs, shape=self.shape, device=self._device)

    def __repr__(self) -> str:
        tail = f"device={self._device},\n    shape={self.shape},\n    data_cls={self.data_cls})"
        if not self._specs:
            return f"{type(self).__name__}(device={self._device}, shape={self.shape}, data_cls={self.data_cls})"
        entries = ",\n".join("    " + f"{k}: {v}".replace("\n", "\n    ") for k, v in self._specs.items())
        return f"{type(self).__name__}(\n{entries},\n    {tail}"

    # ---- locking (TorchRL's lock_ / unlock_) ----------------------------------------------------
    @property
    def is_locked(self) -> bool:
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        self.lock_() if value else self.unlock_()

    @property
    def locked(self) -> bool:
        return self._is_locked

    def _lock_parents(self) -> list:
        return self.__dict__.setdefault("_lock_parent_refs", [])

    def lock_(self, recurse: bool | None = None) -> Composite:
        """Refuse changes (``set``, ``[key] = ...``, ``shape = ...``); ``recurse`` (default) locks the
        nested Composites too, which then unlock only with this one."""
        if not self._is_locked:
            self._propagate_lock(recurse=recurse is not False, parents=None)
        return self

    def _propagate_lock(self, *, recurse: bool, parents) -> None:
        self._is_locked = True
        if parents is None:
            parents = []
        else:
            known = self._lock_parents()
            known.extend(ref for ref in parents if not any(ref is k for k in known))
        if recurse:
            parents = [*parents, weakref.ref(self)]
            for value in self._specs.values():
                if isinstance(value, Composite):
                    value._propagate_lock(recurse=True, parents=parents)

    def unlock_(self, recurse: bool | None = None) -> Composite:
        """Allow changes again; a Composite locked by a locked parent cannot be unlocked."""
        recurse = recurse is not False
        try:
            subs = self._propagate_unlock(recurse)
            for sub in subs:
                sub._check_unlock()
            self._check_unlock()
        except RuntimeError:
            self.lock_(recurse=recurse)
            raise
        return self

    def _propagate_unlock(self, recurse: bool) -> list:
        self._is_locked = False
        subs = []
        if recurse:
            for value in self._specs.values():
                if isinstance(value, Composite):
                    subs.extend(value._propagate_unlock(recurse))
                    subs.append(value)
        return subs

    def _check_unlock(self) -> None:
        for ref in self._lock_parents():
            parent = ref()
            if parent is not None and parent._is_locked:
                raise RuntimeError("Cannot unlock a Composite that is part of a locked graph. Graphs are locked "
                                   "when a Composite is locked with recurse=True. Unlock the root Composite first. "
                                   "If the Composite is part of multiple graphs, group the graphs under a common "
                                   "Composite an unlock this root.")
        self.__dict__["_lock_parent_refs"] = []

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_lock_recurse"] = bool(state.pop("_lock_parent_refs", None))
        return state

    def __setstate__(self, state: dict) -> None:
        recurse = state.pop("_lock_recurse", False)
        locked = state.get("_is_locked", False)
        self.__dict__.update(state)
        if locked:
            self._is_locked = False
            self.lock_(recurse=recurse)


def _entry(val, key):
    """``val``'s entry ``key`` as ``get`` gives it (non-tensor data wrapped); a KeyError if absent."""
    item = val.get(key, None)
    if item is None and key not in val.keys():
        raise KeyError(f'key "{key}" not found in {type(val).__name__} with keys {sorted(map(str, val.keys()))}')
    return item
