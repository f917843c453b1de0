"""Matmul precision of the Triton recurrent kernels, set per module or process-wide, as TorchRL's.

Concrete modes: ``"ieee"`` (full float32), ``"tf32"`` (tensor cores, ~10 mantissa bits),
``"tf32x3"`` (three tensor-core products, ~22 bits). GPU-aware presets: ``"fast"`` (``"tf32"``
on Ampere or newer NVIDIA GPUs, else ``"ieee"``) and ``"high-prec"`` (``"tf32x3"`` there, else
``"ieee"``). ``"auto"`` defers to the process-wide setting (:func:`set_recurrent_matmul_precision`,
initially the ``TORCHRL_RNN_PRECISION`` environment variable), else to
``torch.get_float32_matmul_precision()``: ``"highest"`` -> ``"ieee"``, ``"high"`` ->
``"high-prec"``, ``"medium"`` -> ``"fast"``. The mode is handed to ``tl.dot`` inside the kernel;
torch's process-global TF32 flag is never read back or flipped around a call. On the CPU
(Triton's interpreter) every mode computes in IEEE arithmetic.

Examples:
    >>> from reap_rnn import get_recurrent_matmul_precision, set_recurrent_matmul_precision
    >>> set_recurrent_matmul_precision("tf32x3")
    >>> get_recurrent_matmul_precision()
    'tf32x3'
    >>> set_recurrent_matmul_precision(None)
"""

from __future__ import annotations

import os

import torch

PRECISIONS = ("ieee", "tf32", "tf32x3")
PRESETS = ("fast", "high-prec")
_USER_MODES = ("auto", *PRESETS, *PRECISIONS)
_FROM_TORCH = {"highest": "ieee", "high": "high-prec", "medium": "fast"}
_ENV_VAR = "TORCHRL_RNN_PRECISION"


def _from_env() -> str | None:
    raw = os.environ.get(_ENV_VAR, "").strip().lower()
    if raw in ("", "auto"):
        return None
    if raw not in (*PRESETS, *PRECISIONS):
        raise ValueError(
            f"{_ENV_VAR}={raw!r} is not a valid recurrent matmul precision; expected one of "
            f"{list(_USER_MODES)}"
        )
    return raw


_global: str | None = _from_env()


def check_precision(value, name: str = "recurrent_matmul_precision") -> str:
    """``value`` if it is a known mode, else a ``ValueError`` naming ``name`` and the choices."""
    if value not in _USER_MODES:
        raise ValueError(f"{name} must be one of {list(_USER_MODES)}, got {value!r}")
    return value


def set_recurrent_matmul_precision(mode: str | None) -> None:
    """Set the process-wide precision used when a module says ``"auto"``; ``None`` or ``"auto"``
    go back to the default (``TORCHRL_RNN_PRECISION``, else torch's matmul precision).

    Examples:
        >>> from reap_rnn import set_recurrent_matmul_precision
        >>> set_recurrent_matmul_precision("fast")
        >>> set_recurrent_matmul_precision(None)
    """
    global _global
    if mode is None or mode == "auto":
        _global = _from_env()
        return
    if mode not in (*PRESETS, *PRECISIONS):
        raise ValueError(
            f"Invalid recurrent matmul precision {mode!r}; expected one of {list(_USER_MODES)} or None"
        )
    _global = mode


def get_recurrent_matmul_precision() -> str:
    """The concrete mode (``"ieee"``, ``"tf32"`` or ``"tf32x3"``) that ``"auto"`` runs at now.

    Examples:
        >>> from reap_rnn import get_recurrent_matmul_precision
        >>> get_recurrent_matmul_precision() in ("ieee", "tf32", "tf32x3")
        True
    """
    return resolve_precision("auto")


def resolve_precision(mode: str) -> str:
    """The concrete mode (``"ieee"``, ``"tf32"`` or ``"tf32x3"``) that ``mode`` stands for."""
    check_precision(mode)
    if mode == "auto":
        mode = _global if _global is not None else _FROM_TORCH[torch.get_float32_matmul_precision()]
    if mode in PRESETS:
        if not _tensor_cores():
            return "ieee"
        return "tf32" if mode == "fast" else "tf32x3"
    return mode


def _tensor_cores() -> bool:
    """Whether the current device has TF32 tensor cores (NVIDIA, compute capability 8 or more)."""
    if not torch.cuda.is_available() or getattr(torch.version, "hip", None) is not None:
        return False
    return torch.cuda.get_device_capability(torch.cuda.current_device())[0] >= 8
