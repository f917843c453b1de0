"""Helpers shared by reap's test suites (internal, not published)."""

from reap_testing.buffers import BatchSink
from reap_testing.envs import (
    AgentsEnv,
    BusyEchoEnv,
    BusyEnv,
    CountingEnv,
    EchoEnv,
    FaultyEnv,
    GrowingEnv,
    UnequalAgentsEnv,
    env_fn,
    transformed_env_fn,
)
from reap_testing.faults import FAULTS, hold_lock_and_die, inject_fault
from reap_testing.leaks import (
    child_pids,
    children_but_tracker,
    group_left,
    group_pids,
    listening_addresses,
    pid_alive,
    shm_left_by_us,
    shm_mapped_by,
    shm_segments,
    wait_gone,
    worker_pids,
)
from reap_testing.policies import (
    ConstantPolicy,
    ConstantPolicyFactory,
    FaultyPolicy,
    RaisingPolicy,
    constant_policy,
)
from reap_testing.rpc import free_loopback_port, remote_buffer_calls, rpc_peer, rpc_run
from reap_testing.waiting import wait_until

__all__ = ["FAULTS", "AgentsEnv", "BatchSink", "BusyEchoEnv", "BusyEnv", "ConstantPolicy", "ConstantPolicyFactory",
           "CountingEnv", "EchoEnv", "FaultyEnv", "FaultyPolicy", "GrowingEnv", "RaisingPolicy", "UnequalAgentsEnv",
           "child_pids", "children_but_tracker", "constant_policy",
           "env_fn", "free_loopback_port", "remote_buffer_calls", "rpc_peer", "rpc_run", "transformed_env_fn", "group_left", "group_pids", "hold_lock_and_die", "inject_fault", "listening_addresses",
           "pid_alive", "shm_left_by_us", "shm_mapped_by", "shm_segments", "wait_gone", "wait_until",
           "worker_pids"]
