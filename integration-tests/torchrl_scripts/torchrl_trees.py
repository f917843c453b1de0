"""Stand-ins for TorchRL's C++ segment trees, for running the original scripts on TorchRL here.

TorchRL 0.14.1's compiled extension (``torchrl._torchrl``) does not load against the torch
build of this workspace (an undefined symbol), so TorchRL's ``PrioritizedSampler`` refuses to
start. :func:`install` gives it plain tensor-backed trees with the same calls; nothing of reap
uses this.
"""

import numpy as np
import torch


class _Tree:
    def __init__(self, size: int, fill: float, dtype: torch.dtype):
        self.values = torch.full((size,), fill, dtype=dtype)

    def __getitem__(self, index):
        return self.values[torch.as_tensor(index)]

    def __setitem__(self, index, value):
        self.values[torch.as_tensor(index)] = torch.as_tensor(value, dtype=self.values.dtype)


class _Sum(_Tree):
    def __init__(self, size: int, dtype: torch.dtype):
        super().__init__(size, 0.0, dtype)

    def query(self, start: int, end: int) -> float:
        return self.values[start:end].sum().item()

    def scan_lower_bound(self, mass):
        """The first index whose running sum exceeds each of ``mass``."""
        mass = torch.as_tensor(np.asarray(mass), dtype=self.values.dtype)
        return torch.searchsorted(self.values.cumsum(0), mass, right=True)


class _Min(_Tree):
    def __init__(self, size: int, dtype: torch.dtype):
        super().__init__(size, float("inf"), dtype)

    def query(self, start: int, end: int) -> float:
        return self.values[start:end].min().item()


def install() -> None:
    """Give TorchRL's prioritized sampler these trees where its compiled ones are missing."""
    from torchrl.data.replay_buffers.samplers import prioritized

    if prioritized.SumSegmentTreeFp32 is not None:
        return
    for name, tree, dtype in [("SumSegmentTreeFp32", _Sum, torch.float32),
                              ("SumSegmentTreeFp64", _Sum, torch.float64),
                              ("MinSegmentTreeFp32", _Min, torch.float32),
                              ("MinSegmentTreeFp64", _Min, torch.float64)]:
        setattr(prioritized, name, lambda size, tree=tree, dtype=dtype: tree(size, dtype))
