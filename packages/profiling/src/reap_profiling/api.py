"""``enable_profile``, ``disable_profile`` and ``collector_timings``: what every collector calls.

``BaseCollector.enable_profile`` finds :func:`enable_profile` through the plugin registry (the
``reap_register_exports`` hook), so no collector imports this package. The config travels as
the ``"profiling"`` plugin option (``BaseCollector.set_plugin_options``): a collector that runs
its own rollouts gets a :class:`~reap_profiling.worker.RolloutProfile`; a remote collector
forwards the option to its workers, and later asks them for their reports.

Examples:
    >>> from reap import Collector, GymEnv
    >>> collector = Collector(GymEnv("CartPole-v1"), None, frames_per_batch=20, total_frames=60)
    >>> collector.enable_profile(workers=[])  # timings only, no trace
    >>> batches = list(collector)
    >>> t = collector.timings()
    >>> t[0].frames, t[0].rollouts
    (60, 3)
    >>> collector.shutdown()
"""

from __future__ import annotations

import dataclasses
import weakref
from pathlib import Path

from reap_profiling.config import ProfileConfig
from reap_profiling.timings import CollectorTimings, WorkerTimings
from reap_profiling.worker import RolloutProfile

#: The plugin option's name (``collector.plugin_options["profiling"]``).
OPTION = "profiling"

#: Profiling state by collector: a RolloutProfile, or a RemoteProfile for remote collectors.
STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Collectors whose iteration started (``reap_collector_start``).
STARTED: weakref.WeakSet = weakref.WeakSet()


class RemoteProfile:
    """A remote collector's side: the config it forwarded and its workers' last reports."""

    def __init__(self, config: ProfileConfig):
        self.config = config
        self.reports: list[WorkerTimings] | None = None

    def gather(self, collector) -> list[WorkerTimings]:
        reports = collector.worker_plugin_reports(OPTION)
        self.reports = [t for report in reports or [] for t in (report or [])]
        return self.reports


def runs_rollouts(collector) -> bool:
    """Whether ``collector`` runs its rollouts itself (a reap ``Collector``, wherever it lives)."""
    from reap.collectors.collector import Collector

    return isinstance(collector, Collector)


def forwards_options(collector) -> bool:
    """Whether a remote collector forwards plugin options to its workers (overrides the base)."""
    from reap.collectors.base import BaseCollector

    return type(collector)._forward_plugin_options is not BaseCollector._forward_plugin_options


def enable_profile(collector, config: ProfileConfig | None = None, **kwargs) -> None:
    """Profile ``collector`` (see ``BaseCollector.enable_profile`` and :class:`ProfileConfig`).

    Examples:
        >>> from reap import Collector, GymEnv
        >>> collector = Collector(GymEnv("CartPole-v1"), None, frames_per_batch=10, total_frames=10)
        >>> collector.enable_profile(num_rollouts=1, warmup_rollouts=1)
        Traceback (most recent call last):
        ...
        ValueError: ProfileConfig: num_rollouts=1 must be greater than warmup_rollouts=1 (it counts the warm-up rollouts too); e.g. num_rollouts=2, warmup_rollouts=1 records one rollout
        >>> collector.shutdown()
    """
    owner = f"{type(collector).__name__}.enable_profile"
    if config is None:
        try:
            config = ProfileConfig(**kwargs)
        except TypeError as exc:
            if "unexpected keyword argument" in str(exc):
                raise TypeError(f"{owner}: {exc}; the options are the fields of ProfileConfig") from None
            raise
    elif kwargs:
        raise TypeError(f"{owner}: pass a ProfileConfig or its fields as keywords, not both")
    elif not isinstance(config, ProfileConfig):
        raise TypeError(f"{owner}: config must be a ProfileConfig, got {type(config).__name__}")
    if getattr(collector, "_closed", False):
        raise RuntimeError(f"{owner}: the collector was shut down; enable profiling on a new one")
    if collector in STARTED or getattr(collector, "frames", 0):
        raise RuntimeError(
            f"{owner}: Cannot enable profiling after iteration has started; call enable_profile before the first batch "
            "(profiling must reach the workers before they collect)"
        )
    if not runs_rollouts(collector) and not forwards_options(collector):
        raise NotImplementedError(
            f"{owner}: {type(collector).__name__} does not forward plugin options to its workers "
            "yet (it needs _forward_plugin_options and worker_plugin_reports; see the "
            "reap-profiling README), so its workers cannot be profiled"
        )
    workers = 1 if runs_rollouts(collector) else getattr(collector, "num_workers", None)
    outside = [w for w in config.workers if workers is not None and w >= workers]
    if outside:
        raise ValueError(
            f"{owner}: workers={list(config.workers)} but the collector has {workers} worker(s) "
            f"(indices 0 to {workers - 1}); pass workers=[] to time without tracing"
        )
    if config.save_path is not None:
        config = _absolute(config)
    collector.set_plugin_options(OPTION, config.with_available_activities())


def _absolute(config: ProfileConfig) -> ProfileConfig:
    return dataclasses.replace(config, save_path=str(Path(config.save_path).expanduser().absolute()))


def profile_config(collector) -> ProfileConfig | None:
    """The config ``enable_profile`` gave ``collector`` (None when profiling is off)."""
    return collector.plugin_options.get(OPTION)


def disable_profile(collector) -> None:
    """Stop profiling ``collector`` and its workers; traces recorded so far are written.

    Timings stay readable with ``collector.timings()``. A no-op when profiling is off.
    """
    if OPTION in collector.plugin_options:
        state = STATES.get(collector)
        if isinstance(state, RemoteProfile) and not getattr(collector, "_closed", False):
            state.gather(collector)
        collector.set_plugin_options(OPTION, None)


def collector_timings(collector) -> CollectorTimings:
    """Where each worker's time went since ``enable_profile`` (see ``BaseCollector.timings``)."""
    state = STATES.get(collector)
    if state is None:
        raise RuntimeError(
            f"{type(collector).__name__}.timings(): profiling is off; call "
            "collector.enable_profile(...) (workers=[] to time without tracing) before iterating"
        )
    if isinstance(state, RolloutProfile):
        return CollectorTimings((state.report(),))
    if getattr(collector, "_closed", False) or OPTION not in collector.plugin_options:
        reports = state.reports or []  # gathered at shutdown / disable
    else:
        reports = state.gather(collector)
    return CollectorTimings(tuple(reports))


__all__ = ["OPTION", "RemoteProfile", "collector_timings", "disable_profile", "enable_profile", "profile_config",
           "runs_rollouts"]
