"""``RayCollector``: reap collectors in Ray actors, on one machine or a cluster.

Each remote collector is a Ray actor running a reap collector (``Collector``,
``MultiSyncCollector`` or ``MultiAsyncCollector``) one batch per request. The driver keeps one
request in flight per actor:

* ``sync=True`` yields every actor's batch stacked: ``[num_collectors, *actor_batch]`` with
  ``frames_per_batch // num_collectors`` frames per actor (TorchRL's layout).
* ``sync=False`` (the default, as TorchRL) yields each actor's batch as it arrives. Each actor
  starts its next rollout as soon as it has handed a batch back (as reap's
  ``MultiAsyncCollector`` double-buffers), so the next request finds it done or under way: see
  "Prefetching" below.

Weights cost one ``ray.put`` per update; the object ref travels with each actor's next collect
request, and the actor loads it before that rollout (never during one). With
``worker_tags=True`` (reap's), every batch records its weights in ``("collector",
"policy_version")`` and, with reap's ``Collector``, its actor in ``("collector", "worker_id")``.

Faults: an actor that raises, dies (killed, its process exited) or delivers nothing for
``worker_timeout`` seconds is a ``RayCollectorError`` naming it (with its traceback when it
raised), or with ``on_worker_failure="restart"`` is replaced (up to ``max_restarts`` times per
actor), gets the latest weights with its first request, and redoes the batch lost with it.
Every wait is bounded.

Iteration, prefetching, weights, deadlines and restarts are reap-core's
:class:`~reap.collectors.driver.CollectorDriver`, shared with every other backend: this module
adds the actors and object refs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from tensordict.nn import InteractionType

from reap.collectors.arguments import (
    MAX_RESTARTS,
    START_TIMEOUT,
    WORKER_TIMEOUT,
    check_int,
    checked_failure_options,
    checked_seconds,
    renamed,
)
from reap.collectors.base import BaseCollector
from reap.collectors.collector import Collector
from reap.collectors.driver import CollectorDriver, driver_options
from reap.collectors.remote import (
    DEVICES,
    check_collector_options,
    check_remote_arguments,
    remote_collector_kwargs,
    split_per_collector,
)
from reap.collectors.worker import per_collector as _listify
from reap.collectors.worker import resolve_collector_class, worker_seed
from reap.envs.base import EnvBase
from reap.errors import WorkerError
from reap.weight_update import WeightUpdaterBase, resolve_weight_sync_scheme
from reap_ray._actor import CollectorActor
from reap_ray._ray import (
    check_placeable,
    ensure_ray,
    kill_actors,
    remote_config,
    shutdown_ray_if_ours,
    wait_ready,
)
from reap_ray.batches import stack_batches, unpack_batch
from reap_ray.replay_buffer import RayReplayBuffer
from reap_ray.weight_sync import RayWeightSyncScheme, RayWeightUpdater


class RayCollectorError(WorkerError):
    """A remote collector failed; ``worker_idx`` is the actor's index."""

    def __init__(self, message: str, worker_idx: int, **details):
        super().__init__(message, worker_idx=worker_idx, **details)


#: Actor ``idx``'s seed for ``set_seed(seed)`` (after ``restarts`` restarts): reap-core's worker seed.
actor_seed = worker_seed


