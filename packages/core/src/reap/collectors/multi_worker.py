"""``MultiWorkerCollector``: TorchRL's ``MultiSyncCollector``/``MultiAsyncCollector`` arguments on
the shared driver, for backends whose workers each run a reap ``Collector`` (reap-collectors-mp's
processes, reap-threads' threads).

The arguments are checked and split per worker here (:mod:`reap.collectors.arguments`), with
the same messages whatever the backend: ``frames_per_batch`` is the total of one batch split
across the workers (sync) or each worker's batch (async), ``cat_results`` says how a sync batch
combines them, and ``update_at_each_batch`` pushes the central policy before each batch (sync)
or to the worker that delivered (async). Worker ``i`` runs a reap ``Collector`` built by
:func:`build_worker` from :meth:`MultiWorkerCollector._worker_spec`; a backend adds its
transport (see :class:`~reap.collectors.driver.CollectorDriver`) and its scheme.

Layout (TorchRL's): a worker with an env of batch ``[*env_batch]`` yields ``[*env_batch, T]``;
sync batches stack them (``cat_results="stack"``: ``[n_workers, *env_batch, T]``) or concatenate
them (``"cat"``/``0``, or ``-1`` along time); async batches are one worker's. Their keys are
TorchRL's; ``worker_tags=True`` (reap's) keeps each frame's worker in ``("collector",
"worker_id")`` and the weights that made it in ``("collector", "policy_version")``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from tensordict.nn import InteractionType

from reap.collectors.arguments import (
    MAX_RESTARTS,
    START_TIMEOUT,
    WORKER_TIMEOUT,
    check_int,
    check_postproc_and_buffer,
    check_torchrl_kwargs,
    checked_cat_results,
    checked_device,
    checked_exploration_type,
    checked_failure_options,
    checked_init_random_frames,
    checked_seconds,
    checked_total_frames,
    env_constructors,
    frames_per_worker,
    per_worker,
    policy_factories,
)
from reap.collectors.collector import Collector
from reap.collectors.driver import CollectorDriver
from reap.collectors.interruptor import checked_preemptive_threshold
from reap.collectors.multi import MultiCollector
from reap.collectors.traj_batches import checked_traj_options
from reap.collectors.worker import CollectorWorker


class ReplicatedEnv:
    """Picklable ``create_env_fn`` building ``copies`` envs batched in one worker
    (``num_workers_per_collector``).

    Examples:
        >>> from reap import GymEnv
        >>> ReplicatedEnv(lambda: GymEnv("CartPole-v1"), 2)().batch_size
        torch.Size([2])
    """

    def __init__(self, create_env_fn, copies: int, create_env_kwargs=None):
        self.create_env_fn = create_env_fn
        self.copies = copies
        self.create_env_kwargs = create_env_kwargs

    def __call__(self):
        from reap.envs import SerialEnv

        return SerialEnv(self.copies, self.create_env_fn, create_env_kwargs=self.create_env_kwargs)


class MultiWorkerCollector(CollectorDriver):
    """The arguments and layout of TorchRL's multi-worker collectors on the shared driver; a
    backend adds its transport, its default weight-sync scheme and what else it takes.

    Subclasses set ``_sync``, implement the transport, and may override
    :meth:`_transport_options` (the keyword arguments only they take), :meth:`_scheme` and
    :meth:`_updater`.
    """

    _sync = True
    #: the sync collector's name, named in errors of the async one
    _sync_name = "MultiSyncCollector"

    def __init__(
        self,
        create_env_fn: Sequence[Callable] | Callable,
        policy=None,
        *,
        num_workers: int | None = None,
        policy_factory: Callable | Sequence[Callable] | None = None,
        frames_per_batch: int | Sequence[int],
        total_frames: int | None = -1,
        device=None,
        storing_device=None,
        env_device=None,
        policy_device=None,
        create_env_kwargs: dict | Sequence[dict] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable | None = None,
        split_trajs: bool | None = None,
        exploration_type=InteractionType.RANDOM,
        update_at_each_batch: bool = False,
        set_truncated: bool = False,
        cat_results: str | int | None = None,
        replay_buffer=None,
        extend_buffer: bool = True,
        weight_updater=None,
        weight_sync_schemes=None,
        num_workers_per_collector: int = 1,
        track_traj_ids: bool = True,
        worker_idx: int | None = None,
        worker_timeout: float = WORKER_TIMEOUT,
        start_timeout: float = START_TIMEOUT,
        on_worker_failure: str = "raise",
        max_restarts: int = MAX_RESTARTS,
        sync: bool | None = None,
        backend: str | None = None,
        pre_collect_hook: Callable[[], None] | None = None,
        post_collect_hook: Callable | None = None,
        track_policy_version: bool = False,
        trajs_per_batch: int | None = None,
        trajs_per_write: int | None = None,
        traj_format: str | None = None,
        auto_register_policy_transforms: bool | None = None,
        preemptive_threshold: float | None = None,
        compact_obs: bool = False,
        worker_tags: bool = False,
        **options,
    ):
        owner = type(self).__name__
        check_torchrl_kwargs(self._transport_options(options, owner), owner)
        fns = env_constructors(create_env_fn, num_workers, owner)
        n = len(fns)
        check_int(num_workers_per_collector, "num_workers_per_collector", owner, allow_none=False)
        env_kwargs = per_worker(create_env_kwargs, n, "create_env_kwargs", owner)
        if num_workers_per_collector > 1:
            fns = [ReplicatedEnv(fn, num_workers_per_collector, kw) for fn, kw in zip(fns, env_kwargs)]
            env_kwargs = [None] * n
        factories = policy_factories(policy, policy_factory, n, owner, allow_both=True)
        requested = frames_per_worker(frames_per_batch, n, owner, sync=self._sync)
        self.requested_frames_per_batch = frames_per_batch
        check_int(max_frames_per_traj, "max_frames_per_traj", owner)
        init_random_frames = checked_init_random_frames(init_random_frames, owner)  # TorchRL's -1: none
        self.init_random_frames = init_random_frames
        cat_results = checked_cat_results(cat_results, owner, sync_name=None if self._sync else self._sync_name)
        checked_failure_options(on_worker_failure, max_restarts, owner)
        check_postproc_and_buffer(postproc, replay_buffer, owner)
        trajs = checked_traj_options(  # trajs_per_batch: the driver regroups the workers' batches
            trajs_per_batch, trajs_per_write, traj_format, owner, replay_buffer=replay_buffer,
            split_trajs=split_trajs, track_traj_ids=track_traj_ids, reset_at_each_iter=reset_at_each_iter)
        checked_exploration_type(exploration_type, owner)  # else only the workers' Collector would refuse it
        preemptive_threshold = checked_preemptive_threshold(preemptive_threshold, owner, sync=self._sync)
        if preemptive_threshold < 1.0 and not track_traj_ids:
            raise ValueError(f"{owner}: preemptive_threshold={preemptive_threshold} marks the steps a stopped worker "
                             "did not collect with traj id -1; it needs track_traj_ids=True")
        for dev in env_device if isinstance(env_device, (list, tuple)) else [env_device]:
            checked_device("env_device", dev, owner)
        devices = per_worker(device, n, "device", owner)  # TorchRL: one device, or one per worker
        storing = per_worker(storing_device, n, "storing_device", owner)[0]
        storing = checked_device("storing_device", storing if storing is not None else devices[0], owner)
        policy_devices = [checked_device("policy_device", p if p is not None else d, owner)
                          for p, d in zip(per_worker(policy_device, n, "policy_device", owner), devices)]
        self.policy = policy
        self._random_batches = math.ceil(init_random_frames / sum(requested))
        self._worker_kwargs = [{
            "create_env_fn": fns[i], "policy": policy if factories[i] is None else None,
            "policy_factory": factories[i], "frames_per_batch": requested[i], "create_env_kwargs": env_kwargs[i],
            "max_frames_per_traj": max_frames_per_traj, "reset_at_each_iter": reset_at_each_iter,
            "exploration_type": exploration_type, "track_traj_ids": track_traj_ids,
            "policy_device": policy_devices[i], "set_truncated": set_truncated,
            "auto_register_policy_transforms": auto_register_policy_transforms, "compact_obs": compact_obs,
        } for i in range(n)]
        self._init_driver(n, sync=self._sync, frames_per_batch=sum(requested) if self._sync else requested[0],
                          total_frames=checked_total_frames(total_frames, owner),
                          scheme=self._scheme(weight_sync_schemes, policy_devices, owner), worker_frames=requested,
                          worker_timeout=checked_seconds(worker_timeout, "worker_timeout", owner),
                          start_timeout=checked_seconds(start_timeout, "start_timeout", owner),
                          max_restarts=max_restarts, on_worker_failure=on_worker_failure, postproc=postproc,
                          split_trajs=split_trajs, storing_device=storing, replay_buffer=replay_buffer,
                          extend_buffer=extend_buffer, cat_results=cat_results,
                          update_at_each_batch=update_at_each_batch, pre_collect_hook=pre_collect_hook,
                          post_collect_hook=post_collect_hook, track_policy_version=track_policy_version,
                          preemptive_threshold=preemptive_threshold, worker_tags=worker_tags)
        self._trajs = trajs
        self.weight_updater = self._updater(weight_updater, owner)
        self._start_transport()
        self._start_workers()
        # the workers' own batch sizes (a Collector rounds frames_per_batch to its envs)
        self.frames_per_batch = sum(self._worker_frames) if self._sync else self._worker_frames[0]
        if self.weight_updater is not None:
            self.weight_updater.register_collector(self)

    # ---- what a backend adds ---------------------------------------------------------------
    def _transport_options(self, options: dict, owner: str) -> dict:
        """Take the keyword arguments only this backend has out of ``options``; return the rest
        (TorchRL's, checked by ``check_torchrl_kwargs``)."""
        return options

    def _scheme(self, weight_sync_schemes, policy_devices: list, owner: str):
        """The weight-sync scheme for ``weight_sync_schemes`` (its resolver and default)."""
        raise NotImplementedError

    def _updater(self, weight_updater, owner: str):
        """The TorchRL weight updater for ``weight_updater=`` (None: pushes go straight through)."""
        if weight_updater is not None:
            raise TypeError(f"{owner}: takes no weight_updater; push with update_policy_weights_()")
        return None

    def _start_transport(self) -> None:
        """Set up what the workers' transport needs before the first starts."""

    def _worker_spec(self, idx: int) -> dict:
        """What worker ``idx`` is built from (:func:`build_worker`'s arguments), taken at each
        start: its ``Collector`` arguments, its random first batches, its block of trajectory
        ids and the plugin options set so far."""
        return {"idx": idx, "kwargs": self._worker_kwargs[idx], "random_batches": self._random_batches,
                "traj_id_offset": self._traj_id_offset(), "plugin_options": self._worker_plugin_options(idx),
                "interruptor": self.interruptor}


def build_worker(idx: int, kwargs: dict, random_batches: int = 0, interruptor=None, **options) -> CollectorWorker:
    """A ``MultiWorkerCollector``'s worker ``idx``, built where it runs (its process or thread):
    a reap ``Collector(**kwargs)`` whose first ``random_batches`` batches take random actions and
    whose rollouts end early once ``interruptor`` (the driver's, for ``preemptive_threshold``)
    says stop; ``options`` go to :meth:`CollectorWorker.build`.

    Examples:
        >>> from reap import GymEnv
        >>> worker = build_worker(0, {"create_env_fn": lambda: GymEnv("CartPole-v1"), "frames_per_batch": 4},
        ...                       random_batches=1)
        >>> worker.collector.init_random_frames
        4
        >>> worker.close()
    """
    if interruptor is not None:
        kwargs = {**kwargs, "interruptor": interruptor}
    worker = CollectorWorker.build(idx, Collector, kwargs, **options)
    worker.collector.init_random_frames = random_batches * worker.collector.frames_per_batch
    return worker


MultiCollector.register(MultiWorkerCollector)  # isinstance(MultiSyncCollector(...), MultiCollector), as TorchRL

__all__ = ["MultiWorkerCollector", "ReplicatedEnv", "build_worker"]
