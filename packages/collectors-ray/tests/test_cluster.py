"""Beyond one machine, on this one: a two-node Ray cluster (ray.cluster_utils) on 127.0.0.1."""

import os

import pytest
import ray
import torch
from ray.cluster_utils import Cluster

from reap_mp.testing import ConstantPolicy, env_fn
from reap_ray import RayCollector
from reap_ray.testing import descendant_pids, wait_no_reap_actors

pytestmark = pytest.mark.slow
NODE = {"node_ip_address": "127.0.0.1", "num_cpus": 2, "object_store_memory": 150 * 2**20}


@pytest.fixture(scope="module")
def ray_session():
    """Overrides the local Ray of conftest: a head and a worker node, each with its own resource."""
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
        assert not alive, alive
        assert not descendant_pids(os.getpid()) - before


def test_actors_pinned_to_nodes_collect_and_get_weights_across_nodes(ray_session):
    cluster, worker = ray_session
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
