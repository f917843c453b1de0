"""TorchRL's remote-collector arguments (``RayCollector``, ``RPCCollector``,
``DistributedCollector``): checked, split per collector, and turned into each worker
collector's keyword arguments, before any worker starts. The driver they share with every other
backend is :class:`~reap.collectors.driver.CollectorDriver`.
"""

from __future__ import annotations

import inspect

from reap.collectors.arguments import check_collector_kwargs, check_int, check_torchrl_kwargs
from reap.collectors.base import check_frames
from reap.collectors.collector import Collector
from reap.collectors.worker import per_collector
from reap.envs.base import EnvBase

#: The device arguments a remote collector takes as one value or one per collector.
DEVICES = ("device", "storing_device", "env_device", "policy_device")


def check_remote_arguments(*, frames_per_batch, total_frames, sync, num_workers_per_collector,
                           max_weight_update_interval, policy, policy_factory, postproc, owner: str) -> None:
    """The checks every remote collector makes on TorchRL's common arguments, with messages that
    name the argument and the fix.

    Examples:
        >>> check_remote_arguments(frames_per_batch=8, total_frames=-1, sync=False, num_workers_per_collector=1,
        ...                        max_weight_update_interval=-2, policy=None, policy_factory=None,
        ...                        postproc=None, owner="MyCollector")
        Traceback (most recent call last):
        ...
        ValueError: MyCollector: max_weight_update_interval must be -1 (no forced update) or a non-negative int, got -2
    """
    if not isinstance(sync, bool):
        raise TypeError(f"{owner}: sync must be True or False, got {sync!r}")
    check_frames(frames_per_batch, total_frames, owner)
    check_int(num_workers_per_collector, "num_workers_per_collector", owner, allow_none=False)
    if isinstance(max_weight_update_interval, bool) or not isinstance(max_weight_update_interval, int) or (
            max_weight_update_interval < -1):
        raise ValueError(f"{owner}: max_weight_update_interval must be -1 (no forced update) or a non-negative "
                         f"int, got {max_weight_update_interval!r}")
    if policy is not None and policy_factory is not None:
        raise ValueError(f"{owner}: pass policy or policy_factory, not both")
    for factory in policy_factory if isinstance(policy_factory, list) else [policy_factory]:
        if factory is not None and not callable(factory):
            raise TypeError(f"{owner}: policy_factory must be callable, got {factory!r}")
    if postproc is not None and not callable(postproc):
        raise TypeError(f"{owner}: postproc must be callable, got {postproc!r}")


def split_per_collector(per_collector_args: dict, *, num_collectors: int | None, num_workers: int | None,
                        frames_per_batch: int, sync: bool, owner: str) -> tuple[int, dict]:
    """How many remote collectors there are, and each per-collector argument as a list of them.

    ``num_collectors`` (TorchRL's tutorial) or ``num_workers`` (``Collector(backend=...,
    num_workers=K)``) gives the number; else the lists' common length (1 without lists).

    Examples:
        >>> from reap import GymEnv
        >>> n, lists = split_per_collector({"create_env_fn": [GymEnv] * 2, "collector_kwargs": None},
        ...                                num_collectors=None, num_workers=None, frames_per_batch=8,
        ...                                sync=True, owner="MyCollector")
        >>> n, lists["collector_kwargs"]
        (2, [None, None])
    """
    if num_workers is not None:
        if num_collectors is not None and num_collectors != num_workers:
            raise ValueError(f"{owner}: num_workers={num_workers} and num_collectors={num_collectors} differ")
        num_collectors = num_workers
    check_int(num_collectors, "num_collectors", owner)
    lengths = {name: len(v) for name, v in per_collector_args.items() if isinstance(v, list)}
    if num_collectors is None:
        if len(set(lengths.values())) > 1:
            raise ValueError(f"{owner}: per-collector lists of different lengths: {lengths}")
        num_collectors = next(iter(lengths.values()), 1)
    n = num_collectors
    if n == 0:
        raise ValueError(f"{owner}: create_env_fn is an empty list; pass one env constructor per collector")
    lists = {name: per_collector(v, n, name, owner) for name, v in per_collector_args.items()}
    for fn in lists["create_env_fn"]:
        if not (isinstance(fn, EnvBase) or callable(fn)):
            raise TypeError(f"{owner}: create_env_fn must be an env or a callable returning one, got {fn!r}")
    for kw in lists.get("collector_kwargs", ()):
        if kw is not None and not isinstance(kw, dict):
            raise TypeError(f"{owner}: collector_kwargs must be a dict (or a list of dicts), got {kw!r}")
    if sync and frames_per_batch % n:
        raise ValueError(f"{owner}: sync=True splits frames_per_batch={frames_per_batch} evenly across {n} "
                         f"collectors; pass a multiple of {n}")
    return n, lists


