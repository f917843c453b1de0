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
request, and the actor loads it before that rollout (never during one). Every batch records
its weights in ``("collector", "policy_version")`` and, with reap's ``Collector``, its actor in
``("collector", "worker_id")``.

Faults: a dead actor (killed, or its process exited) is replaced, up to ``max_restarts`` times
per actor, gets the latest weights with its first request, and redoes the batch lost with it;
an exception inside an actor is raised in the driver with the actor's index and traceback; an
actor with a request outstanding for ``actor_timeout`` seconds is reported as hung. Every wait
is bounded.

Prefetching (async mode): each actor starts its next rollout as soon as it hands a batch back,
so weights given while that rollout runs reach the rollout after it; ``max_weight_update_interval``
still bounds every batch (see :mod:`reap.collectors.remote`, which RPCCollector and
DistributedCollector share).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError
from tensordict.nn import InteractionType

from reap.collectors.base import BaseCollector, options_for_worker
from reap.collectors.collector import Collector
from reap.collectors.remote import (
    DEVICES,
    RemoteCollectorBase,
    check_collector_options,
    check_remote_arguments,
    remote_collector_kwargs,
    split_per_collector,
)
from reap.collectors.worker import TRAJ_ID_BLOCK, resolve_collector_class, worker_seed
from reap.collectors.worker import per_collector as _listify
from reap.envs.base import EnvBase
from reap.plugins import hook
from reap.weight_update import WeightUpdaterBase
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


class RayCollectorError(RuntimeError):
    """A remote collector failed; ``worker_idx`` is the actor's index."""

    def __init__(self, message: str, worker_idx: int):
        super().__init__(message)
        self.worker_idx = worker_idx


#: Actor ``idx``'s seed for ``set_seed(seed)`` (after ``restarts`` restarts): reap-core's worker seed.
actor_seed = worker_seed


def _positive(value, name: str, owner: str, *, number: bool = False, allow_zero: bool = False) -> None:
    kinds = (int, float) if number else (int,)
    if isinstance(value, bool) or not isinstance(value, kinds) or value < 0 or (value == 0 and not allow_zero):
        kind = "a positive number of seconds" if number else ("a non-negative int" if allow_zero else "a positive int")
        raise ValueError(f"{owner}: {name} must be {kind}, got {value!r}")


