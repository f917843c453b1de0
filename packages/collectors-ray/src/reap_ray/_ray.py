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

``ray.init`` installs its own SIGTERM handler in the driver (one that exits at once, so a
program's own clean stop never runs): :func:`ensure_ray` puts the handlers of SIGINT and SIGTERM
back as they were before it.

Two Ray defaults are switched off while reap starts or joins a Ray on this machine, unless the
user set them: under ``uv run``, Ray would copy the working directory and build a fresh virtual
environment for every job's workers (``RAY_ENABLE_UV_RUN_RUNTIME_ENV``); and it would turn
127.0.0.1 back into the external address (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``, which also
decides that).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time

import ray

from reap.collectors.spawn import drop_unreadable_lazy_legacy

LOOPBACK = "127.0.0.1"
#: What one collector (or replay-buffer) actor asks for unless ``remote_configs`` says otherwise.
DEFAULT_REMOTE_CONFIG = {"num_cpus": 1, "num_gpus": 0, "memory": 2 * 1024**3}
#: Options of the local Ray reap starts when there is none to join.
LOCAL_RAY_CONFIG = {"include_dashboard": False, "logging_level": logging.ERROR}
#: TorchRL's ``DEFAULT_RAY_INIT_CONFIG`` (``torchrl.collectors.distributed.ray``), reap's way: ``ray.init``
#: options that start a local Ray on 127.0.0.1, without a dashboard, quiet. As ``ray_init_config``
#: (or given to ``ray.init`` directly) it starts one; to join a cluster, pass its ``address`` instead.
DEFAULT_RAY_INIT_CONFIG = {"address": None, "num_cpus": None, "num_gpus": None, "_node_ip_address": LOOPBACK,
                           **LOCAL_RAY_CONFIG}

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


@contextlib.contextmanager
def _keeping_signal_handlers():
    """The SIGINT and SIGTERM handlers as they were before the block (``ray.init`` replaces SIGTERM's)."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread sets handlers
        yield
        return
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            if handler is not None:  # None: set outside Python, and Python cannot set it again
                signal.signal(signum, handler)


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


def _ray_init(local: bool, **kwargs) -> None:
    """``ray.init(**kwargs)`` keeping the signal handlers (and, for a Ray on this machine, its address)."""
    drop_unreadable_lazy_legacy()  # Ray's workers inherit this environment
    with _keeping_signal_handlers(), _on_this_machine() if local else contextlib.nullcontext():
        ray.init(**kwargs)


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
        _ray_init(_is_local_address(address), **config)
        _started_by_reap = _started_by_reap or start
        return start
    address = os.environ.get("RAY_ADDRESS") or _running_local_cluster()
    if address:
        _ray_init(_is_local_address(address), address=address, logging_level=logging.ERROR)
        return False
    _ray_init(True, address="local", _node_ip_address=LOOPBACK, **LOCAL_RAY_CONFIG)
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


def _short_of(have: dict, asked: dict) -> dict:
    """What of ``asked`` exceeds ``have`` (resource: amount asked)."""
    return {k: v for k, v in asked.items() if v > have.get(k, 0) + 1e-9}


def check_placeable(configs: list[dict], owner: str, held: list[dict] = (), first: int = 0) -> None:
    """Refuse at once actors (``configs``: their options; the first is actor ``first``) this
    cluster can never place.

    Each must fit on one node, and together with ``held`` (actors of the caller's that keep
    their resources meanwhile) they must fit in the cluster's total. Resources that exist but are in use are not checked:
    :func:`wait_ready`'s timeout covers them.

    Examples:
        >>> _short_of({"CPU": 2.0, "memory": 8e9}, {"CPU": 3, "memory": 4e9})
        {'CPU': 3}
    """
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    for idx, config in enumerate(configs):
        asked = asked_resources(config)
        if nodes and not any(not _short_of(node, asked) for node in nodes):
            shown = ", ".join(_fmt(node) for node in nodes[:4]) + (", ..." if len(nodes) > 4 else "")
            raise RayStartError(
                f"{owner}: actor {first + idx} asks for {_fmt(asked)} but no node of the cluster has "
                f"that much (its {len(nodes)} node(s): {shown}). Lower remote_configs (num_cpus=, memory=, "
                "num_gpus=, resources=), or add a node that has it; for a Ray that reap starts, "
                "ray_init_config={'num_cpus': ..., 'resources': {...}} sets what its node offers.")
    asked = [asked_resources(c) for c in [*held, *configs]]
    total = {k: sum(a.get(k, 0) for a in asked) for k in set().union(*asked)}
    cluster = ray.cluster_resources()
    if _short_of(cluster, total):
        each = {_fmt(a) for a in asked}
        fits = ""
        if len(each) == 1:  # one size of actor: say how many fit
            one = asked[0]
            fits = f"; at most {min(math.floor(cluster.get(k, 0) / v + 1e-9) for k, v in one.items())} fit"
        raise RayStartError(
            f"{owner}: {len(asked)} actors ask for {_fmt(total)} in all (each {' or '.join(sorted(each))}) "
            f"but the cluster has {_fmt(cluster)} in all{fits}. Start fewer collectors, lower "
            "remote_configs (e.g. remote_configs={'num_cpus': 0.5}: Ray's CPUs are a count for "
            "placement, not a limit), or give the cluster more; for a Ray that reap starts, "
            "ray_init_config={'num_cpus': ...} sets what it offers.")


def wait_ready(refs: list, configs: list[dict], timeout: float, owner: str, first: int = 0) -> None:
    """Wait until the actors' ``ready()`` replies are in (or failed) within ``timeout`` s, or a clear error.

    :func:`check_placeable` has refused what the cluster cannot ever place, so an actor still
    pending after ``timeout`` waits for resources that others hold (or for a slow start): the
    error names it (``first`` is the index of ``refs[0]``'s actor), what it asked for and what
    the cluster has, in all and free.
    """
    deadline = time.monotonic() + timeout
    pending = list(refs)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            k = refs.index(pending[0])
            asked = asked_resources(configs[k])
            free = ray.available_resources()
            if _short_of(free, asked):
                why = ("other actors or tasks hold what it needs. Let them finish, lower remote_configs "
                       "(num_cpus=, memory=, num_gpus=, resources=), add nodes, or raise start_timeout")
            else:  # placeable now: its process was slow to start, or died starting
                why = ("the cluster has room for it, so its worker process was slow to start or failed "
                       "to (its Ray worker log says which). On a loaded machine raise start_timeout")
            raise RayStartError(
                f"{owner}: actor {first + k} was not ready after {timeout:.0f} s: it asks for {_fmt(asked)} "
                f"and the cluster has {_fmt(ray.cluster_resources())} in all and {_fmt(free)} free: {why}."
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