def check_collector_options(options: dict, collector_class, owner: str) -> None:
    """Refuse on the driver, before any worker starts, the options the workers' reap
    ``Collector`` (or a subclass) would refuse once started: an unknown name, a TorchRL feature
    reap lacks, a value it refuses (:func:`~reap.collectors.arguments.check_collector_kwargs`).

    Examples:
        >>> check_collector_options({"split_trajs": True, "trust_policy": True}, Collector, "X")
        >>> check_collector_options({"split_traj": True}, Collector, "X")
        Traceback (most recent call last):
        ...
        TypeError: X: unexpected keyword argument 'split_traj'
        >>> check_collector_options({"max_frames_per_traj": 0}, Collector, "X")
        Traceback (most recent call last):
        ...
        ValueError: X: max_frames_per_traj must be a positive int or None, got 0
    """
    if collector_class is Collector:
        own = inspect.signature(Collector.__init__).parameters
        check_torchrl_kwargs({k: v for k, v in options.items() if k not in own}, owner)
    if isinstance(collector_class, type) and issubclass(collector_class, Collector):
        check_collector_kwargs(options, owner)


def remote_collector_kwargs(common: dict, *, create_env_fn, collector_class, num_envs: int = 1,
                            devices: dict | None = None, collector_kwargs: dict | None = None,
                            policy_factory=None, worker_tags: bool = False, owner: str) -> dict:
    """The keyword arguments of one remote collector: ``common`` (frames, options), its devices
    (those not None), its ``collector_kwargs``, its env constructor (``num_envs`` of them for a
    multi-process ``collector_class`` or several envs), ``total_frames=-1`` and its ``policy_factory``.
    With ``worker_tags``, a multi-process ``collector_class`` keeps its own workers' tags too.

    Examples:
        >>> from reap import GymEnv
        >>> remote_collector_kwargs({"frames_per_batch": 8}, create_env_fn=GymEnv, collector_class=Collector,
        ...                         devices={"device": None}, collector_kwargs={"split_trajs": True}, owner="X")
        {'frames_per_batch': 8, 'split_trajs': True, 'create_env_fn': <class 'reap.envs.gym.GymEnv'>, 'total_frames': -1}
    """
    kwargs = dict(common)
    kwargs.update({name: value for name, value in (devices or {}).items() if value is not None})
    kwargs.update(collector_kwargs or {})
    check_collector_options(kwargs, collector_class, owner)
    if num_envs > 1 or not issubclass(collector_class, Collector):
        if isinstance(create_env_fn, EnvBase):
            raise TypeError(f"{owner}: with num_workers_per_collector > 1 or a multi-process collector_class, "
                            "create_env_fn must be callables, not env instances")
        create_env_fn = [create_env_fn] * num_envs
    kwargs["create_env_fn"] = create_env_fn
    if worker_tags and not issubclass(collector_class, Collector):
        kwargs.setdefault("worker_tags", True)
    kwargs["total_frames"] = -1  # the driver counts the frames; a worker collects until it is stopped
    if policy_factory is not None:
        kwargs["policy_factory"] = policy_factory
    return kwargs


__all__ = ["DEVICES", "check_collector_options", "check_remote_arguments", "remote_collector_kwargs",
           "split_per_collector"]
