"""Matmul precision of the Triton recurrent kernels, set per module or process-wide.

Modes: ``"ieee"`` (full float32), ``"tf32"`` (tensor cores, ~10 mantissa bits), ``"tf32x3"``
(three tensor-core products, ~22 bits), ``"auto"`` (the process-wide setting, else derived from
``torch.get_float32_matmul_precision()``: ``"highest"`` -> ``"ieee"``, ``"high"`` ->
``"tf32x3"``, ``"medium"`` -> ``"tf32"``). The mode is handed to ``tl.dot`` inside the kernel;
torch's process-global TF32 flag is never read back or flipped around a call. On the CPU
(Triton's interpreter) every mode computes in IEEE arithmetic.

Examples:
    >>> from reap_rnn import set_recurrent_matmul_precision
    >>> from reap_rnn.precision import resolve_precision
    >>> set_recurrent_matmul_precision("tf32x3")
    >>> resolve_precision("auto")
    'tf32x3'
    >>> resolve_precision("ieee")
    'ieee'
    >>> set_recurrent_matmul_precision(None)
"""

from __future__ import annotations

import torch

PRECISIONS = ("ieee", "tf32", "tf32x3")
_USER_MODES = ("auto", *PRECISIONS)
_FROM_TORCH = {"highest": "ieee", "high": "tf32x3", "medium": "tf32"}
_global: str | None = None


def check_precision(value, name: str = "recurrent_matmul_precision") -> str:
    """``value`` if it is a known mode, else a ``ValueError`` naming ``name`` and the choices."""
    if value not in _USER_MODES:
        raise ValueError(f"{name} must be one of {list(_USER_MODES)}, got {value!r}")
    return value


def set_recurrent_matmul_precision(mode: str | None) -> None:
    """Set the process-wide precision used when a module says ``"auto"`` (None clears it).

    Examples:
        >>> from reap_rnn import set_recurrent_matmul_precision
        >>> set_recurrent_matmul_precision("ieee")
        >>> set_recurrent_matmul_precision(None)
    """
    global _global
    if mode is not None and (mode == "auto" or check_precision(mode, "mode") not in PRECISIONS):
        raise ValueError(f"set_recurrent_matmul_precision: mode must be one of {list(PRECISIONS)} or None")
    _global = mode


def resolve_precision(mode: str) -> str:
    """The concrete mode (``"ieee"``, ``"tf32"`` or ``"tf32x3"``) that ``mode`` stands for."""
    check_precision(mode)
    if mode != "auto":
        return mode
    if _global is not None:
        return _global
    return _FROM_TORCH.get(torch.get_float32_matmul_precision(), "ieee")
