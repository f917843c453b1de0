"""Beyond one machine, on this one: a two-node Ray cluster (ray.cluster_utils) on 127.0.0.1,
joined through ``ray_init_config`` and through ``RAY_ADDRESS``, and never stopped by reap."""

import os
import socket
import time

import pytest
import ray
import torch
from ray.cluster_utils import Cluster

from reap_ray import RayCollector
from reap_ray.testing import descendant_pids, wait_no_reap_actors
from reap_testing import ConstantPolicy, env_fn

pytestmark = pytest.mark.slow  # a two-node cluster and actors on it: tens of seconds
NODE = {"node_ip_address": "127.0.0.1", "num_cpus": 2, "object_store_memory": 150 * 2**20}


@pytest.fixture(scope="module")
def ray_session(shared_ray):
    """Overrides the tests' local Ray (stopped first: this process joins the cluster instead):
    a head and a worker node, each with its own resource, as ``ray start`` would run them (Ray
    2.60's ``ray start`` also turns on token authentication, which a plain RAY_ADDRESS client
    cannot pass)."""
    shared_ray.stop()
    before = descendant_pids(os.getpid())
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "resources": {"head_node": 2},
                                                            "include_dashboard": False})
    worker = cluster.add_node(**NODE, resources={"worker_node": 2})
    try:
        yield cluster, worker
    finally:
        alive = wait_no_reap_actors(10.0) if ray.is_initialized() else set()
        ray.shutdown()
        cluster.shutdown()
        deadline = time.monotonic() + 60
        while (left := descendant_pids(os.getpid()) - before) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not alive, alive
        assert not left, f"Ray processes left after the cluster's shutdown: {sorted(left)}"


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, int(port))) == 0


def test_actors_pinned_to_nodes_collect_and_get_weights_across_nodes(ray_session):
    cluster, worker = ray_session
    assert not ray.is_initialized()
    policy = ConstantPolicy(1.0)
    collector = RayCollector(
        env_fn(), policy.as_module(), num_collectors=2, frames_per_batch=8, total_frames=24, sync=True,
        ray_init_config={"address": cluster.address},
        remote_configs=[{"resources": {"head_node": 1}}, {"resources": {"worker_node": 1}}],
    )
    with collector:
        assert not collector.started_ray  # joined the cluster: shutdown(shutdown_ray=True) leaves it
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
        assert collector.node_ids == [cluster.head_node.node_id, worker.node_id]
        weights = []
        for i, batch in enumerate(collector):
            assert batch.batch_size == torch.Size([2, 4])
            weights.append(batch["action"].flatten().unique().tolist())
            policy.weight.data.fill_(float(i + 2))
            collector.update_policy_weights_(policy)
        assert weights == [[1.0], [2.0], [3.0]]
        collector.shutdown(shutdown_ray=True)
        assert ray.is_initialized()
    assert not wait_no_reap_actors(10.0)
    ray.shutdown()  # this driver leaves; the cluster stays up
    assert cluster.head_node.remaining_processes_alive() and _listening(cluster.address)


def test_ray_address_is_joined_and_never_stopped(ray_session, monkeypatch):
    cluster, _ = ray_session
    assert not ray.is_initialized()
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    collector = RayCollector(env_fn(), ConstantPolicy(1.0).as_module(), frames_per_batch=4, total_frames=8)
    assert not collector.started_ray and ray.get_runtime_context().gcs_address == cluster.address
    assert sum(batch.numel() for batch in collector) == 8
    collector.shutdown(shutdown_ray=True)  # joined, not started: Ray must stay up
    assert ray.is_initialized() and not wait_no_reap_actors(10.0)
    ray.shutdown()
    # the cluster outlived the driver's shutdown(shutdown_ray=True) and its leaving
    assert cluster.head_node.remaining_processes_alive() and _listening(cluster.address)
