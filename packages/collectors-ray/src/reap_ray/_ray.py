"""Joining or starting Ray, and asking it for actors that it can actually schedule.

``ensure_ray(ray_init_config)`` is the only place reap calls ``ray.init``:

* Ray already initialised in this process: use it (reap did not start it).
* ``ray_init_config`` given: ``ray.init(**ray_init_config)``, as TorchRL does.
* ``RAY_ADDRESS`` set: join that cluster.
* A Ray running on this machine (the last one started here, by ``ray start --head`` or
  another program's ``ray.init()``, if its processes still run): join it.
* Otherwise start a local Ray whose every socket is on 127.0.0.1, with no dashboard and quiet
  logs. Left alone, Ray names its node by the machine's external address; reap asks for the
  loopback address explicitly.

Two Ray defaults are switched off while reap starts or joins a Ray on this machine, unless the
user set them: under ``uv run``, Ray would copy the working directory and build a fresh virtual
environment for every job's workers (``RAY_ENABLE_UV_RUN_RUNTIME_ENV``); and it would turn
127.0.0.1 back into the external address (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, which also
decides that).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time

import ray

LOOPBACK = "127.0.0.1"
#: What one collector (or replay-buffer) actor asks for unless ``remote_configs`` says otherwise.
DEFAULT_REMOTE_CONFIG = {"num_cpus": 1, "num_gpus": 0, "memory": 2 * 1024**3}
#: Options of the local Ray reap starts when there is none to join.
LOCAL_RAY_CONFIG = {"include_dashboard": False, "logging_level": logging.ERROR}

_UV_HOOK = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"
_CLUSTER_IP = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

#: The Ray this process started through reap (``ray.shutdown`` may only stop that one).
_started_by_reap = False


class RayStartError(RuntimeError):
    """Ray could not be started or joined, or an actor could not be placed."""


def started_by_reap() -> bool:
    """True while the Ray this process is connected to was started by :func:`ensure_ray`."""
    return _started_by_reap and ray.is_initialized()


@contextlib.contextmanager
def _on_this_machine():
    """Ray's ``uv run`` hook off and the loopback address kept, unless the user chose otherwise."""
    from ray._private import ray_constants

    saved = {}
    if _UV_HOOK not in os.environ:
        saved["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV
        ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False
    if _CLUSTER_IP not in os.environ:
        saved["ENABLE_RAY_CLUSTER"] = ray_constants.ENABLE_RAY_CLUSTER
        ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(ray_constants, name, value)


def _is_local_address(address) -> bool:
    if address in (None, "auto", "local"):
        return True
    host = str(address).removeprefix("ray://").rsplit(":", 1)[0]
    return host in (LOOPBACK, "localhost")


def _running_local_cluster() -> str | None:
    """The address of the Ray last started on this machine, if its GCS process is still running."""
    from ray._private import services

    recorded = services.find_bootstrap_address(None)
    if recorded and recorded in set(services.find_gcs_addresses()):
        return recorded
    return None


def ensure_ray(ray_init_config: dict | None = None) -> bool:
    """Connect this process to Ray (see the module docstring); True if this call started it.

    ``ray_init_config`` without an ``"address"`` (and no ``RAY_ADDRESS``) starts a new local
    Ray with those options, on 127.0.0.1 and without a dashboard unless they say otherwise.
    """
    global _started_by_reap
    if ray.is_initialized():
        return False
    if ray_init_config is not None:
        if not isinstance(ray_init_config, dict):
            raise TypeError(f"ray_init_config must be a dict of ray.init() arguments, got {ray_init_config!r}")
        config = dict(ray_init_config)
        address = config.get("address", os.environ.get("RAY_ADDRESS") or None)
        start = address is None or address == "local"
        if start:  # a new Ray: loopback, no dashboard, quiet
            config["address"] = "local"
            config.setdefault("_node_ip_address", LOOPBACK)
            for key, value in LOCAL_RAY_CONFIG.items():
                config.setdefault(key, value)
        with _on_this_machine() if _is_local_address(address) else contextlib.nullcontext():
            ray.init(**config)
        _started_by_reap = _started_by_reap or start
        return start
    address = os.environ.get("RAY_ADDRESS") or _running_local_cluster()
    if address:
        with _on_this_machine() if _is_local_address(address) else contextlib.nullcontext():
            ray.init(address=address, logging_level=logging.ERROR)
        return False
    with _on_this_machine():
        ray.init(address="local", _node_ip_address=LOOPBACK, **LOCAL_RAY_CONFIG)
    _started_by_reap = True
    return True


def shutdown_ray_if_ours() -> bool:
    """``ray.shutdown()`` if reap started this Ray; never stops a Ray it merely joined."""
    global _started_by_reap
    if not started_by_reap():
        return False
    ray.shutdown()
    _started_by_reap = False
    return True


def remote_config(config: dict | None, owner: str, name: str = "remote_configs") -> dict:
    """``DEFAULT_REMOTE_CONFIG`` updated with ``config`` (checked: a dict of actor options)."""
    if config is None:
        return dict(DEFAULT_REMOTE_CONFIG)
    if not isinstance(config, dict):
        raise TypeError(f"{owner}: {name} must be a dict of Ray actor options (num_cpus=, ...), got {config!r}")
    return {**DEFAULT_REMOTE_CONFIG, **config}


def asked_resources(config: dict) -> dict:
    """The resources an actor with these options asks for, in ``ray.cluster_resources()`` units."""
    asked = {"CPU": config.get("num_cpus", 1), "GPU": config.get("num_gpus", 0),
             "memory": config.get("memory", 0), **(config.get("resources") or {})}
    return {k: v for k, v in asked.items() if v}


def wait_ready(refs: list, configs: list[dict], timeout: float, owner: str) -> None:
    """Wait until the actors' ``ready()`` replies are in (or failed) within ``timeout`` s, or a clear error.

    An actor still pending after ``timeout`` is almost always one whose resources no node
    has free: the error names what it asked for and what the cluster has.
    """
    deadline = time.monotonic() + timeout
    pending = list(refs)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            idx = refs.index(pending[0])
            asked = asked_resources(configs[idx])
            raise RayStartError(
                f"{owner}: actor {idx} was not ready after {timeout:.0f} s: it asks for {_fmt(asked)} "
                f"but the cluster has {_fmt(ray.cluster_resources())} in all and "
                f"{_fmt(ray.available_resources())} free. Lower remote_configs (num_cpus=, memory=, "
                "num_gpus=, resources=), add nodes, or raise actor_start_timeout if the cluster is only slow."
            )
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=min(left, 1.0))


