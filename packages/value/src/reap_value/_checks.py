"""Argument checks shared by the functional and module estimators.

Every check raises a ``ValueError`` (or ``TypeError``) whose message names the argument.
Checks that would read tensor values are skipped while ``torch.compile`` traces, so that the
compiled graph has no breaks.

Examples:
    >>> from reap_value._checks import check_coefficient
    >>> check_coefficient("lmbda", 1.5)
    Traceback (most recent call last):
    ...
    ValueError: lmbda must lie in [0, 1], got 1.5
"""

from __future__ import annotations

import numbers

import torch

Coefficient = float | torch.Tensor


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def check_coefficient(name: str, value: Coefficient, shape: torch.Size | None = None) -> None:
    """Check that ``gamma`` or ``lmbda`` is a number or tensor with values in [0, 1].

    Examples:
        >>> check_coefficient("gamma", 0.99)
    """
    if isinstance(value, torch.Tensor):
        if not value.is_floating_point():
            raise TypeError(f"{name} must be a float or a floating-point tensor, got {value.dtype}")
        if shape is not None:
            try:
                fits = torch.broadcast_shapes(value.shape, shape) == shape
            except RuntimeError:
                fits = False
            if not fits:
                raise ValueError(
                    f"{name} of shape {tuple(value.shape)} does not broadcast to the inputs' "
                    f"shape {tuple(shape)}"
                )
        if not _compiling() and value.device.type == "cpu" and value.numel():
            if bool(((value < 0) | (value > 1) | value.isnan()).any()):
                raise ValueError(f"{name} must lie in [0, 1], got values outside it")
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a float or a tensor, got {type(value).__name__}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")


def check_time_dim(time_dim: int, ndim: int) -> int:
    """Return ``time_dim`` as a non-negative index, or raise naming it.

    Examples:
        >>> check_time_dim(-2, 3)
        1
    """
    if isinstance(time_dim, bool) or not isinstance(time_dim, int):
        raise TypeError(f"time_dim must be an int, got {type(time_dim).__name__}")
    if not -ndim <= time_dim < ndim:
        raise ValueError(
            f"time_dim={time_dim} is out of range for inputs with {ndim} dimension(s); "
            f"use a value in [{-ndim}, {ndim - 1}]"
        )
    return time_dim % ndim


def check_tensors(
    named: dict[str, torch.Tensor | None], *, flags: tuple[str, ...] = ("done", "terminated")
) -> dict[str, torch.Tensor]:
    """Check that every given tensor has the shape of the first; flags become bool tensors.

    Returns the tensors (``None`` entries dropped), with flags converted to ``torch.bool``.

    Examples:
        >>> import torch
        >>> out = check_tensors({"reward": torch.zeros(2, 1), "done": torch.zeros(2, 1)})
        >>> out["done"].dtype
        torch.bool
    """
    out: dict[str, torch.Tensor] = {}
    ref_name = ref_shape = None
    for name, tensor in named.items():
        if tensor is None:
            continue
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
        if ref_shape is None:
            ref_name, ref_shape = name, tensor.shape
        elif tensor.shape != ref_shape:
            raise ValueError(
                f"{name} has shape {tuple(tensor.shape)} but {ref_name} has shape "
                f"{tuple(ref_shape)}; all inputs must share one shape [*B, T, *F]"
            )
        if name in flags:
            if tensor.dtype != torch.bool:
                tensor = tensor.to(torch.bool)
        elif not tensor.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {tensor.dtype}")
        out[name] = tensor
    if ref_shape is not None and len(ref_shape) == 0:
        raise ValueError(f"{ref_name} must have a time dimension, got a 0-dim tensor")
    return out
