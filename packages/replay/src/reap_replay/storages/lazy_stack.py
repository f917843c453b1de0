"""``LazyStackStorage``: a list of items read back as one lazily stacked TensorDict (TorchRL's).

Items may differ in shape (and hold strings): a read of several items is a
``LazyStackedTensorDict`` over them (no copy until an entry is read whole), so a buffer samples
ragged data; ``densify(layout=torch.jagged)`` makes nested tensors of it.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from reap_replay import ReplayBuffer
    >>> rb = ReplayBuffer(storage=LazyStackStorage(100), batch_size=4)
    >>> _ = rb.add(TensorDict(obs=torch.zeros(3), text="short"))
    >>> _ = rb.add(TensorDict(obs=torch.ones(5), text="long"))
    >>> batch = rb.sample()
    >>> type(batch).__name__, {len(row["obs"]) for row in batch.unbind(0)} <= {3, 5}
    ('LazyStackedTensorDict', True)
"""

from __future__ import annotations

from tensordict import lazy_stack

from reap_replay.storages.lists import ListStorage


class LazyStackStorage(ListStorage):
    """A :class:`ListStorage` whose reads of several items are ``lazy_stack``s of them along
    ``stack_dim`` (of the items' batch dims; negative counts from the stacked result's end)."""

    def __init__(self, max_size: int | None = None, *, compilable: bool = False, stack_dim: int = 0, device=None):
        super().__init__(max_size, compilable=compilable, device=device)
        if not isinstance(stack_dim, int):
            raise TypeError(f"LazyStackStorage: stack_dim must be an int, got {stack_dim!r}")
        self.stack_dim = stack_dim

    def get(self, index):
        items = super().get(index)
        if not isinstance(items, list):
            return items
        dim = self.stack_dim if self.stack_dim >= 0 else items[0].ndim + 1 + self.stack_dim
        return lazy_stack(items, dim)

    def __repr__(self) -> str:
        return f"LazyStackStorage(max_size={self.max_size}, stack_dim={self.stack_dim})"
