"""The Ray actor behind each remote collector: a reap collector run one batch per request.

``collect(weights, version)`` first copies ``weights`` (when the driver sent new ones) into the
policy, so weights change only between rollouts, then runs one batch and tags it with
``("collector", "policy_version")``. With a replay buffer, the batch is written into the
buffer's actor (flattened to frames, at most ``max_writes_in_flight`` writes outstanding) and
only the frame count goes back.
"""

from __future__ import annotations

import gc
import os
from collections import deque

import ray
import torch

from reap.weight_update import as_weights
from reap_ray.weight_sync import RayWeightSyncScheme

VERSION_KEY = ("collector", "policy_version")
WORKER_KEY = ("collector", "worker_id")


class CollectorActor:
    def __init__(self, idx: int, collector_class, kwargs: dict, policy=None, replay_buffer=None,
                 max_writes_in_flight: int = 2, write_timeout: float = 60.0):
        self.idx = idx
        if policy is not None:
            kwargs = {**kwargs, "policy": policy}
        self.collector = collector_class(**kwargs)
        self._single = hasattr(self.collector, "collect_into")
        self.version = 0
        self.iterator = None
        self.replay_buffer = replay_buffer
        self.max_writes_in_flight = max_writes_in_flight
        self.write_timeout = write_timeout
        self.writes: deque = deque()

    def ready(self) -> dict:
        """Where the actor runs, and its policy's weight layout (on the meta device) for checks."""
        policy = getattr(self.collector, "policy", None)
        layout = as_weights(policy).to("meta") if isinstance(policy, torch.nn.Module) else None
        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "weights_layout": layout}

    def collect(self, weights, version: int):
        if weights is not None:
            RayWeightSyncScheme.apply(self.collector, weights)
            self.version = version
        if self.iterator is None:
            self.iterator = iter(self.collector)
        batch = next(self.iterator)
        batch.set(VERSION_KEY, torch.full(batch.batch_size, self.version, dtype=torch.int64))
        if self._single:
            batch.set(WORKER_KEY, torch.full(batch.batch_size, self.idx, dtype=torch.int64))
        if self.replay_buffer is None:
            return batch
        frames = batch.numel()
        self._write(batch.reshape(-1))
        return frames

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
        collector, self.collector = self.collector, None
        if collector is not None:
            collector.shutdown()
            del collector
            gc.collect()

    def set_seed(self, seed: int, static_seed: bool):
        torch.manual_seed(seed)
        return self.collector.set_seed(seed, static_seed=static_seed)

    def state_dict(self):
        return self.collector.state_dict()

    def load_state_dict(self, state):
        self.collector.load_state_dict(state)

    def shutdown(self) -> None:
        self.flush()
        self.collector.shutdown()