class RayCollector(CollectorDriver):
    """Collect with reap collectors running as Ray actors (TorchRL's ``RayCollector`` API).

    Arguments follow TorchRL's ``RayCollector``: ``create_env_fn`` (a callable, an env or a
    list with one per collector), ``policy`` or ``policy_factory``, ``frames_per_batch``,
    ``total_frames``, the devices (scalar or one per collector), ``max_frames_per_traj``,
    ``init_random_frames``, ``reset_at_each_iter``, ``postproc`` and ``split_trajs`` (applied on
    the driver, as TorchRL's), ``exploration_type``, ``collector_class`` (reap's ``Collector``,
    ``MultiSyncCollector``, ``MultiAsyncCollector``, a subclass, or ``"single"``/``"sync"``/``"async"``),
    ``collector_kwargs`` (dict or one per collector), ``num_workers_per_collector`` (envs, or
    worker processes, per actor), ``num_collectors`` (else inferred from list lengths),
    ``sync`` (default False), ``ray_init_config``, ``remote_configs`` (Ray actor options,
    dict or one per collector; default ``num_cpus=1``, no GPU, 2 GiB), ``update_after_each_batch``,
    ``max_weight_update_interval`` (an actor never collects more than ``k`` batches after its
    last weights update once the central policy may have changed: it is sent the central
    policy's weights when due), ``replay_buffer`` (a :class:`RayReplayBuffer`: actors write
    into it, the iterator yields ``None``), ``weight_sync_schemes`` (``{"policy":
    RayWeightSyncScheme()}``), ``use_env_creator`` (accepted; reap needs no env creator).

    reap adds, keyword-only, what every reap backend takes: ``worker_timeout`` (seconds an actor
    may go without delivering a batch or answering, default 120), ``start_timeout`` (seconds to
    place and build the actors, default 120), ``on_worker_failure`` (``"raise"``, or ``"restart"``
    a failed actor) and ``max_restarts`` (per actor, default 3); ``actor_timeout`` and
    ``actor_start_timeout`` are their former, deprecated names. And ``max_writes_in_flight``
    (writes each actor may have outstanding to the replay buffer).

    The actors live until ``shutdown()``, the ``with`` block's end, garbage collection or
    interpreter exit; finishing an iteration leaves them running.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from reap import GymEnv, RayCollector
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> with RayCollector(lambda: GymEnv("Pendulum-v1", num_envs=4), policy, num_collectors=2,
        ...                   frames_per_batch=64, total_frames=128, sync=True) as collector:
        ...     for batch in collector:
        ...         print(batch.batch_size)  # [2 actors, 4 envs, 8 steps]
        ...         collector.update_policy_weights_(policy)
        torch.Size([2, 4, 8])
        torch.Size([2, 4, 8])
    """

    worker_label = "collector actor"
    error_class = RayCollectorError
    _state_as_list = True

    def __init__(
        self,
        create_env_fn: Callable | EnvBase | list,
        policy=None,
        *,
        policy_factory: Callable | list | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        device=None,
        storing_device=None,
        env_device=None,
        policy_device=None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable | None = None,
        split_trajs: bool = False,
        exploration_type=InteractionType.RANDOM,
        collector_class=Collector,
        collector_kwargs: dict | list | None = None,
        num_workers_per_collector: int = 1,
        sync: bool = False,
        ray_init_config: dict | None = None,
        remote_configs: dict | list | None = None,
        num_collectors: int | None = None,
        update_after_each_batch: bool = False,
        max_weight_update_interval: int = -1,
        replay_buffer: RayReplayBuffer | None = None,
        weight_updater=None,
        weight_sync_schemes: dict | None = None,
        use_env_creator: bool = False,
        worker_timeout: float = WORKER_TIMEOUT,
        start_timeout: float = START_TIMEOUT,
        max_restarts: int = MAX_RESTARTS,
        on_worker_failure: str = "raise",
        actor_timeout: float | None = None,
        actor_start_timeout: float | None = None,
        max_writes_in_flight: int = 2,
        backend: str | None = None,
        num_workers: int | None = None,
        **collector_options,
    ):
        owner = "RayCollector"
        check_remote_arguments(frames_per_batch=frames_per_batch, total_frames=total_frames, sync=sync,
                               num_workers_per_collector=num_workers_per_collector,
                               max_weight_update_interval=max_weight_update_interval, policy=policy,
                               policy_factory=policy_factory, postproc=postproc, owner=owner)
        worker_timeout = renamed("actor_timeout", actor_timeout, "worker_timeout", worker_timeout, WORKER_TIMEOUT, owner)
        start_timeout = renamed("actor_start_timeout", actor_start_timeout, "start_timeout", start_timeout,
                                START_TIMEOUT, owner)
        checked_failure_options(on_worker_failure, max_restarts, owner)
        check_int(max_writes_in_flight, "max_writes_in_flight", owner, allow_none=False)
        if replay_buffer is not None and not isinstance(replay_buffer, RayReplayBuffer):
            raise TypeError(
                f"{owner}: replay_buffer must be a RayReplayBuffer (a buffer living in a Ray actor that "
                f"every collector actor can write to), got {type(replay_buffer).__name__}"
            )
        self.collector_class = resolve_collector_class(collector_class, owner)
        scheme = resolve_weight_sync_scheme(weight_sync_schemes, owner, default=RayWeightSyncScheme,
                                            accepts=(RayWeightSyncScheme,))

        # ---- how many collectors, and each one's arguments --------------------------------
        n, lists = split_per_collector(
            {"create_env_fn": create_env_fn, "policy_factory": policy_factory, "collector_kwargs": collector_kwargs,
             "remote_configs": remote_configs, "device": device, "storing_device": storing_device,
             "env_device": env_device, "policy_device": policy_device},
            num_collectors=num_collectors, num_workers=num_workers, frames_per_batch=frames_per_batch, sync=sync,
            owner=owner)
        self._per_actor = frames_per_batch // n if sync else frames_per_batch
        self._init_driver(0, sync=sync, frames_per_batch=frames_per_batch, total_frames=total_frames, scheme=scheme,
                          worker_timeout=checked_seconds(worker_timeout, "worker_timeout", owner),
                          start_timeout=checked_seconds(start_timeout, "start_timeout", owner),
                          max_restarts=max_restarts, on_worker_failure=on_worker_failure, postproc=postproc,
                          split_trajs=split_trajs, replay_buffer=replay_buffer,
                          update_after_each_batch=update_after_each_batch,
                          max_weight_update_interval=max_weight_update_interval,
                          **driver_options(collector_options))
        self.policy = policy
        self.max_writes_in_flight = max_writes_in_flight
        self.use_env_creator = use_env_creator
        self._common = {
            "frames_per_batch": self._per_actor, "max_frames_per_traj": max_frames_per_traj,
            "init_random_frames": init_random_frames, "reset_at_each_iter": reset_at_each_iter,
            "exploration_type": exploration_type, **collector_options,
        }
        self.num_workers_per_collector = num_workers_per_collector
        for i, options in enumerate(lists["collector_kwargs"]):  # before Ray starts
            devices = {name: lists[name][i] for name in DEVICES if lists[name][i] is not None}
            check_collector_options({**self._common, **devices, **(options or {})}, self.collector_class, owner)

        # ---- weights, actors ---------------------------------------------------------------
        self._specs: list[dict] = []
        self._configs: list[dict] = []
        self._actors: list = []
        self.node_ids: list[str] = []
        self._refs: dict = {}  # ObjectRef of a collect request -> actor index
        self._ready_refs: dict = {}  # actor index -> ObjectRef of its ready() call
        self.weight_updater = self._resolve_updater(weight_updater, owner)
        self.started_ray = ensure_ray(ray_init_config)
        self._policy_ref = ray.put(policy) if policy is not None else None
        self.add_collectors(lists["create_env_fn"], num_workers_per_collector, policy_factory=lists["policy_factory"],
                            collector_kwargs=lists["collector_kwargs"], remote_configs=lists["remote_configs"],
                            devices={k: lists[k] for k in DEVICES})

    # ---- construction helpers ---------------------------------------------------------------
    def _resolve_updater(self, updater, owner):
        if updater is None:
            updater = RayWeightUpdater()
        elif isinstance(updater, type):
            updater = updater()
        if not isinstance(updater, RayWeightUpdater):
            if isinstance(updater, WeightUpdaterBase):
                raise TypeError(f"{owner}: weight_updater must be a RayWeightUpdater, got {type(updater).__name__}")
            raise TypeError(f"{owner}: weight_updater must be a RayWeightUpdater, got {updater!r}")
        updater.register_collector(self)
        return updater

    def add_collectors(self, create_env_fn, num_envs: int = 1, policy=None, collector_kwargs=None,
                       remote_configs=None, *, policy_factory=None, devices=None) -> None:
        """Start one more actor per ``create_env_fn`` entry (lists may give one value per actor).

        Without ``policy`` or ``policy_factory``, a new actor runs the central policy: the one
        given at construction, and its current weights once weights were pushed.
        """
        if self._actors:
            self._check_open()
        fns = create_env_fn if isinstance(create_env_fn, list) else [create_env_fn]
        k = len(fns)
        factories = _listify(policy_factory, k, "policy_factory", "add_collectors")
        kwargs_list = _listify(collector_kwargs, k, "collector_kwargs", "add_collectors")
        configs = [remote_config(c, "RayCollector") for c in _listify(remote_configs, k, "remote_configs", "add_collectors")]
        devices = {name: _listify(v, k, name, "add_collectors") for name, v in (devices or {}).items()}
        buffer = [] if self.replay_buffer is None else [self.replay_buffer.remote_config]
        check_placeable(configs, "RayCollector", held=self._configs + buffer, first=len(self._actors))
        policy_ref = self._policy_ref if policy is None else ray.put(policy)
        new_ids = []
        for j in range(k):
            spec = remote_collector_kwargs(
                self._common, create_env_fn=fns[j], collector_class=self.collector_class,
                num_envs=num_envs, devices={name: values[j] for name, values in devices.items()},
                collector_kwargs=kwargs_list[j], policy_factory=factories[j], worker_tags=self.worker_tags,
                owner="RayCollector")
            self._specs.append({"kwargs": spec, "policy": policy_ref if factories[j] is None else None})
            self._configs.append(configs[j])
            self._actors.append(None)
            self.node_ids.append("")
            new_ids.append(self._add_worker(self._per_actor))
        self._start_workers(new_ids)
        central = [i for i, factory in zip(new_ids, factories) if factory is None]
        if policy is None and central and self.policy is not None and self.policy_version > 0:
            # weights were pushed since the policy was shipped at construction: the new actors'
            # first requests carry the central policy's current weights (under a new version)
            self._push_weights(self.policy, central)

    # ---- the transport: actors and object refs ----------------------------------------------------
    def _launch_worker(self, idx: int) -> None:
        spec = self._specs[idx]
        cls = ray.remote(CollectorActor).options(max_restarts=0, max_concurrency=1, **self._configs[idx])
        rb = self.replay_buffer.actor if self.replay_buffer is not None else None
        self._actors[idx] = cls.remote(idx, self.collector_class, spec["kwargs"], spec["policy"], rb,
                                       self.max_writes_in_flight, self.worker_timeout,
                                       self._worker_plugin_options(idx), self._traj_id_offset(),
                                       self.worker_tags)
        self._ready_refs[idx] = self._actors[idx].ready.remote()

    def _await_worker(self, idx: int) -> dict:
        ref = self._ready_refs.pop(idx)
        wait_ready([ref], [self._configs[idx]], self.start_timeout, "RayCollector", first=idx)
        try:
            info = ray.get(ref, timeout=self.start_timeout)
        except (RayTaskError, RayActorError) as exc:
            raise RayCollectorError(f"RayCollector: collector actor {idx} failed to start: {exc}", idx) from None
        self.node_ids[idx] = info["node_id"]
        return info

    def _send_collect(self, idx: int, weights, version: int, prefetch: bool) -> None:
        self._refs[self._actors[idx].collect.remote(weights, version, prefetch)] = idx

    def _receive(self, timeout: float):
        ready, _ = ray.wait(list(self._refs), num_returns=1, timeout=timeout)
        if not ready:
            return None
        idx = self._refs.pop(ready[0])
        value = self._get(idx, ready[0], "collect()")
        if type(value) is tuple:  # ("error", text, traceback) from CollectorWorker.format_error
            raise RayCollectorError(f"RayCollector: {value[1]}\n\nTraceback from the actor:\n{value[2]}", idx,
                                    remote_traceback=value[2])
        return idx, value

    def _get(self, idx: int, ref, what: str):
        try:
            return ray.get(ref, timeout=self.worker_timeout)
        except GetTimeoutError:
            raise RayCollectorError(f"RayCollector: collector actor {idx} did not answer {what} within "
                                    f"{self.worker_timeout:g} s (worker_timeout)", idx) from None
        except RayTaskError as exc:
            raise RayCollectorError(f"RayCollector: collector actor {idx} raised: {exc}", idx) from None
        except RayActorError as exc:
            raise RayCollectorError(f"RayCollector: collector actor {idx} died: {exc}", idx) from None

    def _call(self, idx: int, method: str, args: tuple):
        return self._get(idx, getattr(self._actors[idx], method).remote(*args), f"{method}()")

    def _kill_worker(self, idx: int) -> None:
        self._refs = {ref: i for ref, i in self._refs.items() if i != idx}
        kill_actors([self._actors[idx]], timeout=0.0)

    def _close_workers(self, timeout: float) -> None:
        self._refs.clear()
        # an actor never placed (its start timed out) would not answer close(): only kill it
        live = [a for a, node in zip(self._actors, self.node_ids) if a is not None and node]
        with contextlib.suppress(Exception):  # a dead or hung actor is killed all the same
            ray.wait([a.close.remote() for a in live], num_returns=len(live), timeout=timeout)
        kill_actors(self._actors, timeout)

    def _batch_of(self, answer):
        return unpack_batch(answer)

    def _output(self, answer):
        if self.replay_buffer is not None:  # the actor wrote it: only its frame count came back
            return answer, None
        batch = unpack_batch(answer)
        return batch.numel(), batch

    def _combine(self, answers):
        if self.replay_buffer is not None:
            return sum(answers), None
        batch = stack_batches(answers)
        return batch.numel(), batch

    # ---- properties ----------------------------------------------------------------------------
    @property
    def num_collectors(self) -> int:
        return len(self._actors)

    @property
    def remote_collectors(self) -> list:
        """The actor handles, one per collector."""
        return list(self._actors)

    # ---- iteration, replay buffer -------------------------------------------------------------------
    def iterator(self):
        yield from super().iterator()
        if self.replay_buffer is not None:
            self._flush()

    def _flush(self) -> None:
        for i in range(self.num_collectors):
            self._control(i, "flush", ())

    @contextlib.contextmanager
    def pause(self):
        """Drain the requests in flight (kept for the next iteration), wait for prefetched rollouts
        and flush replay-buffer writes: inside the block no actor collects (:meth:`start`'s thread
        waits too), so the trainer can checkpoint a quiescent state."""
        with super().pause():
            if self.replay_buffer is not None:
                self._flush()
            yield None

    def shutdown(self, timeout: float | None = None, shutdown_ray: bool = False) -> None:
        """Kill every actor of this collector (waiting at most ``timeout`` s, default 10, for Ray to
        report them dead); with ``shutdown_ray=True`` also stop Ray if this collector started it."""
        super().shutdown(timeout)
        if shutdown_ray and self.__dict__.get("started_ray"):
            shutdown_ray_if_ours()

    async def async_shutdown(self, timeout: float | None = None, shutdown_ray: bool = False) -> None:
        """A coroutine, as TorchRL's: stop :meth:`start`'s background collection (waiting at most
        ``timeout`` s for the batch under way), then ``shutdown()``."""
        BaseCollector.async_shutdown(self, timeout, shutdown_ray=shutdown_ray)


__all__ = ["RayCollector", "RayCollectorError", "actor_seed"]
