"""The reverse linear recurrence behind every estimator, as a log-depth parallel scan.

Every estimator in reap-value reduces to ``x[t] = b[t] + a[t] * x[t + 1]`` along the time
dimension, with ``x[T] = 0``: ``a`` carries the discount and is zero where a trajectory ends.
A Hillis–Steele scan solves it in ``ceil(log2(T))`` vectorised steps instead of ``T`` Python
steps: after the step with stride ``k``, ``x[t]`` holds the sum over the next ``2k`` terms and
``a[t]`` the product of the next ``2k`` coefficients. The result is exact up to float rounding
(each element sees at most ``log2(T)`` extra roundings), and the loop over strides unrolls
into a graph without breaks under ``torch.compile`` for a fixed ``T``.

Examples:
    >>> import torch
    >>> from reap_value._scan import reverse_scan
    >>> a = torch.tensor([0.5, 0.5, 0.0, 0.5])
    >>> b = torch.tensor([1.0, 1.0, 1.0, 1.0])
    >>> reverse_scan(a, b, dim=0)
    tensor([1.7500, 1.5000, 1.0000, 1.0000])
"""

from __future__ import annotations

import torch

__all__ = ["reverse_scan", "reverse_scan_"]


def reverse_scan(a: torch.Tensor, b: torch.Tensor, *, dim: int) -> torch.Tensor:
    """Solve ``x[t] = b[t] + a[t] * x[t + 1]`` (``x[T] = 0``) along ``dim``.

    ``a`` and ``b`` are broadcast to a common shape; neither is modified. The returned
    tensor is new. Gradients flow to both inputs when autograd records the call.

    Examples:
        >>> import torch
        >>> reverse_scan(torch.full((3,), 0.5), torch.ones(3), dim=0)
        tensor([1.7500, 1.5000, 1.0000])
    """
    a, b = torch.broadcast_tensors(a, b)
    dtype = torch.promote_types(a.dtype, b.dtype)
    return reverse_scan_(a.to(dtype), b.to(dtype, copy=True), dim=dim)


def reverse_scan_(a: torch.Tensor, b: torch.Tensor, *, dim: int) -> torch.Tensor:
    """:func:`reverse_scan` that may overwrite ``b`` (and return it); ``a`` is only read.

    Both must have the same shape and dtype. Used on temporaries the caller owns, to save a
    copy.

    Examples:
        >>> import torch
        >>> b = torch.ones(3)
        >>> reverse_scan_(torch.full((3,), 0.5), b, dim=0) is b
        True
    """
    length = b.shape[dim]
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return _scan_out_of_place(a, b, dim, length)
    x = b
    stride = 1
    while stride < length:
        n = length - stride
        # ``a`` holds exactly the ``n`` coefficients this step reads, except at the first step.
        head = a if a.shape[dim] == n else a.narrow(dim, 0, n)
        carried = head * x.narrow(dim, stride, n)
        # The next step reads the first ``length - 2 * stride`` products of coefficients.
        following = length - 2 * stride
        if following > 0:
            a = a.narrow(dim, 0, following) * a.narrow(dim, stride, following)
        x.narrow(dim, 0, n).add_(carried)
        stride *= 2
    return x


def _scan_out_of_place(a: torch.Tensor, b: torch.Tensor, dim: int, length: int) -> torch.Tensor:
    """The same scan without in-place writes, so that autograd can differentiate it."""
    x = b
    stride = 1
    while stride < length:
        n = length - stride
        head = x.narrow(dim, 0, n) + a.narrow(dim, 0, n) * x.narrow(dim, stride, n)
        x = torch.cat([head, x.narrow(dim, n, stride)], dim)
        following = length - 2 * stride
        if following > 0:
            a = a.narrow(dim, 0, following) * a.narrow(dim, stride, following)
        stride *= 2
    return x
