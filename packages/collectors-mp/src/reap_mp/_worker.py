"""The collector worker process: a ``reap.Collector`` writing batches into shared memory.

Protocol (tuples over the worker's pipe):

* worker → parent, once: ``("ready", slots, weights_buffer, info)``: ``slots`` are the
  shared-memory batches the worker writes into (allocated once), ``info`` its layout facts
  (frames per batch, envs, and its policy's weights on the ``meta`` device: their layout).
* parent → worker: ``("collect", slot)``: run one rollout into ``slots[slot]``; the worker
  answers ``("batch", slot, policy_version)``. Several may be queued (async double buffering).
* ``("weights", arrays, version)`` (pipe scheme), ``("seed", seed, static)``, ``("reset", index)``,
  ``("state_dict",)``, ``("load_state_dict", state)``: answered by ``("ok", value)``.
* ``("plugin_options", name, options)``: ``collector.set_plugin_options(name, options)``;
  ``("plugin_report", name)``: ``collector.plugin_report(name)``; both answered by ``("ok", value)``.
* ``("close",)``, or the pipe closing: the worker shuts its collector down and exits.

Any exception is sent back as ``("error", text, traceback)`` and ends the worker.
"""

from __future__ import annotations

import torch

from reap_mp._procs import worker_session

WORKER_KEY = ("collector", "worker_id")
VERSION_KEY = ("collector", "policy_version")


class ReplicatedEnv:
    """Picklable ``create_env_fn`` building ``copies`` envs batched in one process."""

    def __init__(self, create_env_fn, copies: int, create_env_kwargs=None):
        self.create_env_fn = create_env_fn
        self.copies = copies
        self.create_env_kwargs = create_env_kwargs

    def __call__(self):
        from reap.envs import SerialEnv

        return SerialEnv(self.copies, self.create_env_fn, create_env_kwargs=self.create_env_kwargs)


def collector_worker(idx, conn, payload, traj_counter, scheme_state):
    from reap.collectors.collector import Collector
    from reap.plugins import hook
    from reap_mp.weight_sync import WeightSyncScheme

    with worker_session(conn) as closers:
        spec = payload.obj
        torch.set_num_threads(spec["num_threads"])
        policy, factory = spec["policy"], spec["policy_factory"]
        collector = Collector(
            spec["create_env_fn"], policy, policy_factory=factory, worker_idx=idx,
            traj_id_counter=traj_counter, **spec["kwargs"],
        )
        closers.append(collector.shutdown)
        for name, options in spec.get("plugin_options", {}).items():  # also after a restart
            collector.set_plugin_options(name, options)
        collector.init_random_frames = spec["random_batches"] * collector.frames_per_batch
        receiver = WeightSyncScheme.make_receiver(scheme_state)
        weights_buffer = receiver.attach(collector.policy)
        slots = []
        for _ in range(spec["slots"]):
            slot = collector.empty_batch()
            slot.set(WORKER_KEY, torch.full(slot.batch_size, idx, dtype=torch.int64))
            slot.set(VERSION_KEY, torch.zeros(slot.batch_size, dtype=torch.int64))
            slots.append(slot.share_memory_())
        if spec["seed"] is not None:
            _seed(collector, *spec["seed"])
        hook().reap_collector_start(collector=collector, worker_idx=idx)
        info = {"frames_per_batch": collector.frames_per_batch, "n_envs": collector.n_envs,
                # the policy's weight layout (keys, shapes, dtypes): the parent checks pushes against it
                "weights": None if receiver.local is None else receiver.local.to("meta")}
        conn.send(("ready", slots, weights_buffer, info))
        while True:
            hook().reap_worker_phase(collector=collector, worker_idx=idx, phase="wait")
            message = conn.recv()
            command = message[0]
            if command == "collect":
                slot = slots[message[1]]
                hook().reap_worker_phase(collector=collector, worker_idx=idx, phase="weight_sync")
                version = receiver.poll()
                collector.collect_into(slot)
                slot.get(VERSION_KEY).fill_(version)
                conn.send(("batch", message[1], version))
            elif command == "weights":
                hook().reap_worker_phase(collector=collector, worker_idx=idx, phase="weight_sync")
                receiver.apply(message)
            elif command == "seed":
                conn.send(("ok", _seed(collector, message[1], message[2])))
            elif command == "reset":
                collector.reset(message[1])
                conn.send(("ok", None))
            elif command == "state_dict":
                conn.send(("ok", collector.state_dict()))
            elif command == "load_state_dict":
                collector.load_state_dict(message[1])
                conn.send(("ok", None))
            elif command == "plugin_options":
                collector.set_plugin_options(message[1], message[2])
                conn.send(("ok", None))
            elif command == "plugin_report":
                conn.send(("ok", collector.plugin_report(message[1])))
            elif command == "close":
                break
            else:
                raise ValueError(f"unknown command {command!r}")


def _seed(collector, seed: int, static: bool):
    torch.manual_seed(seed)
    return collector.set_seed(seed, static_seed=static)
