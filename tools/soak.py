"""Memory soak: does any process grow while a collector runs with a weight push every batch?

Each backend runs 2 workers x 8 Pendulum-v1 envs with a ~70k-parameter MLP policy; after every
batch the trainer nudges the weights and pushes them (``update_policy_weights_``), as a training
loop does. The resident set size (RSS) of the driver and of every worker process is sampled
every ``--every`` seconds, and the table shows, per process, RSS at the start of the
measurement, at the end, and the slope of a least-squares line over the last two thirds of the
run (the first third is warm-up: allocator pools, Ray's object store, lazy imports). A slope
near zero means memory levelled off; a steady positive slope is growth per batch or per push.

    uv run python tools/soak.py [--backends mp,ray,rpc] [--minutes 15] [--every 5] [--tracemalloc]

``--tracemalloc`` also lists the driver's Python allocation sites that grew most between the
end of the warm-up and the end of the run (native growth, inside Ray or torch, does not show).

Not part of the test suite (it runs for minutes per backend).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import torch
from torch import nn

PAGE = os.sysconf("SC_PAGE_SIZE")
BACKENDS = ("mp", "ray", "rpc")


def make_env():
    from reap import GymEnv

    return GymEnv("Pendulum-v1", num_envs=8)


def make_policy():
    from tensordict.nn import TensorDictModule

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(), nn.Linear(256, 1))
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def build(backend: str, policy, frames_per_batch: int):
    """The collector for ``backend`` (endless: ``total_frames=-1``)."""
    kwargs = {"frames_per_batch": frames_per_batch, "total_frames": -1}
    if backend == "mp":
        from reap import MultiSyncCollector

        return MultiSyncCollector([make_env] * 2, policy, **kwargs)
    if backend == "ray":
        from reap import RayCollector

        return RayCollector(make_env, policy, num_collectors=2, sync=True, **kwargs)
    if backend == "rpc":
        from reap import RPCCollector

        return RPCCollector([make_env] * 2, policy, sync=True, **kwargs)
    raise SystemExit(f"soak: unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")


def worker_pids(collector, backend: str) -> list[int]:
    if backend != "ray":
        return list(collector.worker_pids)
    from ray._private import state

    return [state.actors(actor._actor_id.hex()).get("Pid") for actor in collector.remote_collectors]


def rss_mb(pid: int) -> float | None:
    """Resident set size of ``pid`` in MiB, or None once it has gone."""
    try:
        resident = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident * PAGE / 2**20


def slope_per_minute(times: list[float], values: list[float]) -> float:
    """Least-squares slope of ``values`` over ``times`` (seconds), in units per minute."""
    mean_t, mean_v = statistics.fmean(times), statistics.fmean(values)
    var = sum((t - mean_t) ** 2 for t in times)
    if var == 0:
        return 0.0
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values)) / var


def soak(backend: str, minutes: float, every: float, frames_per_batch: int, trace: bool = False) -> list[tuple]:
    """Run one backend for ``minutes``; rows of (process, first MiB, last MiB, MiB/min, samples)."""
    policy = make_policy()
    collector = build(backend, policy, frames_per_batch)
    batches = 0
    samples: dict[str, list[tuple[float, float]]] = {}
    try:
        pids = {"driver": os.getpid()}
        pids.update({f"worker {i}": pid for i, pid in enumerate(worker_pids(collector, backend))})
        start = time.monotonic()
        next_sample = start
        end = start + 60 * minutes
        warm, warm_snapshot = start + 20 * minutes, None
        if trace:
            tracemalloc.start(8)
        for _ in collector:
            batches += 1
            with torch.no_grad():
                for p in policy.parameters():
                    p.add_(torch.randn_like(p), alpha=1e-4)
            collector.update_policy_weights_(policy)
            now = time.monotonic()
            if now >= next_sample:
                for name, pid in pids.items():
                    mb = rss_mb(pid)
                    if mb is not None:
                        samples.setdefault(name, []).append((now - start, mb))
                next_sample += every
            if trace and warm_snapshot is None and now >= warm:
                warm_snapshot = tracemalloc.take_snapshot()
            if now >= end:
                break
        if trace and warm_snapshot is not None:
            growth = tracemalloc.take_snapshot().compare_to(warm_snapshot, "traceback")
            tracemalloc.stop()
            print(f"{backend}: driver allocation sites that grew most after the warm-up:")
            for stat in growth[:8]:
                print(f"  {stat.size_diff / 2**10:+.1f} KiB in {stat.count_diff:+d} blocks")
                for line in stat.traceback.format()[-4:]:
                    print(f"    {line}")
    finally:
        collector.shutdown()
    rows = []
    for name, points in samples.items():
        tail = points[len(points) // 3:]
        times, values = [t for t, _ in tail], [v for _, v in tail]
        rows.append((name, points[0][1], points[-1][1], slope_per_minute(times, values), len(points)))
    print(f"{backend}: {batches} batches and weight pushes in {minutes:g} min", flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: mp, ray, rpc")
    parser.add_argument("--minutes", type=float, default=15.0, help="soak time per backend")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between RSS samples")
    parser.add_argument("--fpb", type=int, default=256, help="frames per batch (all workers)")
    parser.add_argument("--tracemalloc", action="store_true", help="list the driver's growing allocation sites")
    args = parser.parse_args(argv)
    table = []
    for backend in args.backends.split(","):
        for row in soak(backend.strip(), args.minutes, args.every, args.fpb, args.tracemalloc):
            table.append((backend.strip(), *row))
    print()
    print("| backend | process | RSS first (MiB) | RSS last (MiB) | slope, last 2/3 (MiB/min) | samples |")
    print("|---|---|---|---|---|---|")
    for backend, name, first, last, slope, n in table:
        print(f"| {backend} | {name} | {first:.1f} | {last:.1f} | {slope:+.2f} | {n} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
