"""The backend contract: what every multi-worker collector does, whatever carries its messages.

A backend's tests run it with a module of a few lines (``tests/test_contract.py``)::

    from reap_testing.contract import BackendContract


    class TestContract(BackendContract):
        backend = "mp"
        options = {"mp_start_method": "forkserver"}

Each test builds collectors through ``MultiCollector(..., backend=backend)`` on
:class:`~reap_testing.envs.EchoEnv` (the reward is the action: a batch shows which weights made
it) and checks (a worker is named "worker N", or "actor N" on Ray): the batch layout and keys
(TorchRL's, plus ``("collector", "policy_version")`` and ``("collector", "worker_id")`` per
batch with ``worker_tags=True``), seeds (reproducible, distinct per worker), the driver's hooks
and ``postproc`` once per batch, a restarted worker running the latest weights and redoing the
lost batch, a worker's error naming its index with its traceback, a hung worker reported after
``worker_timeout``, and nothing left after shutdown (processes, shared-memory segments,
listening sockets, and what :meth:`BackendContract.leftovers` names). Five collectors in all:
the suite replaces a backend's own tests of these.
A test a backend cannot pass yet is listed in ``xfail`` (strict: it must fail).
"""

from __future__ import annotations

import os
import re
import warnings

import pytest
import torch

from reap import MultiCollector
from reap.errors import WorkerError
from reap.plugins import get_registries, hookimpl
from reap_testing.envs import env_fn
from reap_testing.leaks import (
    listening_addresses,
    shm_left_by_us,
    shm_segments,
    wait_gone,
    worker_pids,
)
from reap_testing.policies import constant_policy

VERSION, WORKER, TRAJ = ("collector", "policy_version"), ("collector", "worker_id"), ("collector", "traj_ids")
KEYS = {"observation", "action", "done", "terminated", "truncated", ("next", "observation"), ("next", "reward"),
        ("next", "done"), ("next", "terminated"), ("next", "truncated"), TRAJ, VERSION, WORKER}


class HookCounter:
    """Counts the lifecycle hooks fired on the driver of ``collector`` (``worker_idx`` -1)."""

    def __init__(self):
        self.collector = None
        self.counts = {"start": 0, "batch": 0, "shutdown": 0}

    def _count(self, name, collector, worker_idx=-1):
        if collector is self.collector and worker_idx == -1:
            self.counts[name] += 1

    @hookimpl
    def reap_collector_start(self, collector, worker_idx):
        self._count("start", collector, worker_idx)

    @hookimpl
    def reap_batch_ready(self, collector, batch):
        self._count("batch", collector)

    @hookimpl
    def reap_collector_shutdown(self, collector, worker_idx):
        self._count("shutdown", collector, worker_idx)


