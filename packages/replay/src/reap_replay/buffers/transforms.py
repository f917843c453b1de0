"""A replay buffer's transforms: applied in order to what is read, inverted on what is written.

``rb.transform`` is a :class:`TransformChain`: a list of transforms that can be indexed,
appended to and called. A transform is any callable; its ``inv`` (if it has one) is applied to
data being written, last transform first. ``invert=True`` (:func:`inverted`) swaps the two.

Examples:
    >>> import torch
    >>> chain = TransformChain([lambda x: x + 1, inverted(lambda x: x * 10)])
    >>> chain(torch.tensor(1)).item(), chain.inv(torch.tensor(1)).item()
    (2, 10)
"""

from __future__ import annotations


def _inverse(transform):
    return getattr(transform, "inv", None) or _identity


def _identity(data):
    return data


class _Inverted:
    """``transform`` applied the other way round: ``transform`` on writes, its ``inv`` on reads."""

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, data):
        return _inverse(self.transform)(data)

    def inv(self, data):
        return self.transform(data)

    def __repr__(self) -> str:
        return f"inverted({self.transform!r})"


def inverted(transform):
    """``transform`` applied to data being written and its ``inv`` (if any) to data read."""
    return _Inverted(transform)


class TransformChain(list):
    """The transforms of a replay buffer, in the order they apply to what is read."""

    def __call__(self, data):
        return self.forward(data)

    def forward(self, data):
        """Applies each transform, the first first (``__call__`` runs this, as a ``Compose``'s)."""
        for transform in self:
            data = transform(data)
        return data

    def inv(self, data):
        """Applies each transform's ``inv`` (if any), the last transform first."""
        for transform in reversed(self):
            data = _inverse(transform)(data)
            if data is None:
                return None
        return data

    def insert(self, index: int, transform) -> None:
        if abs(index) > len(self):
            raise ValueError(
                f"Index expected to be between [-{len(self)}, {len(self)}] got index={index}"
            )
        super().insert(index, transform)

    def state_dict(self) -> list:
        """The ``state_dict()`` of each transform that has one (``None`` for the others)."""
        return [t.state_dict() if hasattr(t, "state_dict") else None for t in self]

    def load_state_dict(self, states) -> None:
        if isinstance(states, dict) and not states:  # a chain that had no state
            return
        if len(states) != len(self):
            raise ValueError(f"the state holds {len(states)} transforms, this buffer has {len(self)}")
        for t, state in zip(self, states):
            if state is not None:
                t.load_state_dict(state)
