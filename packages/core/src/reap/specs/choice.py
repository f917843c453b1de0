"""``Choice``: a value drawn from one of several specs, or one of several non-tensor values (TorchRL's).

Examples:
    >>> import torch
    >>> from tensordict import NonTensorData
    >>> from reap.specs import Bounded, Choice
    >>> spec = Choice([Bounded(0.0, 1.0, shape=(1,)), Bounded(10.0, 11.0, shape=(1,))])
    >>> value = spec.rand()
    >>> bool(spec.is_in(value)), spec.is_in(torch.tensor([5.0]))
    (True, False)
    >>> Choice([NonTensorData("left"), NonTensorData("right")]).zero().data
    'left'
"""

from __future__ import annotations

import torch
from tensordict import NonTensorData, NonTensorStack, is_tensor_collection

from reap.specs.base import TensorSpec, _torchrl_data


class Choice(TensorSpec):
    """A choice among ``choices``: specs (a value is drawn from one of them, picked uniformly) or
    ``NonTensorData``/``NonTensorStack`` values (one of them is returned). All choices have the
    same type, shape, dtype and device; ``rand`` draws the choice with ``torch.randint`` first, as
    TorchRL's, so the same seed gives TorchRL's values.
    """

    def __init__(self, choices: list):
        if not isinstance(choices, list):
            raise TypeError(f"Choice: 'choices' must be a list, got {type(choices).__name__}")
        if not choices:
            raise ValueError("Choice: 'choices' must hold at least one spec or non-tensor value")
        first = choices[0]
        if not isinstance(first, (TensorSpec, NonTensorData, NonTensorStack)):
            raise TypeError("Choice: each choice must be either a TensorSpec, NonTensorData, or NonTensorStack, but "
                            f"got {type(first)}")
        if not all(isinstance(choice, type(first)) for choice in choices[1:]):
            raise TypeError(f"Choice: all choices must be the same type (the first one is a {type(first).__name__})")
        for what in ("shape", "dtype", "device"):
            if not all(getattr(choice, what) == getattr(first, what) for choice in choices[1:]):
                raise ValueError(f"Choice: all choices must have the same {what}; got "
                                 f"{[getattr(choice, what) for choice in choices]}")
        super().__init__(first.shape, None, first.device, None, "")
        self.dtype = first.dtype  # None for non-tensor values, as TorchRL's
        self._choices = [choice.clone() for choice in choices]

    @property
    def num_choices(self) -> int:
        """How many choices the spec has."""
        return len(self._choices)

    def _pick(self, index: int, draw):
        choice = self._choices[index]
        return draw(choice) if isinstance(choice, TensorSpec) else choice

    def rand(self, shape=None, *, generator=None):
        index = int(torch.randint(0, len(self._choices), (), generator=generator))
        return self._pick(index, lambda spec: spec.rand(shape, generator=generator))

    def zero(self, shape=None):
        return self._pick(0, lambda spec: spec.zero(shape))

    def one(self, shape=None):
        return self._pick(min(1, len(self._choices) - 1), lambda spec: spec.one(shape))

    def is_in(self, val) -> bool:
        """Whether ``val`` is in one of the specs (or equals one of the values)."""
        if isinstance(self._choices[0], TensorSpec):
            return any(bool(choice.is_in(val)) for choice in self._choices)
        return any(bool((choice == val).all()) for choice in self._choices)

    def _project(self, val):
        raise NotImplementedError("Choice cannot project a value: which choice it belongs to is undefined (TorchRL's "
                                  "Choice has no projection either); check it with is_in")

    def cardinality(self) -> int:
        if isinstance(self._choices[0], TensorSpec):
            return sum(choice.cardinality() for choice in self._choices)
        return len(self._choices)

    def enumerate(self, use_mask: bool = False) -> list:
        if isinstance(self._choices[0], TensorSpec):
            return [value for choice in self._choices for value in choice.enumerate(use_mask)]
        return [choice.clone() for choice in self._choices]

    # ---- shape ops, copies: on every choice ------------------------------------------------------
    def _each(self, fn) -> Choice:
        return Choice([fn(choice) for choice in self._choices])

    def expand(self, *shape):
        return self._each(lambda choice: choice.expand(*shape))

    def unsqueeze(self, dim: int):
        return self._each(lambda choice: choice.unsqueeze(dim))

    def squeeze(self, dim: int | None = None):
        return self._each(lambda choice: choice.squeeze(dim))

    def reshape(self, *shape):
        return self._each(lambda choice: choice.reshape(*shape))

    view = reshape

    def __getitem__(self, idx):
        return self._each(lambda choice: choice[idx])

    def unbind(self, dim: int = 0):
        parts = [choice.unbind(dim) for choice in self._choices]
        return tuple(Choice(list(same_index)) for same_index in zip(*parts))

    def clone(self) -> Choice:
        return self._each(lambda choice: choice.clone())

    def to(self, dest) -> Choice:
        return self._each(lambda choice: choice.to(dest))

    def _eq(self, other) -> bool:
        if not isinstance(other, Choice) or other.num_choices != self.num_choices:
            return False
        return all(bool((a == b).all()) if isinstance(a, torch.Tensor) or is_tensor_collection(a) else a == b
                   for a, b in zip(self._choices, other._choices))

    def __repr__(self) -> str:
        choices = ",\n".join("        " + repr(choice).replace("\n", "\n        ") for choice in self._choices)
        return f"Choice(\n    shape={self.shape},\n    device={self.device},\n    dtype={self.dtype},\n" \
               f"    choices=[\n{choices}])"

    def to_torchrl(self):
        return _torchrl_data().Choice([choice.to_torchrl() if isinstance(choice, TensorSpec) else choice
                                       for choice in self._choices])


__all__ = ["Choice"]
