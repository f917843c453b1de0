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

What the worker does with its collector (weights only between rollouts, batch tags, seeds,
plugin options) is reap-core's :class:`~reap.collectors.worker.CollectorWorker`, shared with
the other backends; this module adds the pipe and the shared-memory slots.
"""

from __future__ import annotations

import torch

from reap_mp._procs import worker_session


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
    from reap.collectors.worker import CollectorWorker
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
        collector.init_random_frames = spec["random_batches"] * collector.frames_per_batch
        # weights arrive through the scheme's receiver (shared memory, or the pipe's "weights"
        # messages below), not CollectorWorker.receive_weights: the parent writes them in place
        receiver = WeightSyncScheme.make_receiver(scheme_state)
        weights_buffer = receiver.attach(collector.policy)
        worker = CollectorWorker(idx, collector, receiver=receiver)
        for name, options in spec.get("plugin_options", {}).items():  # also after a restart
            worker.set_plugin_options(name, options)
        slots = [worker.new_slot().share_memory_() for _ in range(spec["slots"])]
        if spec["seed"] is not None:
            worker.set_seed(*spec["seed"])
        hook().reap_collector_start(collector=collector, worker_idx=idx)
        info = {"frames_per_batch": collector.frames_per_batch, "n_envs": collector.n_envs,
                # the policy's weight layout (keys, shapes, dtypes): the parent checks pushes against it
                "weights": None if receiver.local is None else receiver.local.to("meta")}
        conn.send(("ready", slots, weights_buffer, info))
        while True:
            worker.waiting()
            message = conn.recv()
            command = message[0]
            if command == "collect":
                worker.collect_into(slots[message[1]])
                conn.send(("batch", message[1], worker.version))
            elif command == "weights":
                hook().reap_worker_phase(collector=collector, worker_idx=idx, phase="weight_sync")
                receiver.apply(message)
            elif command == "seed":
                conn.send(("ok", worker.set_seed(message[1], message[2])))
            elif command == "reset":
                collector.reset(message[1])
                conn.send(("ok", None))
            elif command == "state_dict":
                conn.send(("ok", worker.state_dict()))
            elif command == "load_state_dict":
                worker.load_state_dict(message[1])
                conn.send(("ok", None))
            elif command == "plugin_options":
                worker.set_plugin_options(message[1], message[2])
                conn.send(("ok", None))
            elif command == "plugin_report":
                conn.send(("ok", worker.plugin_report(message[1])))
            elif command == "close":
                break
            else:
                raise ValueError(f"unknown command {command!r}")