class Tagger:
    """A ``postproc`` that tags each batch and counts its calls (in the driver's process)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, batch):
        self.calls += 1
        return batch.set("tag", torch.ones(batch.shape))


class BackendContract:
    """The contract tests; subclass it with the backend's name (see the module docstring)."""

    #: the registered backend name (``MultiCollector(..., backend=...)``)
    backend: str = ""
    #: keyword arguments every collector of this backend is built with
    options: dict = {}
    #: how a sync batch combines the workers' parts: "stack" (``[workers, *part]``) or "cat" (dim 0)
    sync_layout = "stack"
    #: {test name: why it fails today}: run as strict xfails
    xfail: dict = {}

    @pytest.fixture(autouse=True)
    def _expected_failures(self, request):
        reason = self.xfail.get(request.function.__name__)
        if reason:
            request.node.add_marker(pytest.mark.xfail(reason=reason, strict=True))

    def make(self, envs, policy=None, **kwargs):
        """A collector of this backend; its batches keep the worker tags unless ``worker_tags=False``."""
        return MultiCollector(envs, policy, backend=self.backend, **{"worker_tags": True, **self.options, **kwargs})

    def leftovers(self) -> set:
        """What of the backend's own outlived ``shutdown()`` (e.g. Ray actors); override."""
        return set()

    def _snapshot(self):
        return worker_pids(), shm_segments(), listening_addresses([os.getpid()])

    def _assert_nothing_left(self, before) -> None:
        pids, shm, ports = before
        assert not wait_gone(worker_pids() - pids, timeout=15.0), "worker processes outlived shutdown()"
        assert not shm_left_by_us(shm_segments() - shm), "shared-memory segments outlived shutdown()"
        assert not listening_addresses([os.getpid()]) - ports, "listening sockets outlived shutdown()"
        assert not self.leftovers(), f"{self.backend} left {sorted(self.leftovers())}"

    # ---- the contract --------------------------------------------------------------------
    def test_sync_layout_versions_seeds_hooks_and_shutdown(self):
        before = self._snapshot()
        hooks, tag = HookCounter(), Tagger()
        pm = get_registries().pm
        pm.register(hooks)
        try:
            collector = self.make([env_fn(batch=2, episode_len=3)] * 2, constant_policy(0.5), sync=True,
                                  frames_per_batch=16, total_frames=-1, postproc=tag)
            hooks.collector = collector
            with collector:
                assert collector.set_seed(5) == 6
                first = collector.next()
                expected = (2, 2, 4) if self.sync_layout == "stack" else (4, 4)
                assert first.batch_size == expected
                assert KEYS | {"tag"} <= set(first.keys(True, True))
                assert first["next", "reward"].shape == (*expected, 1)
                assert (first["action"] == 0.5).all() and (first[VERSION] == 0).all()
                parts = first.unbind(0) if self.sync_layout == "stack" else first.split(2, 0)
                assert [p[WORKER].unique().tolist() for p in parts] == [[0], [1]]
                assert not set(parts[0][TRAJ].flatten().tolist()) & set(parts[1][TRAJ].flatten().tolist())
                assert not torch.equal(parts[0]["observation"], parts[1]["observation"])  # seeds differ
                collector.set_seed(5)
                assert torch.equal(collector.next()["observation"], first["observation"])  # and repeat
                collector.update_policy_weights_({"module.weight": torch.tensor([2.0])})
                batch = collector.next()
                assert (batch["action"] == 2.0).all() and (batch[VERSION] == 1).all()
                assert collector.get_policy_version() == 1
                assert hooks.counts == {"start": 1, "batch": 3, "shutdown": 0}
                assert tag.calls == 3
            assert hooks.counts["shutdown"] == 1
        finally:
            pm.unregister(hooks)
        with pytest.raises(RuntimeError, match="shut down"):
            collector.next()
        self._assert_nothing_left(before)

    def test_batches_have_torchrl_keys_unless_worker_tags(self):
        # without the tags, TorchRL's track_policy_version still names the weights of each frame
        with self.make([env_fn()] * 2, constant_policy(0.5), sync=True, frames_per_batch=8, total_frames=-1,
                       worker_tags=False, track_policy_version=True) as collector:
            first = collector.next()
            collector.update_policy_weights_({"module.weight": torch.tensor([2.0])})
            batch = collector.next()
        version = {"policy_version", ("next", "policy_version")}
        assert set(batch.keys(True, True)) == KEYS - {VERSION, WORKER} | version
        assert (first["policy_version"] == 0).all() and (batch["next", "policy_version"] == 1).all()
        assert (batch["action"] == 2.0).all()

    def test_async_batches_are_one_workers_with_the_weights_that_made_them(self):
        policy = constant_policy(1.0)
        with self.make([env_fn(batch=2)] * 2, policy, sync=False, frames_per_batch=4, total_frames=40) as collector:
            seen, versions = set(), {0: [], 1: []}
            for batch in collector:
                assert batch.batch_size == (2, 2)
                worker = batch[WORKER].unique().tolist()
                version = batch[VERSION].unique().tolist()
                assert len(worker) == 1 and len(version) == 1  # one worker, one version per batch
                assert (batch["action"] == (1.0 if version == [0] else 3.0)).all()
                seen.add(worker[0])
                versions[worker[0]].append(version[0])
                if sum(map(len, versions.values())) == 2:
                    policy.module.weight.data.fill_(3.0)
                    collector.update_policy_weights_()  # the central policy, read now
            assert seen == {0, 1} and collector.frames == 40
            # a worker's rollout started before the push may arrive after the other's next one,
            # and a slow worker may deliver none after it
            assert all(v == sorted(v) for v in versions.values()) and 1 in versions[0] + versions[1], versions

    def test_restart_with_the_latest_weights_then_an_error_naming_the_worker(self):
        # worker 1 raises at its 6th step, in every life: in the second batch (it is replaced,
        # and redoes its part on the latest weights), then in the third, past max_restarts
        collector = self.make([env_fn(), env_fn(fail_at=6)], constant_policy(1.0), sync=True, frames_per_batch=8,
                              total_frames=-1, on_worker_failure="restart", max_restarts=1)
        with collector:
            assert (collector.next()["action"] == 1.0).all()
            collector.update_policy_weights_({"module.weight": torch.tensor([2.0])})
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                redone = collector.next()
            assert any(re.search(r"(worker|actor) 1\b[^;]* failed", str(w.message)) for w in caught)
            assert collector.worker_restarts == [0, 1] and redone.numel() == 8
            assert (redone["action"] == 2.0).all() and (redone[VERSION] == 1).all()
            with pytest.raises(WorkerError) as info:
                collector.next()
        error = info.value
        assert error.worker_idx == 1 and re.search(r"(worker|actor) 1\b", str(error)) and "gave up after 1 restarts" in str(error)
        assert "EchoEnv exploded at step 6" in str(error) and "_step_into" in error.remote_traceback
        with pytest.raises(WorkerError, match=r"(worker|actor) 1\b"):  # the collector stays failed
            collector.next()

    def test_hung_worker_is_reported_after_worker_timeout_and_nothing_is_left(self):
        before = self._snapshot()
        collector = self.make([env_fn(hang_at=3, hang_for=8.0), env_fn()], constant_policy(), sync=False,
                              frames_per_batch=2, worker_timeout=2)
        with collector, pytest.raises(WorkerError, match=r"(worker|actor) 0\b.* delivered no batch for 2\.\d s "
                                                         r"\(worker_timeout=2 s\)") as info:
            for _ in collector:
                pass
        assert info.value.worker_idx == 0
        self._assert_nothing_left(before)


__all__ = ["KEYS", "BackendContract", "HookCounter", "Tagger"]
