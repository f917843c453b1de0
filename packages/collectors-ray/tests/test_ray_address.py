"""A driver given ``RAY_ADDRESS`` joins that Ray, collects on it, and never stops it.

This module runs its driver in a subprocess: the tests' own module-scoped Ray (conftest) would
otherwise already be the Ray of this process.
"""

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from ray.cluster_utils import Cluster

from reap_ray.testing import descendant_pids

pytestmark = pytest.mark.slow  # a Ray head and a driver with an actor: tens of seconds

DRIVER = textwrap.dedent("""
    import ray
    from reap_mp.testing import ConstantPolicy, env_fn
    from reap_ray import RayCollector

    collector = RayCollector(env_fn(), ConstantPolicy(1.0).as_module(), frames_per_batch=4, total_frames=8)
    frames = sum(batch.numel() for batch in collector)
    address = ray.get_runtime_context().gcs_address
    collector.shutdown(shutdown_ray=True)  # joined, not started: Ray must stay up
    print("RESULT", frames, collector.started_ray, address, ray.is_initialized(), flush=True)
""")


@pytest.fixture(scope="module")
def ray_session():
    """No Ray in this process (overrides the conftest's)."""
    yield None


@pytest.fixture
def no_actor_left():
    yield


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_ray_address_is_joined_and_never_stopped(monkeypatch):
    # a Ray head of its own, as ``ray start --head`` would run it (Ray 2.60's ``ray start`` also
    # turns on token authentication, which a plain RAY_ADDRESS client cannot pass)
    before = descendant_pids(os.getpid())
    cluster = Cluster(initialize_head=True, head_node_args={"node_ip_address": "127.0.0.1", "num_cpus": 2,
                                                            "object_store_memory": 150 * 2**20,
                                                            "include_dashboard": False})
    try:
        port = int(cluster.address.rsplit(":", 1)[1])
        monkeypatch.setenv("RAY_ADDRESS", cluster.address)
        driver = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True, timeout=300,
                                env=dict(os.environ))
        result = [line for line in driver.stdout.splitlines() if line.startswith("RESULT")]
        assert result, driver.stdout + driver.stderr
        assert result[0].split()[1:] == ["8", "False", cluster.address, "True"]
        # the cluster outlived the driver's shutdown(shutdown_ray=True) and its exit
        assert cluster.head_node.remaining_processes_alive() and _listening(port)
    finally:
        cluster.shutdown()
    deadline = time.monotonic() + 60
    while (left := descendant_pids(os.getpid()) - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"Ray processes left after the cluster's shutdown: {sorted(left)}"
