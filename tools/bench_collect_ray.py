"""Ray collection speed: reap's RayCollector vs reap's multi-process collectors and TorchRL's RayCollector.

Every case runs 2 workers (Ray actors or processes) x 8 Pendulum-v1 envs with the same
``nn.Linear`` policy and ``--fpb`` frames a batch (sync: the total of one batch; async: each
worker's batch is ``--fpb / 2``). All collectors are started first; then the cases take turns
for ``--rounds`` rounds, each measuring frames/s over whole batches after the previous turn,
and the medians are shown (start-up excluded). Between turns the machine is left idle for
``--settle`` seconds: collectors that queue rollouts ahead (``MultiAsyncCollector``'s double
buffers, ``RayCollector``'s async prefetch) finish them then, not during the next case's turn. Then one weight push of a ~1M-parameter MLP to
2 actors: the median time of ``update_policy_weights_`` plus the next (one-step) sync batch,
minus the median of that batch alone.

    uv run --group bench python tools/bench_collect_ray.py [--fpb 4096] [--rounds 3] [--settle 0.5] [--no-torchrl]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import time
import warnings

import torch
from bench_collect import make_policy as linear_policy
from bench_collect import table
from bench_json import add_json_option, row, write_rows
from torch import nn


def reap_pendulum():
    from reap import GymEnv

    return GymEnv("Pendulum-v1", num_envs=8)


def torchrl_pendulum():
    from torchrl.envs import GymEnv

    return GymEnv("Pendulum-v1", num_envs=8)


def module(net: nn.Module):
    from tensordict.nn import TensorDictModule

    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def big_mlp() -> nn.Module:
    return module(nn.Sequential(nn.Linear(3, 1000), nn.Tanh(), nn.Linear(1000, 1000), nn.Tanh(),
                                nn.Linear(1000, 1)))


def rate(iterator, frames: int) -> float:
    """Frames/s over at least ``frames`` frames (whole batches) from a running iterator."""
    count, start = 0, time.perf_counter()
    while count < frames:
        count += next(iterator).numel()
    return count / (time.perf_counter() - start)


def build(args, torchrl: bool) -> dict:
    """``{case: (collector, iterator)}``, each started and past its first batch."""
    from reap import MultiAsyncCollector, MultiSyncCollector, RayCollector

    policy = module(linear_policy("Pendulum-v1"))
    half = args.fpb // 2
    cases = {
        "reap RayCollector sync": RayCollector(reap_pendulum, policy, num_collectors=2,
                                               frames_per_batch=args.fpb, sync=True),
        "reap MultiSync": MultiSyncCollector([reap_pendulum] * 2, policy, frames_per_batch=args.fpb),
        "reap RayCollector async": RayCollector(reap_pendulum, policy, num_collectors=2,
                                                frames_per_batch=half, sync=False),
        "reap MultiAsync": MultiAsyncCollector([reap_pendulum] * 2, policy, frames_per_batch=half),
    }
    if torchrl:
        from torchrl.collectors.distributed import RayCollector as TorchRLRay

        for sync, fpb in ((True, args.fpb), (False, half)):
            cases[f"torchrl RayCollector {'sync' if sync else 'async'}"] = TorchRLRay(
                [torchrl_pendulum] * 2, policy, frames_per_batch=fpb, total_frames=10**12, sync=sync,
                remote_configs={"num_cpus": 1, "num_gpus": 0, "memory": 2 * 1024**3})
    out = {}
    for name, collector in cases.items():
        it = iter(collector)
        next(it)
        out[name] = (collector, it)
    return out


def shutdown_torchrl(collector) -> None:
    """TorchRL's ``RayCollector.shutdown()``, then unlink the named semaphores its actors left.

    Importing torchrl sets multiprocessing's start method to ``spawn``, and its
    ``GymEnv(num_envs=8)`` runs gymnasium's ``AsyncVectorEnv`` in each actor, whose queue and locks
    are then named semaphores (/dev/shm/sem.mp-*, 3 per actor here) that only the actor's
    finalizers or its resource tracker unlink. ``shutdown()`` ends the actors with ``ray.kill``,
    resource tracker included, so nothing does (18 names were left by a run of this bench). Only the names that this
    collector's actor processes map are removed.
    """
    from reap_ray.testing import actor_pids
    from reap_testing import shm_mapped_by, shm_segments

    ours = {n for n in shm_mapped_by(actor_pids(collector.remote_collectors)) if n.startswith("sem.mp-")}
    collector.shutdown()
    for name in ours & shm_segments():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"/dev/shm/{name}")


def push_latency(make_collector, policy, repeats: int, shutdown=None) -> float:
    """Median extra seconds that an ``update_policy_weights_`` adds to the next sync batch; the
    collector is stopped with ``shutdown(collector)`` if given, else its ``shutdown()``."""
    from tensordict import TensorDict

    collector = make_collector()
    it = iter(collector)
    next(it)
    weights = TensorDict.from_module(policy).data.clone()
    plain, pushed = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        next(it)
        plain.append(time.perf_counter() - start)
        weights.apply_(lambda x: x.add_(1e-3))
        start = time.perf_counter()
        collector.update_policy_weights_(weights)
        next(it)
        pushed.append(time.perf_counter() - start)
    if shutdown is None:
        collector.shutdown()
    else:
        shutdown(collector)
    return statistics.median(pushed) - statistics.median(plain)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fpb", type=int, default=4096, help="frames of one sync batch (2 x 8 envs)")
    parser.add_argument("--batches", type=int, default=8, help="sync batches' worth of frames per turn")
    parser.add_argument("--rounds", type=int, default=3, help="turns per case; the median is shown")
    parser.add_argument("--repeats", type=int, default=15, help="weight pushes timed")
    parser.add_argument("--num-cpus", type=int, default=8, help="logical CPUs of the local Ray")
    parser.add_argument("--settle", type=float, default=0.5, help="idle seconds between turns")
    parser.add_argument("--no-torchrl", action="store_true")
    add_json_option(parser)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torchrl = not args.no_torchrl and importlib.util.find_spec("torchrl") is not None

    from reap_ray._ray import ensure_ray, shutdown_ray_if_ours

    ensure_ray({"num_cpus": args.num_cpus, "object_store_memory": 500 * 2**20})
    try:
        cases = build(args, torchrl)
        frames = args.fpb * args.batches
        rates: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, (_, it) in cases.items():
                time.sleep(args.settle)  # the previous case's queued rollouts end first
                rates[name].append(rate(it, frames))
        for name, (collector, _) in cases.items():
            if name.startswith("torchrl"):
                shutdown_torchrl(collector)
            else:
                collector.shutdown()
        med = {name: statistics.median(r) for name, r in rates.items()}
        rows = [["collector (2 workers x 8 Pendulum envs)", "frames/s", "x reap multi-process", "x torchrl Ray"]]
        figures = []
        for kind, mp in (("sync", "reap MultiSync"), ("async", "reap MultiAsync")):
            ours, peer = med[f"reap RayCollector {kind}"], med.get(f"torchrl RayCollector {kind}")
            rows.append([f"reap RayCollector {kind}", f"{ours:,.0f}", f"{ours / med[mp]:.2f}",
                         f"{ours / peer:.1f}" if peer else "-"])
            rows.append([mp, f"{med[mp]:,.0f}", "1.00", ""])
            batch = f", {args.fpb:,} frames a batch" if kind == "sync" else ""
            figures.append(row(f"`RayCollector` {kind}, 2 actors × 8 envs, Pendulum{batch}",
                               reap_torchrl=peer and ours / peer,
                               note=f"{ours / med[mp]:.2f}× reap's `{mp.split()[1]}Collector`"))
            if peer:
                rows.append([f"torchrl RayCollector {kind}", f"{peer:,.0f}", f"{peer / med[mp]:.2f}", "1.0"])
        print(f"fpb={args.fpb}, {frames} frames a turn, median of {args.rounds} rounds")
        print(table(rows), flush=True)

        from reap import RayCollector

        policy = big_mlp()
        n_params = sum(p.numel() for p in policy.parameters())
        rows = [["collector", "weight push + apply, ms"]]
        reap_ms = push_latency(lambda: RayCollector(reap_pendulum, policy, num_collectors=2,
                                                    frames_per_batch=16, sync=True), policy, args.repeats)
        rows.append(["reap RayCollector", f"{reap_ms * 1e3:.2f}"])
        if torchrl:
            from torchrl.collectors.distributed import RayCollector as TorchRLRay

            peer_ms = push_latency(lambda: TorchRLRay(
                [torchrl_pendulum] * 2, policy, frames_per_batch=16, total_frames=10**12, sync=True,
                remote_configs={"num_cpus": 1, "num_gpus": 0, "memory": 2 * 1024**3}), policy, args.repeats,
                shutdown=shutdown_torchrl)
            rows.append(["torchrl RayCollector", f"{peer_ms * 1e3:.2f}"])
        figures.append(row(f"weight push, {n_params / 1e6:.1f}M-parameter MLP to 2 actors, then a one-step batch",
                           reap_torchrl=peer_ms / reap_ms if torchrl else None,
                           note=f"{reap_ms * 1e3:.1f} ms" + (f", TorchRL {peer_ms * 1e3:.1f} ms" if torchrl else "")))
        write_rows(args.json, figures)
        print(f"\nWeight push, MLP of {n_params / 1e6:.2f}M parameters to 2 actors, median of {args.repeats}:")
        print(table(rows), flush=True)
    finally:
        shutdown_ray_if_ours()


if __name__ == "__main__":
    main()
