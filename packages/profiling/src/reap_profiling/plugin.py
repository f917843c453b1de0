"""Registers reap-profiling with reap's plugin manager.

Always registered (each runs once per collector, or once per ``timings()``):
``reap_register_exports`` (``collector.enable_profile`` and ``from reap import ProfileConfig``
find this package through it), ``reap_collector_start``, ``reap_plugin_options``,
``reap_plugin_report`` and ``reap_collector_shutdown``. The per-rollout hooks live on
:class:`RolloutHooks`, registered only while a collector in this process is being profiled:
with profiling off, the rollout path calls nothing of this package.

Examples:
    >>> from reap.plugins import get_registries
    >>> get_registries().exports["enable_profile"]
    'reap_profiling:enable_profile'
    >>> get_registries().pm.get_plugin(ROLLOUT_HOOKS) is None  # nothing profiled here
    True
"""

from __future__ import annotations

import weakref

from reap.plugins import get_registries, hookimpl
from reap_profiling import api
from reap_profiling.config import ProfileConfig
from reap_profiling.worker import RolloutProfile

EXPORTS = ("ProfileConfig", "CollectorTimings", "WorkerTimings", "enable_profile", "disable_profile",
           "collector_timings", "profile_config")
#: The name :class:`RolloutHooks` is registered under while it is needed.
ROLLOUT_HOOKS = "profiling.rollouts"
_PROFILED: weakref.WeakSet = weakref.WeakSet()  # collectors with an active RolloutProfile here


class RolloutHooks:
    """The per-rollout hooks; see the module docstring."""

    @hookimpl
    def reap_rollout_start(self, collector, worker_idx):
        state = api.STATES.get(collector)
        if isinstance(state, RolloutProfile) and state.active:
            state.rollout_start(collector)

    @hookimpl
    def reap_rollout_end(self, collector, worker_idx, frames):
        state = api.STATES.get(collector)
        if isinstance(state, RolloutProfile) and state.active:
            state.rollout_end(collector, frames)

    @hookimpl
    def reap_worker_phase(self, collector, worker_idx, phase):
        state = api.STATES.get(collector)
        if isinstance(state, RolloutProfile):
            state.worker_phase(phase)


def _sync_rollout_hooks() -> None:
    pm = get_registries().pm
    registered = pm.get_plugin(ROLLOUT_HOOKS) is not None
    if _PROFILED and not registered:
        pm.register(RolloutHooks(), name=ROLLOUT_HOOKS)
    elif not _PROFILED and registered:
        pm.unregister(name=ROLLOUT_HOOKS)


def _stop(collector, state) -> None:
    if isinstance(state, RolloutProfile):
        try:
            state.close()
        finally:
            _PROFILED.discard(collector)
            _sync_rollout_hooks()


@hookimpl
def reap_register_exports(register):
    for name in EXPORTS:  # TorchRL has ProfileConfig in torchrl.collectors; the rest are reap's own
        modules = ("reap.collectors",) if name == "ProfileConfig" else ()
        register(name, f"reap_profiling:{name}", modules=modules)


@hookimpl
def reap_collector_start(collector, worker_idx):
    api.STARTED.add(collector)


@hookimpl
def reap_plugin_options(collector, name, options):
    if name != api.OPTION:
        return
    if options is not None and not isinstance(options, ProfileConfig):
        raise TypeError(f"the {api.OPTION!r} plugin option must be a ProfileConfig, got {type(options).__name__}")
    _stop(collector, api.STATES.get(collector))  # the old state keeps its report until replaced
    if options is None:
        return
    if api.runs_rollouts(collector):
        api.STATES[collector] = RolloutProfile(collector, options)
        _PROFILED.add(collector)
        _sync_rollout_hooks()
    else:
        api.STATES[collector] = api.RemoteProfile(options)


@hookimpl
def reap_plugin_report(collector, name):
    if name != api.OPTION:
        return None
    state = api.STATES.get(collector)
    if state is None:
        return []
    if isinstance(state, RolloutProfile):
        return [state.report()]
    return state.gather(collector)  # a remote collector inside a remote worker: its workers' reports


@hookimpl
def reap_collector_shutdown(collector, worker_idx):
    state = api.STATES.get(collector)
    if isinstance(state, api.RemoteProfile) and api.OPTION in collector.plugin_options:
        try:  # the workers still run: keep their final reports for timings() after shutdown
            state.gather(collector)
        except Exception:  # noqa: BLE001 - a failed worker is being shut down; keep the last reports
            pass
    _stop(collector, state)
