"""reap-profiling: torch.profiler traces of chosen workers and a timing summary, for every collector.

Installing it gives every reap collector ``enable_profile``, ``disable_profile`` and
``timings``; no collector imports this package (it is found through the plugin registry).

Examples:
    >>> import reap_profiling
    >>> sorted(reap_profiling.__all__)[:3]
    ['CollectorTimings', 'ProfileConfig', 'WorkerTimings']
"""

from reap_profiling.api import collector_timings, disable_profile, enable_profile, profile_config
from reap_profiling.config import ProfileConfig
from reap_profiling.timings import CollectorTimings, WorkerTimings

__all__ = ["CollectorTimings", "ProfileConfig", "WorkerTimings", "collector_timings", "disable_profile",
           "enable_profile", "profile_config"]
