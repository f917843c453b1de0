"""A recurrent policy end to end: collect with an LSTM policy (``Collector``,
``MultiSyncCollector``), then train on the batch in recurrent mode: the states the collector
stored are those recurrent mode recomputes, zeroed where a trajectory starts and carried
between batches."""

from __future__ import annotations

import time

import pytest
import torch

from reap import Collector
from reap_rnn import set_recurrent_mode
from reap_rnn.testing import NUM_ENVS, make_env, make_policy  # importable by worker processes


def check_batch(batch, lstm):
    is_init = batch["is_init"]
    assert is_init[..., 0, :].all() or is_init.any()
    assert is_init[..., 1:, :].any(), "the batch should hold resets in the middle of rows"
    for key in ("recurrent_state_h", "recurrent_state_c"):
        root, nxt = batch[key], batch["next", key]
        # the root of step t + 1 is the next state of step t, or zeros where a trajectory starts
        continued = ~is_init[..., 1:, 0]
        torch.testing.assert_close(root[..., 1:, :, :][continued], nxt[..., :-1, :, :][continued], rtol=0, atol=0)
        assert (root[is_init[..., 0]] == 0).all()
        assert nxt.abs().sum() > 0
    recomputed = batch.clone()
    with set_recurrent_mode(True), torch.no_grad():
        lstm(recomputed)
    for key in ("embed", ("next", "recurrent_state_h"), ("next", "recurrent_state_c")):
        torch.testing.assert_close(recomputed[key], batch[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["pad", "scan"])
def test_collector_stores_the_states_recurrent_mode_recomputes(backend):
    policy, lstm = make_policy(backend)
    with Collector(make_env(), policy, frames_per_batch=NUM_ENVS * 40, total_frames=NUM_ENVS * 80) as collector:
        batches = list(collector)
    for batch in batches:
        assert batch.batch_size == torch.Size([NUM_ENVS, 40])
        check_batch(batch, lstm)
    first, second = batches
    # carried across batches: the second batch starts from where the first one ended
    go_on = ~second["is_init"][:, 0, 0]
    torch.testing.assert_close(second["recurrent_state_h"][:, 0][go_on], first["next", "recurrent_state_h"][:, -1][go_on])
    # and training on it: gradients flow through the recurrent mode
    with set_recurrent_mode(True):
        loss = lstm(second.clone())["embed"].pow(2).mean()
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in lstm.parameters())


@pytest.mark.slow
def test_multisync_collector_carries_states_in_workers():
    reap_mp = pytest.importorskip("reap_mp")
    from multiprocessing import resource_tracker

    from reap_testing.fixtures import start_forkserver
    from reap_testing.leaks import descendant_pids

    start_forkserver()  # long-lived helpers, started on first use: not the collector's
    resource_tracker.ensure_running()
    before = descendant_pids()
    policy, lstm = make_policy()
    # forkserver: the workers fork from a server that imported reap once (spawn imports it per worker)
    with reap_mp.MultiSyncCollector([make_env, make_env], policy, frames_per_batch=2 * NUM_ENVS * 40,
                                    total_frames=2 * NUM_ENVS * 80, mp_start_method="forkserver") as collector:
        batches = list(collector)
    deadline = time.monotonic() + 10
    while not descendant_pids() <= before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert descendant_pids() <= before, "a worker outlived shutdown()"
    assert len(batches) == 2
    for batch in batches:
        assert batch.batch_size == torch.Size([2, NUM_ENVS, 40])
        check_batch(batch, lstm)
