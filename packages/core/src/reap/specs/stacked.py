"""Lazy stacks of specs that differ (TorchRL's ``Stacked`` and ``StackedComposite``).

``torch.stack`` of equal specs gives one spec; of specs that differ (bounds, shapes, keys: the
agents of a heterogeneous multi-agent env) a lazy stack that keeps each spec. Its shape has
``-1`` where the stacked shapes differ; a ``StackedComposite`` exposes the keys all its specs
share, draws ``LazyStackedTensorDict`` samples, and indexing along the stack dim gives a member.

Examples:
    >>> import torch
    >>> from reap.specs import Composite, Unbounded
    >>> stack = torch.stack([Composite(a=Unbounded(shape=(2,))), Composite(a=Unbounded(shape=(3,)), b=Unbounded())])
    >>> stack.shape, list(stack.keys()), stack[1]["b"].shape
    (torch.Size([2]), ['a'], torch.Size([1]))
    >>> stack["a"].shape, type(stack.rand()).__name__
    (torch.Size([2, -1]), 'LazyStackedTensorDict')
"""

from __future__ import annotations

import weakref
from textwrap import indent

import torch
from tensordict import LazyStackedTensorDict

from reap.specs.base import TensorSpec, _size
from reap.specs.composite import Composite, _is_key


def _trivial(index) -> bool:
    return index is Ellipsis or (isinstance(index, slice) and index == slice(None))


