"""Typed registry entries filled through the registration hooks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CollectorBackend:
    """A way to run collection: ``factory(sync=..., **collector_kwargs)`` builds the collector.

    Examples:
        >>> from reap.registry import CollectorBackend
        >>> entry = CollectorBackend("local", factory=dict, summary="in-process")
        >>> entry.name
        'local'
    """

    name: str
    factory: Any
    summary: str


@dataclass(frozen=True)
class WeightSyncSchemeEntry:
    """A weight-sync scheme: ``cls(**options)`` builds it."""

    name: str
    cls: Any
    summary: str


@dataclass(frozen=True)
class RecurrentBackend:
    """A recurrent kernel backend (``"pad"``, ``"scan"``, ``"triton"``, ...)."""

    name: str
    impl: Any
    summary: str
