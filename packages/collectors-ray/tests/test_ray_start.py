"""Ray started by reap: on 127.0.0.1, no dashboard; actors it cannot place are a clear error."""

import os
from pathlib import Path

import pytest
import ray

from reap_mp.testing import constant_policy, env_fn
from reap_ray import RayCollector, RayStartError
from reap_ray._ray import DEFAULT_REMOTE_CONFIG, ensure_ray, remote_config, started_by_reap
from reap_ray.testing import processes_of_session


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


def test_unschedulable_actor_is_a_clear_error_naming_resources():
    with pytest.raises(RayStartError) as info:
        RayCollector(env_fn(), constant_policy(), frames_per_batch=10, num_collectors=1,
                     remote_configs={"num_cpus": 64}, actor_start_timeout=2)
    message = str(info.value)
    assert "actor 0 was not ready after 2 s" in message
    assert "asks for {CPU: 64, memory: 2.00 GiB}" in message
    assert "the cluster has {CPU: 6," in message
    assert "remote_configs" in message