def _fmt(resources: dict) -> str:
    def value(k, v):
        if k in ("memory", "object_store_memory"):
            return f"{v / 2**30:.2f} GiB"
        return f"{v:g}"

    shown = {k: value(k, v) for k, v in sorted(resources.items()) if not k.startswith("node:")}
    return "{" + ", ".join(f"{k}: {v}" for k, v in shown.items()) + "}"


def kill_actors(actors, timeout: float = 10.0) -> None:
    """``ray.kill`` each actor and wait (at most ``timeout`` s) until Ray reports them dead."""
    actors = [a for a in actors if a is not None]
    if not actors or not ray.is_initialized():
        return
    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)
    ids = {a._actor_id.hex() for a in actors}
    deadline = time.monotonic() + timeout
    while ids and time.monotonic() < deadline:
        ids &= alive_actor_ids()
        if ids:
            time.sleep(0.05)


def alive_actor_ids(class_names: tuple[str, ...] | None = None, this_job: bool = False) -> set[str]:
    """Ids of the actors Ray does not report dead (optionally only of some classes, or of this driver)."""
    from ray._private import state

    job = ray.get_runtime_context().get_job_id() if this_job else None
    out = set()
    for actor_id, info in state.actors().items():
        if info.get("State") == "DEAD" or (job is not None and info.get("JobID") != job):
            continue
        if class_names is not None and info.get("ActorClassName", "").rsplit(".", 1)[-1] not in class_names:
            continue
        out.add(actor_id)
    return out
