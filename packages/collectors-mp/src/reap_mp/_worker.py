"""The collector worker process: a reap ``Collector`` writing batches into shared memory.

Protocol (tuples over the worker's pipe):

* worker -> parent, once: ``("ready", slots, info)``: ``slots`` are the shared-memory batches
  the worker writes into (allocated once), ``info`` its ``CollectorWorker.ready_info()`` (its
  batch size, its policy's weight layout, its shared-memory weights).
* parent -> worker: ``("collect", slot)``: run one rollout into ``slots[slot]``; the worker
  answers ``("batch", slot, policy_version, extras)``: ``extras`` are the batch's non-tensor
  entries (strings, objects: shared memory holds tensors only), None when it has none, or the
  whole batch where the env's entries change shape (no slot then). Two may be queued (async
  double buffering).
* ``("weights", arrays, version)`` (pipe scheme): loaded before the next rollout; no answer.
* ``("call", method, args)``: ``CollectorWorker.<method>(*args)`` (``set_seed``, ``reset``,
  ``state_dict``, ``load_state_dict``, ``set_plugin_options``, ``plugin_report``, ``settle``),
  answered by ``("ok", value)``.
* ``("close",)``, or the pipe closing: the worker shuts its collector down and exits.

Any exception is sent back as ``("error", text, traceback)`` and ends the worker.

What the worker does with its collector (weights only between rollouts, batch tags, seeds,
plugin options) is reap-core's :class:`~reap.collectors.worker.CollectorWorker`, shared with
the other backends; this module adds the pipe and the shared-memory slots.
"""

from __future__ import annotations

import torch

from reap.collectors.stepwise import non_tensor_keys
from reap_mp._procs import worker_session


def collector_worker(idx, conn, payload, receiver, interruptor=None):
    from reap.collectors.multi_worker import build_worker
    from reap.plugins import hook

    with worker_session(conn) as closers:
        spec = payload.obj
        torch.set_num_threads(spec.pop("num_threads"))
        slot_count = spec.pop("slots")
        # weights arrive through the scheme's receiver (shared memory, or the pipe's "weights"
        # messages below), written in place by the parent
        worker = build_worker(receiver=receiver, interruptor=interruptor, **spec)
        closers.append(worker.close)
        if worker.collector.fixed_layout:
            extra_keys = non_tensor_keys(worker.new_slot())
            # a new batch per slot (exclude() keeps the tensors it is given: slots must not share them)
            slots = [worker.new_slot().exclude(*extra_keys).share_memory_() for _ in range(slot_count)]
        else:  # entries of variable shape: no slot to preallocate, each batch goes whole by pipe
            extra_keys, slots = [], [None] * slot_count
        hook().reap_collector_start(collector=worker.collector, worker_idx=idx)
        conn.send(("ready", slots, worker.ready_info()))
        while True:
            worker.waiting()
            message = conn.recv()
            command = message[0]
            if command == "collect":
                slot = slots[message[1]]
                if slot is None:
                    extras = worker.collect()
                else:  # non-tensor entries are set on a shallow copy (the shared slot holds tensors only)
                    batch = worker.collect_into(slot.copy() if extra_keys else slot)
                    extras = {key: batch.get(key) for key in extra_keys} if extra_keys else None
                conn.send(("batch", message[1], worker.version, extras))
            elif command == "weights":
                hook().reap_worker_phase(collector=worker.collector, worker_idx=idx, phase="weight_sync")
                receiver.apply(message)
            elif command == "call":
                conn.send(("ok", getattr(worker, message[1])(*message[2])))
            elif command == "close":
                break
            else:
                raise ValueError(f"unknown command {command!r}")
