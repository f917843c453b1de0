"""Huge pages for the large, long-lived tensors of a buffer (Linux, best effort).

A replay storage is filled once and then read at random rows: with 4 KiB pages nearly every
sampled row costs a TLB miss, and every first write of a page a fault. Backing the storage with
2 MiB pages removes most of both. Linux gives huge pages to a region only when asked
(``madvise(MADV_HUGEPAGE)``) unless configured to always do so
(``/sys/kernel/mm/transparent_hugepage/enabled``); this asks. Elsewhere, and where the kernel
says no, memory stays as it was: only speed differs. The cost: the kernel may compact memory to
find a huge page on a first write, and a storage's resident size grows in 2 MiB steps. Set
``REAP_REPLAY_HUGE_PAGES=0`` to never ask.

Examples:
    >>> import torch
    >>> buf = torch.empty(1 << 22)  # 16 MiB
    >>> advise_huge_pages(buf) in (True, False)
    True
"""

from __future__ import annotations

import ctypes
import os
import sys

import torch

__all__ = ["advise_huge_pages"]

_HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = 14  # linux/mman.h

_madvise = None
if sys.platform.startswith("linux") and os.environ.get("REAP_REPLAY_HUGE_PAGES", "1") != "0":
    try:
        _madvise = ctypes.CDLL(None, use_errno=True).madvise
        _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _madvise.restype = ctypes.c_int
    except (OSError, AttributeError):  # no libc symbol to call: nothing to ask
        _madvise = None


def advise_huge_pages(tensor: torch.Tensor) -> bool:
    """Asks the kernel to back the whole 2 MiB pages of a CPU ``tensor`` with huge pages.

    Returns whether the kernel accepted (False off Linux, with ``REAP_REPLAY_HUGE_PAGES=0``, on
    other devices, for tensors under one huge page, or when it refused). The data is not
    touched.
    """
    if _madvise is None or tensor.device.type != "cpu":
        return False
    storage = tensor.untyped_storage()
    start = storage.data_ptr()
    end = start + storage.nbytes()
    first = -(-start // _HUGE_PAGE) * _HUGE_PAGE
    last = end // _HUGE_PAGE * _HUGE_PAGE
    if last <= first:
        return False
    return _madvise(first, last - first, _MADV_HUGEPAGE) == 0
