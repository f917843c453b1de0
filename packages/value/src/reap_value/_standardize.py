"""Standardization of advantages and rewards: over the whole batch, over chosen dims, or within
groups of a batch (``group_key``: one integer id per element, such as a task id).

Examples:
    >>> import torch
    >>> from reap_value._standardize import standardize_by_group
    >>> x = torch.tensor([1.0, 3.0, 10.0, 30.0])
    >>> standardize_by_group(x, torch.tensor([0, 0, 1, 1]))
    tensor([-0.7071,  0.7071, -0.7071,  0.7071])
"""

from __future__ import annotations

import torch


def standardize(x: torch.Tensor, eps: float, dims: list[int] | None = None) -> torch.Tensor:
    """``(x - mean) / std`` over ``dims`` (all by default), the std kept at ``eps`` or above.

    Examples:
        >>> import torch
        >>> standardize(torch.tensor([1.0, 3.0]), eps=1e-4)
        tensor([-0.7071,  0.7071])
    """
    if dims is None:
        dims = list(range(x.ndim))
    loc = x.mean(dim=dims, keepdim=True)
    scale = x.std(dim=dims, keepdim=True).clamp_min(eps)
    return (x - loc) / scale


def standardize_by_group(
    x: torch.Tensor, groups: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-4
) -> torch.Tensor:
    """:func:`standardize` within each group of equal ``groups`` ids (unbiased std).

    ``groups`` has ``x``'s leading dims (trailing dims are broadcast); ``mask`` (broadcastable
    to ``x``) picks the elements that count in each group's statistics.

    Examples:
        >>> import torch
        >>> standardize_by_group(torch.tensor([[2.0], [4.0]]), torch.tensor([[5], [5]]))
        tensor([[-0.7071],
                [ 0.7071]])
    """
    while groups.ndim < x.ndim:
        groups = groups.unsqueeze(-1)
    if groups.ndim > x.ndim:
        raise ValueError(
            f"group ids of shape {tuple(groups.shape)} have more dims than the values they group, "
            f"of shape {tuple(x.shape)}"
        )
    flat = x.reshape(-1)
    if not flat.numel():
        return x
    _, index = torch.unique(groups.expand(x.shape).reshape(-1), return_inverse=True)
    weight = torch.ones_like(flat) if mask is None else mask.expand(x.shape).reshape(-1).to(flat.dtype)
    n = int(index.max()) + 1

    def per_group(values):
        return flat.new_zeros(n).index_add_(0, index, values)

    count = per_group(weight)
    centered = flat - (per_group(flat * weight) / count.clamp_min(1))[index]
    std = (per_group(centered.square() * weight) / (count - 1).clamp_min(1)).sqrt()
    return (centered / std.clamp_min(eps)[index]).reshape(x.shape)