class RayCollector(RemoteCollectorBase):
    """Collect with reap collectors running as Ray actors (TorchRL's ``RayCollector`` API).

    Arguments follow TorchRL's ``RayCollector``: ``create_env_fn`` (a callable, an env or a
    list with one per collector), ``policy`` or ``policy_factory``, ``frames_per_batch``,
    ``total_frames``, the devices (scalar or one per collector), ``max_frames_per_traj``,
    ``init_random_frames``, ``reset_at_each_iter``, ``postproc``, ``split_trajs``,
    ``exploration_type``, ``collector_class`` (reap's ``Collector``, ``MultiSyncCollector``,
    ``MultiAsyncCollector``, a subclass, or ``"single"``/``"sync"``/``"async"``),
    ``collector_kwargs`` (dict or one per collector), ``num_workers_per_collector`` (envs, or
    worker processes, per actor), ``num_collectors`` (else inferred from list lengths),
    ``sync`` (default False), ``ray_init_config``, ``remote_configs`` (Ray actor options,
    dict or one per collector; default ``num_cpus=1``, no GPU, 2 GiB), ``update_after_each_batch``,
    ``max_weight_update_interval`` (an actor never collects more than ``k`` batches after its
    last weights update once the central policy may have changed: it is sent the central
    policy's weights when due), ``replay_buffer`` (a :class:`RayReplayBuffer`: actors write
    into it, the iterator yields ``None``), ``weight_sync_schemes`` (``{"policy":
    RayWeightSyncScheme()}``), ``use_env_creator`` (accepted; reap needs no env creator).

    reap adds, keyword-only: ``max_restarts`` (per actor, default 3), ``actor_timeout``
    (seconds a request may take before the actor is reported hung, default 30),
    ``actor_start_timeout`` (seconds to place and build the actors, default 60) and
    ``max_writes_in_flight`` (writes each actor may have outstanding to the replay buffer).

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

    _closed = True  # until the actors exist

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
        max_restarts: int = 3,
        actor_timeout: float = 30.0,
        actor_start_timeout: float = 60.0,
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
        _positive(max_restarts, "max_restarts", owner, allow_zero=True)
        _positive(actor_timeout, "actor_timeout", owner, number=True)
        _positive(actor_start_timeout, "actor_start_timeout", owner, number=True)
        _positive(max_writes_in_flight, "max_writes_in_flight", owner)
        if replay_buffer is not None and not isinstance(replay_buffer, RayReplayBuffer):
            raise TypeError(
                f"{owner}: replay_buffer must be a RayReplayBuffer (a buffer living in a Ray actor that "
                f"every collector actor can write to), got {type(replay_buffer).__name__}"
            )
        self.collector_class = resolve_collector_class(collector_class, owner)
        self._scheme = self._resolve_scheme(weight_sync_schemes, owner)

        # ---- how many collectors, and each one's arguments --------------------------------
        n, lists = split_per_collector(
            {"create_env_fn": create_env_fn, "policy_factory": policy_factory, "collector_kwargs": collector_kwargs,
             "remote_configs": remote_configs, "device": device, "storing_device": storing_device,
             "env_device": env_device, "policy_device": policy_device},
            num_collectors=num_collectors, num_workers=num_workers, frames_per_batch=frames_per_batch, sync=sync,
            owner=owner)
        self.frames_per_batch = frames_per_batch
        self._init_requests(0, frames_per_batch // n if sync else frames_per_batch, sync=sync,
                            total_frames=total_frames, update_after_each_batch=update_after_each_batch,
                            max_weight_update_interval=max_weight_update_interval)
        self.policy = policy
        self.max_restarts = max_restarts
        self.actor_timeout = float(actor_timeout)
        self.actor_start_timeout = float(actor_start_timeout)
        self.max_writes_in_flight = max_writes_in_flight
        self.replay_buffer = replay_buffer
        self.use_env_creator = use_env_creator
        self._common = {
            "frames_per_batch": self._frames_per_worker, "max_frames_per_traj": max_frames_per_traj,
            "init_random_frames": init_random_frames, "reset_at_each_iter": reset_at_each_iter,
            "postproc": postproc, "split_trajs": split_trajs, "exploration_type": exploration_type,
            **collector_options,
        }
        self.num_workers_per_collector = num_workers_per_collector
        for i, options in enumerate(lists["collector_kwargs"]):  # before Ray starts
            devices = {name: lists[name][i] for name in DEVICES if lists[name][i] is not None}
            check_collector_options({**self._common, **devices, **(options or {})}, self.collector_class, owner)

        # ---- weights, actors ---------------------------------------------------------------
        self._specs: list[dict] = []
        self._configs: list[dict] = []
        self._actors: list = []
        self.worker_restarts: list[int] = []
        self.node_ids: list[str] = []
        self._inflight: dict = {}  # ObjectRef -> (actor index, time sent)
        self._actor_starts = 0
        self.weight_updater = self._resolve_updater(weight_updater, owner)
        self.started_ray = ensure_ray(ray_init_config)
        self._policy_ref = ray.put(policy) if policy is not None else None
        self._closed = False
        try:
            self.add_collectors(lists["create_env_fn"], num_workers_per_collector, policy_factory=lists["policy_factory"],
                                collector_kwargs=lists["collector_kwargs"], remote_configs=lists["remote_configs"],
                                devices={k: lists[k] for k in DEVICES})
        except BaseException:
            self.shutdown()
            raise

    # ---- construction helpers ---------------------------------------------------------------
    @staticmethod
    def _resolve_scheme(schemes, owner):
        if schemes is None:
            return RayWeightSyncScheme()
        if not isinstance(schemes, dict) or set(schemes) - {"policy"}:
            raise ValueError(f"{owner}: weight_sync_schemes must be {{'policy': RayWeightSyncScheme()}}, got {schemes!r}")
        scheme = schemes.get("policy", RayWeightSyncScheme())
        if scheme == "ray":
            return RayWeightSyncScheme()
        if not isinstance(scheme, RayWeightSyncScheme):
            raise TypeError(f"{owner}: weight_sync_schemes['policy'] must be a RayWeightSyncScheme (or 'ray'), got {scheme!r}")
        return scheme

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
        refs = []
        for j in range(k):
            idx = len(self._actors)
            spec = remote_collector_kwargs(
                self._common, create_env_fn=fns[j], collector_class=self.collector_class,
                num_envs=num_envs, devices={name: values[j] for name, values in devices.items()},
                collector_kwargs=kwargs_list[j], policy_factory=factories[j], owner="RayCollector")
            if factories[j] is None and issubclass(self.collector_class, Collector):
                spec["worker_idx"] = idx
            self._specs.append({"kwargs": spec, "policy": policy_ref if factories[j] is None else None})
            self._configs.append(configs[j])
            self._add_worker()
            self.worker_restarts.append(0)
            self.node_ids.append("")
            self._actors.append(self._make_actor(idx))
            refs.append(self._actors[idx].ready.remote())
        new_ids = list(range(len(self._actors) - k, len(self._actors)))
        infos = self._wait_ready(refs, new_ids)
        for idx, info in infos.items():
            self.node_ids[idx] = info["node_id"]
            if self._weights_layout is None:
                self._weights_layout = info["weights_layout"]
        central = [i for i, factory in zip(new_ids, factories) if factory is None]
        if policy is None and central and self.policy is not None and self.policy_version > 0:
            # weights were pushed since the policy was shipped at construction: the new actors'
            # first requests carry the central policy's current weights (under a new version)
            self._push_weights(self.policy, central)

    def _make_actor(self, idx: int):
        spec = self._specs[idx]
        cls = ray.remote(CollectorActor).options(max_restarts=0, max_concurrency=1, **self._configs[idx])
        kwargs = spec["kwargs"]
        rb = self.replay_buffer.actor if self.replay_buffer is not None else None
        self._actor_starts += 1  # each actor process gets its own block of trajectory ids
        return cls.remote(idx, self.collector_class, kwargs, spec["policy"], rb,
                          self.max_writes_in_flight, self.actor_timeout, spec.get("plugin_options"),
                          (self._actor_starts - 1) * TRAJ_ID_BLOCK)

    def _wait_ready(self, refs, indices) -> dict:
        wait_ready(refs, [self._configs[i] for i in indices], self.actor_start_timeout, "RayCollector")
        infos = {}
        for idx, ref in zip(indices, refs):
            try:
                infos[idx] = ray.get(ref, timeout=self.actor_start_timeout)
            except (RayTaskError, RayActorError) as exc:
                raise self._task_error(idx, exc, "failed to start") from None
        return infos

    # ---- properties ----------------------------------------------------------------------------
    @property
    def num_collectors(self) -> int:
        return len(self._actors)

    num_workers = num_collectors

    @property
    def remote_collectors(self) -> list:
        """The actor handles, one per collector."""
        return list(self._actors)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("RayCollector: the collector was shut down; create a new one")

    # ---- weights and requests (reap.collectors.remote) ---------------------------------------
    def _pack_weights(self, weights):
        return self._scheme.put(weights)  # one ray.put per update, whatever the number of actors

    def _send_collect(self, idx: int, weights, version: int, prefetch: bool) -> None:
        ref = self._actors[idx].collect.remote(weights, version, prefetch)
        self._inflight[ref] = (idx, time.monotonic())

    def _busy_workers(self) -> set[int]:
        return {idx for idx, _ in self._inflight.values()}

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

    def _task_error(self, idx: int, exc, what: str = "raised") -> RayCollectorError:
        return RayCollectorError(f"RayCollector: collector actor {idx} {what}: {exc}", idx)

    def _first_finished(self) -> tuple[int, object]:
        """The first finished request: (actor index, result). Dead actors are restarted and redo it."""
        while True:
            if not self._inflight:
                raise RuntimeError("RayCollector: no request in flight (internal error)")
            now = time.monotonic()
            oldest_ref = min(self._inflight, key=lambda r: self._inflight[r][1])
            oldest_idx, oldest_start = self._inflight[oldest_ref]
            left = oldest_start + self.actor_timeout - now
            if left <= 0:
                # overdue, unless its batch is in: the driver may have been busy (restarting
                # another actor) while it finished
                if not ray.wait([oldest_ref], num_returns=1, timeout=0)[0]:
                    raise RayCollectorError(
                        f"RayCollector: collector actor {oldest_idx} made no progress for "
                        f"{now - oldest_start:.1f} s (actor_timeout={self.actor_timeout:g} s): it is hung "
                        "or far slower than expected; raise actor_timeout if its batches are that slow",
                        oldest_idx,
                    )
                ref = oldest_ref
            else:
                ready, _ = ray.wait(list(self._inflight), num_returns=1, timeout=min(left, 5.0))
                if not ready:
                    continue
                ref = ready[0]
            idx, _ = self._inflight.pop(ref)
            try:
                value = ray.get(ref, timeout=self.actor_timeout)
            except RayTaskError as exc:
                raise self._task_error(idx, exc) from None
            except (RayActorError, GetTimeoutError) as exc:
                self._restart(idx, exc)
                self._submit(idx)
                continue
            if type(value) is tuple:  # ("error", text, traceback) from CollectorWorker.format_error
                raise RayCollectorError(f"RayCollector: {value[1]}\n\nTraceback from the actor:\n{value[2]}", idx)
            return idx, value

    def _restart(self, idx: int, cause) -> None:
        self.worker_restarts[idx] += 1
        if self.worker_restarts[idx] > self.max_restarts:
            raise RayCollectorError(
                f"RayCollector: collector actor {idx} died {self.worker_restarts[idx]} times "
                f"(max_restarts={self.max_restarts}); last cause: {cause}", idx)
        warnings.warn(f"RayCollector: collector actor {idx} died ({type(cause).__name__}); restarting it "
                      f"({self.worker_restarts[idx]}/{self.max_restarts}) with the latest weights",
                      RuntimeWarning, stacklevel=3)
        self._inflight = {r: v for r, v in self._inflight.items() if v[0] != idx}
        kill_actors([self._actors[idx]], timeout=0.0)
        self._actors[idx] = self._make_actor(idx)
        self._worker_weights.replaced(idx)
        self._ahead[idx] = self._skip[idx] = False
        info = self._wait_ready([self._actors[idx].ready.remote()], [idx])[idx]
        self.node_ids[idx] = info["node_id"]
        if self._seed is not None:
            seed, static = self._seed
            s = seed if static else actor_seed(seed, idx, self.worker_restarts[idx])
            self._call(idx, "set_seed", (s, static))

    def _call(self, idx: int, method: str, args: tuple):
        return self._get(idx, getattr(self._actors[idx], method).remote(*args), f"{method}()")

    def _call_all(self, method: str, args_for, among=None) -> list:
        # no drain: an actor answers one call at a time, so this one runs after its collect
        self._check_open()
        ids = range(self.num_collectors) if among is None else among
        refs = [(i, getattr(self._actors[i], method).remote(*args_for(i))) for i in ids]
        return [self._get(i, ref, f"{method}()") for i, ref in refs]

    # ---- iteration -------------------------------------------------------------------------------
    def iterator(self):
        yield from super().iterator()
        if self.replay_buffer is not None:
            self._flush()

    def _flush(self) -> None:
        for i in range(self.num_collectors):
            self._call(i, "flush", ())

    @contextlib.contextmanager
    def pause(self, timeout: float | None = None):
        """Drain the requests in flight (kept for the next iteration) and flush replay-buffer writes.

        Inside the block no actor collects (:meth:`start`'s thread waits too), so the trainer
        can checkpoint a quiescent state.
        """
        self._check_open()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._background_lock():
            saved = self.actor_timeout
            try:
                while self._inflight:
                    if deadline is not None:
                        self.actor_timeout = max(1e-3, min(saved, deadline - time.monotonic()))
                    self._ready.append(self._first_finished())
            finally:
                self.actor_timeout = saved
            self._settle()
            if self.replay_buffer is not None:
                self._flush()
            yield None

    # ---- plugin options and reports (reap.hookspecs.reap_plugin_options) ---------------------------
    def _forward_plugin_options(self, name: str, options) -> None:
        self._check_open()
        refs = []
        for i, actor in enumerate(self._actors):
            value = options_for_worker(options, i)
            kept = self._specs[i].setdefault("plugin_options", {})  # for an actor that restarts
            if value is None:
                kept.pop(name, None)
            else:
                kept[name] = value
            refs.append(actor.set_plugin_options.remote(name, value))
        for i, ref in enumerate(refs):
            self._get(i, ref, "set_plugin_options()")

    def worker_plugin_reports(self, name: str) -> list:
        # also answered from the reap_collector_shutdown hook: the actors are still alive then
        if not self._actors:
            raise RuntimeError("RayCollector: the actors were shut down")
        refs = [actor.plugin_report.remote(name) for actor in self._actors]
        return [self._get(i, ref, "plugin_report()") for i, ref in enumerate(refs)]

    # ---- control ---------------------------------------------------------------------------------
    def _get(self, idx: int, ref, what: str = "the call"):
        try:
            return ray.get(ref, timeout=self.actor_timeout)
        except GetTimeoutError:
            raise RayCollectorError(f"RayCollector: collector actor {idx} did not answer {what} within "
                                    f"{self.actor_timeout:g} s (actor_timeout)", idx) from None
        except (RayTaskError, RayActorError) as exc:
            raise self._task_error(idx, exc) from None

    def shutdown(self, timeout: float | None = None, shutdown_ray: bool = False) -> None:
        """Kill every actor of this collector (waiting at most ``timeout`` s, default 10, for Ray to
        report them dead); with ``shutdown_ray=True`` also stop Ray if this collector started it."""
        if self.__dict__.get("_closed", True):
            if shutdown_ray and self.__dict__.get("started_ray"):
                shutdown_ray_if_ours()
            return
        self._closed = True
        try:
            hook().reap_collector_shutdown(collector=self, worker_idx=-1)
        finally:
            self._inflight.clear()
            self._ready.clear()
            # an actor never placed (its start timed out) would not answer close(): only kill it
            live = [a for a, node in zip(self._actors, self.node_ids) if a is not None and node]
            with contextlib.suppress(Exception):  # a dead or hung actor is killed all the same
                ray.wait([a.close.remote() for a in live], num_returns=len(live),
                         timeout=10.0 if timeout is None else timeout)
            kill_actors(self._actors, 10.0 if timeout is None else timeout)
            if shutdown_ray and self.started_ray:
                shutdown_ray_if_ours()

    async def async_shutdown(self, timeout: float | None = None, shutdown_ray: bool = False) -> None:
        """A coroutine, as TorchRL's: stop :meth:`start`'s background collection (waiting at most
        ``timeout`` s for the batch under way), then ``shutdown()``."""
        BaseCollector.async_shutdown(self, timeout, shutdown_ray=shutdown_ray)

    def __repr__(self) -> str:
        return (f"RayCollector(num_collectors={len(self.__dict__.get('_actors', []))}, sync={self.__dict__.get('_sync')}, "
                f"frames_per_batch={self.__dict__.get('frames_per_batch')}, total_frames={self.__dict__.get('total_frames')}, "
                f"frames={self.__dict__.get('_frames', 0)})")


__all__ = ["RayCollector", "RayCollectorError", "actor_seed"]
