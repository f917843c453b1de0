"""Helpers shared by reap's test suites (internal, not published)."""

from reap_testing.buffers import BatchSink
from reap_testing.envs import BusyEnv, CountingEnv
from reap_testing.leaks import (
    child_pids,
    children_but_tracker,
    group_left,
    group_pids,
    shm_left_by_us,
    shm_mapped_by,
    shm_segments,
)
from reap_testing.waiting import wait_until

__all__ = ["BatchSink", "BusyEnv", "CountingEnv", "child_pids", "children_but_tracker", "group_left", "group_pids",
           "shm_left_by_us", "shm_mapped_by", "shm_segments", "wait_until"]