class _LazyStack:
    """What ``Stacked`` and ``StackedComposite`` share: members ``_specs`` stacked along ``dim``."""

    def _init_stack(self, specs, dim: int) -> None:
        self.__dict__["_specs"] = list(specs)
        ndim = self._specs[0].ndim + 1
        self.__dict__["dim"] = dim + ndim if dim < 0 else dim

    @property
    def stack_dim(self) -> int:
        return self.dim

    @property
    def shape(self) -> torch.Size:
        first = self._specs[0].shape
        shape = [s if all(spec.shape[i] == s for spec in self._specs) else -1 for i, s in enumerate(first)]
        shape.insert(self.dim, len(self._specs))
        return _size(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def ndimension(self) -> int:
        return self.ndim

    def __len__(self) -> int:
        return self.shape[0]

    def _restack(self, specs, dim=None):
        return torch.stack(list(specs), self.dim if dim is None else dim)

    def _member(self, index):
        """Indexing along the stack dim: one member (an int), or a stack of several."""
        out = self._specs[index]
        return out if isinstance(out, TensorSpec) else self._restack(out, self.dim)

    def __getitem__(self, idx):
        """A key: the stack of the members' entries; an index along the stack dim: a member."""
        if _is_key(idx):
            return self._restack([spec[idx] for spec in self._specs])
        if not isinstance(idx, tuple):
            if self.dim != 0:
                raise IndexError(f"Trying to index a {type(self).__name__} along dimension 0 when the stack "
                                 f"dimension is {self.dim}.")
            return self._member(idx)
        if idx and idx[0] is Ellipsis:
            return self._after_ellipsis(idx[1:])
        if len(idx) >= 2 and idx[-1] is Ellipsis:
            return self[idx[:-1]]
        if any(p is Ellipsis for p in idx):
            raise IndexError("Cannot index along multiple dimensions.")
        if any(p is None for p in idx):
            raise IndexError(f"Cannot index a {type(self).__name__} with None values")
        for i, part in enumerate(idx):
            if i == self.dim:
                return self._member(part)
            if isinstance(part, slice) and not _trivial(part):
                raise IndexError(f"Got a non-trivial index at dim {i} when only the dim {self.dim} could be indexed.")
        return self

    def _after_ellipsis(self, rest: tuple):
        if not rest:
            return self
        if len(rest) == 1:
            if self.dim != self.ndim - 1:
                raise IndexError(f"Indexing a {type(self).__name__} with [..., idx] is only permitted if the stack "
                                 f"dimension is the last dimension. Got self.dim={self.dim} and "
                                 f"self.shape={self.shape}.")
            return self._member(rest[0])
        if _trivial(rest[0]):  # TorchRL reads [..., i, ...] as an index along dim 1
            return self
        if self.dim != 1:
            raise RuntimeError(f"Indexing occurred along dimension 1 but stacking was done along dim {self.dim}.")
        return self._member(rest[0])

    def clone(self):
        return self._restack([spec.clone() for spec in self._specs])

    def to_torchrl(self):
        """The equivalent TorchRL lazy stack (needs TorchRL installed)."""
        return torch.stack([spec.to_torchrl() for spec in self._specs], self.dim)

    def to(self, dest):
        return self if dest is None else self._restack([spec.to(dest) for spec in self._specs])

    def clear_device_(self):
        for spec in self._specs:
            spec.clear_device_()
        return self

    def unbind(self, dim: int = 0):
        dim = dim + self.ndim if dim < 0 else dim
        if not 0 <= dim < self.ndim or self.shape[dim] == -1:
            raise ValueError(f"Provided dim {dim} is not valid for unbinding shape {self.shape}")
        if dim == self.dim:
            return tuple(self._specs)
        inner = dim - 1 if dim > self.dim else dim
        columns = zip(*(spec.unbind(inner) for spec in self._specs))
        return tuple(self._restack(col, self.dim if dim > self.dim else self.dim - 1) for col in columns)

    def unsqueeze(self, dim: int):
        new = dim + self.ndim + 1 if dim < 0 else dim
        if not 0 <= new <= self.ndim:
            raise ValueError(f"Cannot unsqueeze along dim {dim}.")
        if new > self.dim:
            return self._restack([spec.unsqueeze(new - 1) for spec in self._specs], self.dim)
        return self._restack([spec.unsqueeze(new) for spec in self._specs], self.dim + 1)

    def squeeze(self, dim: int | None = None):
        if dim is None:
            out = self
            while isinstance(out, _LazyStack) and out.ndim > 1 and 1 in out.shape:
                out = out.squeeze(out.shape.index(1))
            return out
        new = dim + self.ndim if dim < 0 else dim
        if not 0 <= new < self.ndim:
            raise RuntimeError(f"squeezing is allowed for dims comprised between 0 and spec.ndim only. Got dim={dim} "
                               f"and shape={self.shape}.")
        if self.shape[new] != 1:
            return self
        if new == self.dim:
            return self._specs[0]
        if new > self.dim:
            return self._restack([spec.squeeze(new - 1) for spec in self._specs], self.dim)
        return self._restack([spec.squeeze(new) for spec in self._specs], self.dim - 1)

    def expand(self, *shape):
        shape = _size(shape)
        lead, tail = shape[: len(shape) - self.ndim], shape[len(shape) - self.ndim:]
        if len(tail) != self.ndim:
            raise RuntimeError(f"Trying to expand non-congruent shapes: received {shape} when the shape is {self.shape}.")
        for i, (old, new) in enumerate(zip(self.shape, tail)):
            if old != new and old != 1 and old != -1:
                raise RuntimeError(f"Expanding a non-singletom dimension: existing shape={old} vs expand={new}")
            if old != new and old == 1 and i == self.dim:
                return self._restack([self._specs[0].clone() for _ in range(new)]).expand(*shape)
        rest = [s for i, s in enumerate(tail) if i != self.dim]
        specs = [spec.expand(*lead, *[r if r != -1 else s for r, s in zip(rest, spec.shape)]) for spec in self._specs]
        return self._restack(specs, self.dim + len(lead))

    def _eq(self, other) -> bool:
        return (type(other) is type(self) and len(self._specs) == len(other._specs) and self.dim == other.dim
                and self.device == other.device and all(a == b for a, b in zip(self._specs, other._specs)))

    def is_in(self, value) -> bool:
        if self.dim == 0 and not hasattr(value, "unbind"):
            return all(spec.contains(v) for v, spec in zip(value, self._specs))
        return all(spec.contains(v) for v, spec in zip(value.unbind(self.dim), self._specs))

    def index(self, index, tensor_to_index):
        raise NotImplementedError(f"`index` is not implemented for {type(self).__name__} specs.")

    def cardinality(self):
        raise NotImplementedError(f"`cardinality` is not implemented for {type(self).__name__} specs.")

    def reshape(self, *shape):
        raise NotImplementedError(f"`reshape` is not implemented for {type(self).__name__} specs.")

    def _index_select(self, dim, index):
        raise NotImplementedError(f"index_select is not supported for {type(self).__name__} specs. Consider "
                                  "converting to a regular spec first using spec.clone() if the specs are identical.")


class Stacked(_LazyStack, TensorSpec):
    """A lazy stack of leaf specs of one class that differ (bounds, or shapes: ``-1`` there)."""

    def __init__(self, *specs, dim: int):
        self._init_stack(specs, dim)

    device = property(lambda self: self._specs[0].device)
    dtype = property(lambda self: self._specs[0].dtype)
    domain = property(lambda self: self._specs[0].domain)

    @property
    def space(self):
        raise NotImplementedError(f"{type(self).__name__} has no single space; index a member")

    def _samples(self, fn, shape):
        if self.dim + len(_size(shape or ())) != 0:
            raise RuntimeError(f"Cannot create a nested tensor with a stack dimension other than 0. Got "
                               f"self.dim={self.dim}.")
        return torch.nested.nested_tensor([fn(spec) for spec in self._specs])

    def rand(self, shape=None, *, generator=None):
        return self._samples(lambda s: s.rand(shape, generator=generator), shape)

    def zero(self, shape=None):
        return self._samples(lambda s: s.zero(shape), shape)

    def one(self, shape=None):
        return self._samples(lambda s: s.one(shape), shape)

    def type_check(self, value, key=None) -> None:
        for val, spec in zip(value.unbind(self.dim), self._specs):
            spec.type_check(val)

    def enumerate(self, use_mask: bool = False):
        return torch.stack([spec.enumerate(use_mask) for spec in self._specs], dim=self.dim + 1)

    def encode(self, val, *, ignore_device: bool = False):
        parts = val if isinstance(val, tuple) else val.unbind(self.dim)
        samples = [spec.encode(v, ignore_device=ignore_device) for v, spec in zip(parts, self._specs)]
        if any(s.shape != samples[0].shape for s in samples):
            return torch.nested.nested_tensor(samples)
        return torch.stack(samples, self.dim)

    def to_numpy(self, val, safe: bool | None = None):
        if safe:
            if val.shape[self.dim] != len(self._specs):
                raise ValueError("Size of Stacked and val differ along the stacking dimension")
            for spec, v in zip(self._specs, torch.unbind(val, dim=self.dim)):
                spec.assert_is_in(v)
        return val.detach().cpu().numpy()

    def __repr__(self) -> str:
        return (f"Stacked{type(self._specs[0]).__name__}(\n    shape={self.shape}, device={self.device}, "
                f"dtype={self.dtype}, domain={self.domain})")


class StackedComposite(_LazyStack, Composite):
    """A lazy stack of Composites with different keys or leaves; its keys are those all share."""

    def __init__(self, *specs, dim: int):
        self._init_stack(specs, dim)
        self.__dict__.update(_is_locked=False, step_mdp_static=False, data_cls=None, _td_dim_names=None)

    @property
    def device(self):
        devices = {spec.device for spec in self._specs} - {None}
        return devices.pop() if len(devices) == 1 else None

    @property
    def _device(self):
        return self.device

    def _items(self):
        shared = set(self._specs[0].keys())
        for spec in self._specs[1:]:
            shared &= set(spec.keys())
        return [(key, self[key]) for key in sorted(shared, key=str)]

    def __iter__(self):
        return (key for key, _ in self._items())

    def __contains__(self, key) -> bool:
        return key in dict(self._items())

    def __len__(self) -> int:
        return self.shape[0]

    def __setitem__(self, key, value) -> None:
        if not _is_key(key):
            raise RuntimeError(f"{type(self).__name__} key should be a Sequence<NestedKey>, got {key!r}")
        self.set(key, value)

    def set(self, name, spec) -> StackedComposite:
        for member, item in zip(self._specs, spec.unbind(self.dim)):
            member[name] = item
        return self

    def __delitem__(self, key) -> None:
        deleted = False
        for spec in self._specs:
            try:
                del spec[key]
                deleted = True
            except KeyError:
                continue
        if not deleted:
            raise KeyError(f"Key {key} must be present in at least one of the stacked specs.")

    def update(self, specs) -> StackedComposite:
        for key, item in specs.items():
            if key in self.keys() and isinstance(item, Composite):
                for spec, sub in zip(self._specs, item.unbind(self.dim)):
                    spec[key].update(sub)
                continue
            self[key] = item
        return self

    def _stack_tds(self, fn, shape) -> LazyStackedTensorDict:
        dim = self.dim + len(_size(shape or ()))
        return LazyStackedTensorDict.maybe_dense_stack([fn(spec) for spec in self._specs], dim)

    def rand(self, shape=None, *, generator=None):
        return self._stack_tds(lambda s: s.rand(shape, generator=generator), shape)

    def zero(self, shape=None):
        return self._stack_tds(lambda s: s.zero(shape), shape)

    def one(self, shape=None):
        return self._stack_tds(lambda s: s.one(shape), shape)

    def project(self, val):
        parts = [spec.project(v) if not spec.is_in(v) else v for spec, v in zip(self._specs, val.unbind(self.dim))]
        out = LazyStackedTensorDict.maybe_dense_stack(parts, dim=self.dim)
        return out if isinstance(val, LazyStackedTensorDict) else out.to_tensordict()

    def type_check(self, value, selected_keys=None) -> None:
        if selected_keys is None:
            if isinstance(value, torch.Tensor):
                raise ValueError("value must be of type TensorDictBase when key is None")
            for spec, sub in zip(self._specs, value.unbind(self.dim)):
                spec.type_check(sub)
            return
        if isinstance(value, torch.Tensor) and isinstance(selected_keys, str):
            value, selected_keys = {selected_keys: value}, [selected_keys]
        for key in self.keys():
            if key in selected_keys:
                self[key].type_check(value[key], key)

    def to_numpy(self, val, safe: bool | None = None) -> dict:
        if safe:
            if val.shape[self.dim] != len(self._specs):
                raise ValueError("Size of StackedComposite and val differ along the stacking dimension")
            for spec, v in zip(self._specs, torch.unbind(val, dim=self.dim)):
                spec.assert_is_in(v)
        return {key: self[key].to_numpy(value) for key, value in val.items()}

    def enumerate(self, use_mask: bool = False):
        return LazyStackedTensorDict.maybe_dense_stack([s.enumerate(use_mask) for s in self._specs], self.dim + 1)

    def empty(self):
        return self._restack([spec.empty() for spec in self._specs])

    def encode(self, vals, *, ignore_device: bool = False):
        raise NotImplementedError("encode is not implemented for StackedComposite specs")

    def _propagate_lock(self, *, recurse: bool, parents) -> None:
        self.__dict__["_is_locked"] = True
        if recurse:
            for spec in self._specs:
                spec._propagate_lock(recurse=True, parents=[*(parents or []), weakref.ref(self)])

    def _propagate_unlock(self, recurse: bool) -> list:
        self.__dict__["_is_locked"] = False
        subs = []
        if recurse:
            for spec in self._specs:
                subs.extend(spec._propagate_unlock(recurse))
                subs.append(spec)
        return subs

    def __repr__(self) -> str:
        shared = set(self.keys())
        fields = ",\n".join(indent(f"{k}: {v!r}", " " * 4) for k, v in self._items())
        exclusive = ",\n".join(
            indent(f"{i} ->\n" + ",\n".join(indent(f"{k}: {spec[k]!r}", " " * 4) for k in spec.keys()
                                             if k not in shared), " " * 4)
            for i, spec in enumerate(self._specs) if set(spec.keys()) - shared)
        parts = [indent(f"fields={{\n{fields}}}", " " * 4), indent(f"exclusive_fields={{\n{exclusive}}}", " " * 4),
                 indent(f"device={self._specs[0].device}", " " * 4), indent(f"shape={self.shape}", " " * 4),
                 indent(f"stack_dim={self.dim}", " " * 4)]
        return "StackedComposite(\n" + ",\n".join(parts) + ")"
