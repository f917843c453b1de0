"""The Ray actor behind each remote collector: a :class:`~reap.collectors.worker.CollectorWorker`
run one batch per request.

``collect(weights, version)`` hands ``weights`` (when the driver sent new ones) to the worker,
which loads them before the rollout it then runs (never during one) and tags the batch with
``("collector", "policy_version")`` and, for a reap ``Collector``, ``("collector",
"worker_id")`` (the driver drops both unless ``worker_tags``). With a replay buffer, the batch
is written into the buffer's actor (flattened to frames, without those tags unless
``worker_tags``; at most ``max_writes_in_flight`` writes outstanding) and only the frame count
goes back; otherwise the batch goes back as NumPy arrays (:mod:`reap_ray.batches`). An
exception in ``collect`` comes back as ``("error", text, traceback)``, naming the actor.

``collect(..., prefetch=True)`` starts the next rollout in a background thread as soon as the
batch is handed back (``CollectorWorker.serve_collect``); the next ``collect`` returns that
rollout's batch. ``set_seed`` and ``load_state_dict`` drop a prefetched rollout (collected under
the old seed or state); every other call waits for it to end and keeps its batch.
"""

from __future__ import annotations

import gc
from collections import deque

import ray

from reap.collectors.worker import CollectorWorker, without_worker_tags
from reap_ray.batches import pack_batch
from reap_ray.weight_sync import RayWeightSyncScheme


class CollectorActor:
    def __init__(self, idx: int, collector_class, kwargs: dict, policy=None, replay_buffer=None,
                 max_writes_in_flight: int = 2, write_timeout: float = 60.0, plugin_options=None,
                 traj_id_offset: int = 0, worker_tags: bool = False):
        self.idx = idx
        if policy is not None:
            kwargs = {**kwargs, "policy": policy}
        self.worker = CollectorWorker.build(idx, collector_class, kwargs, traj_id_offset=traj_id_offset,
                                            plugin_options=plugin_options, applier=RayWeightSyncScheme.applier)
        self.replay_buffer = replay_buffer
        self.worker_tags = worker_tags
        self.max_writes_in_flight = max_writes_in_flight
        self.write_timeout = write_timeout
        # a prefetched rollout is waited for twice the driver's deadline (as reap-collectors-rpc's
        # workers): the driver, whose clock starts later, names a hung rollout first
        self.rollout_wait = 2 * write_timeout
        self.writes: deque = deque()

    @property
    def collector(self):
        return self.worker.collector

    def ready(self) -> dict:
        """The worker's ready info (its policy's weight layout, for checks) and the node it runs on."""
        return {**self.worker.ready_info(), "node_id": ray.get_runtime_context().get_node_id()}

    def collect(self, weights, version: int, prefetch: bool = False):
        try:
            batch = self.worker.serve_collect(weights, version, prefetch=prefetch, timeout=self.rollout_wait)
            if self.replay_buffer is None:
                return pack_batch(batch)
            frames = batch.numel()
            self._write((batch if self.worker_tags else without_worker_tags(batch)).reshape(-1))
            return frames
        except Exception as exc:  # noqa: BLE001 - reported to the driver with the actor's index
            return ("error", *self.worker.format_error(exc, "collector actor"))

    def settle(self, drop: bool = False) -> None:
        """Wait for a prefetched rollout to end; keep its batch (or its error) for the next
        ``collect`` unless ``drop``."""
        self.worker.settle(drop, timeout=self.rollout_wait)

    def _write(self, batch) -> None:
        while len(self.writes) >= self.max_writes_in_flight:
            ray.get(self.writes.popleft(), timeout=self.write_timeout)
        self.writes.append(self.replay_buffer.extend.remote(batch))

    def flush(self) -> int:
        """Wait for every write to the replay buffer; returns how many there were."""
        n = len(self.writes)
        while self.writes:
            ray.get(self.writes.popleft(), timeout=self.write_timeout)
        return n

    def close(self) -> None:
        """Shut the collector down before the actor is killed. ``ray.kill`` ends the actor's
        process tree at once, multiprocessing's resource tracker included, so named semaphores
        of a multi-process collector inside it would outlive it: they are released here, while
        their finalizers can still run."""
        self.worker.close(timeout=self.write_timeout)
        gc.collect()

    def set_seed(self, seed: int, static_seed: bool):
        return self.worker.set_seed(seed, static_seed)

    def reset(self, index=None) -> None:
        self.worker.reset(index)

    def state_dict(self):
        return self.worker.state_dict()

    def load_state_dict(self, state):
        self.worker.load_state_dict(state)

    def set_plugin_options(self, name: str, options) -> None:
        self.worker.set_plugin_options(name, options)

    def plugin_report(self, name: str):
        return self.worker.plugin_report(name)
