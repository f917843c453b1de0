"""Ray started by reap: on 127.0.0.1, no dashboard; actors it cannot place are a clear error."""

import os
from pathlib import Path

import pytest
import ray

from reap_ray import RayCollector, RayReplayBuffer, RayStartError
from reap_ray._ray import DEFAULT_REMOTE_CONFIG, ensure_ray, remote_config, started_by_reap
from reap_ray.testing import processes_of_session
from reap_replay import LazyTensorStorage
from reap_testing import constant_policy, env_fn


def _listening_addresses(pids):
    """(address, port) of every TCP socket in LISTEN state owned by ``pids``, from /proc."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                host, port = fields[1].split(":")
                out.add((host, int(port, 16)))
    return out


def test_local_ray_listens_on_loopback_only(ray_session):
    assert started_by_reap()
    assert ensure_ray() is False  # already running: joined, not started again
    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}
    listening = _listening_addresses(processes_of_session(ray_session) | {os.getpid()})
    assert listening, "expected Ray's processes to listen on some port"
    loopback = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}
    assert {host for host, _ in listening} <= loopback, listening
    # no dashboard: Ray keeps only its minimal API server, without the web frontend
    assert ray._private.worker._global_node.address_info["webui_url"] in ("", None)
    for pid in processes_of_session(ray_session):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        if any(part.endswith("dashboard/dashboard.py") for part in cmdline):
            assert "--minimal" in cmdline and "--disable-frontend" in cmdline


def test_remote_configs_default_to_one_cpu_no_gpu_2gib():
    assert remote_config(None, "x") == {"num_cpus": 1, "num_gpus": 0, "memory": 2 * 2**30}
    assert remote_config({"num_cpus": 2}, "x") == {**DEFAULT_REMOTE_CONFIG, "num_cpus": 2}
    with pytest.raises(TypeError, match="remote_configs must be a dict of Ray actor options"):
        RayCollector(env_fn(), constant_policy(), frames_per_batch=10, remote_configs=3)


def _actors_created(class_name: str) -> int:
    """Actors of this class this driver has created so far, dead or alive."""
    from ray._private import state

    job = ray.get_runtime_context().get_job_id()
    return sum(1 for info in state.actors().values()
               if info.get("JobID") == job and info.get("ActorClassName", "").endswith(class_name))


@pytest.mark.parametrize("kwargs,message", [
    ({"num_collectors": 1, "remote_configs": {"num_cpus": 64}},
     r"RayCollector: actor 0 asks for \{CPU: 64, memory: 2.00 GiB\} but no node of the cluster has that much "
     r"\(its 1 node\(s\): \{CPU: 6, memory: .* GiB, object_store_memory: 0.29 GiB\}\)\. Lower remote_configs"),
    ({"num_collectors": 2, "remote_configs": [{}, {"resources": {"sim": 1}}]},
     r"RayCollector: actor 1 asks for \{CPU: 1, memory: 2.00 GiB, sim: 1\} but no node"),
    ({"num_collectors": 4, "remote_configs": {"num_cpus": 2, "memory": 2**27}},
     r"^RayCollector: 4 actors ask for \{CPU: 8, memory: 0.50 GiB\} in all \(each \{CPU: 2, memory: 0.12 GiB\}\) "
     r"but the cluster has \{CPU: 6, .*\} in all; at most 3 fit\. Start fewer collectors, lower remote_configs "
     r"\(e\.g\. remote_configs=\{'num_cpus': 0\.5\}"),
], ids=["no-node-that-big", "absent-resource", "more-than-the-cluster"])
def test_actors_the_cluster_can_never_place_are_refused_before_any_starts(kwargs, message):
    before = _actors_created("CollectorActor")
    with pytest.raises(RayStartError, match=message):
        RayCollector(env_fn(), constant_policy(), frames_per_batch=8, start_timeout=600, **kwargs)
    assert _actors_created("CollectorActor") == before  # refused before asking Ray for any actor


def test_placement_counts_the_actors_already_running_and_waits_only_for_busy_resources():
    with pytest.raises(RayStartError, match=r"RayReplayBuffer: actor 0 asks for \{CPU: 7, memory: 2.00 GiB\}"):
        RayReplayBuffer(storage=LazyTensorStorage(10), remote_config={"num_cpus": 7})
    small = {"num_cpus": 2, "memory": 2**27}
    with RayReplayBuffer(storage=LazyTensorStorage(64), remote_config=small) as rb, \
            RayCollector(env_fn(), constant_policy(), num_collectors=1, frames_per_batch=8, total_frames=16,
                         remote_configs=small, replay_buffer=rb) as collector:
        before = _actors_created("CollectorActor")
        # the buffer's 2 CPUs and the actor's 2 are held: 2 more actors of 2 CPUs make 8 of 6
        with pytest.raises(RayStartError, match=r"^RayCollector: 4 actors ask for \{CPU: 8, .*\} in all "
                                                r"\(each \{CPU: 2, memory: 0.12 GiB\}\) .* at most 3 fit"):
            collector.add_collectors([env_fn()] * 2, remote_configs=small)
        assert _actors_created("CollectorActor") == before and collector.num_collectors == 1
        # resources that exist but are held: the wait, bounded by start_timeout
        with pytest.raises(RayStartError, match=r"RayCollector: actor 0 was not ready after 2 s: it asks for "
                                                r"\{CPU: 3, memory: 0.12 GiB\} and the cluster has \{CPU: 6, .*\} "
                                                r"in all and \{CPU: 2, .*\} free: other actors or tasks hold"):
            RayCollector(env_fn(), constant_policy(), frames_per_batch=8, start_timeout=2,
                         remote_configs={**small, "num_cpus": 3})
        for _ in collector:  # still collecting
            pass
        assert len(rb) == 16


def test_torchrls_default_ray_init_config_starts_ray_on_loopback(ray_session):
    from reap.collectors.distributed.ray import DEFAULT_RAY_INIT_CONFIG
    from reap.collectors.distributed.ray import RayCollector as FromTorchRLPath

    assert FromTorchRLPath is RayCollector
    assert DEFAULT_RAY_INIT_CONFIG["_node_ip_address"] == "127.0.0.1"
    assert DEFAULT_RAY_INIT_CONFIG["include_dashboard"] is False and DEFAULT_RAY_INIT_CONFIG["address"] is None
    assert ensure_ray(DEFAULT_RAY_INIT_CONFIG) is False  # a Ray is running: it is used as it is
