"""``compile_with_warmup``: run a module eagerly a few times, then compiled."""

from __future__ import annotations

import torch


class compile_with_warmup:  # noqa: N801 - a function-like public name, as in TorchRL
    """Call ``module`` eagerly ``warmup`` times, then through ``torch.compile(module, **kwargs)``.

    Eager warm-up calls let lazy modules and caches settle before compilation traces them.

    Examples:
        >>> import torch
        >>> from reap import compile_with_warmup
        >>> f = compile_with_warmup(torch.nn.Linear(2, 2), warmup=1, backend="eager")
        >>> f(torch.zeros(2)).shape
        torch.Size([2])
    """

    def __init__(self, module, warmup: int = 1, **compile_kwargs):
        if not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"compile_with_warmup: warmup must be a non-negative int, got {warmup!r}")
        self.module = module
        self.warmup = warmup
        self.compile_kwargs = compile_kwargs
        self.calls = 0
        self.compiled = None

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls <= self.warmup:
            return self.module(*args, **kwargs)
        if self.compiled is None:
            self.compiled = torch.compile(self.module, **self.compile_kwargs)
        return self.compiled(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.__dict__["module"], name)
