"""Multi-process collection speed: reap's MultiSync/MultiAsync vs TorchRL's, side by side.

Cases, one after the other in this process, the same ``nn.Linear`` policy everywhere:

* Pendulum-v1 and CartPole-v1, 2 workers x 8 envs: reap MultiSync / MultiAsync, TorchRL
  MultiSync / MultiAsync, and reap's single-process ``Collector`` over 16 envs (on 2 cores a
  cheap env cannot gain from processes; the multi-process collectors must not lose much).
* ``BusyEchoEnv`` (each env step burns ``--busy-ms`` of CPU): 2 workers x 4 envs vs one process
  with 8 envs.
* Weight sync of a ~1M-parameter MLP to 2 workers: median ``update_policy_weights_`` latency.

Frames/s are measured after the first batch (worker start-up excluded).

    uv run --group bench python tools/bench_collect_mp.py [--frames 100000] [--no-torchrl]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import statistics
import time
import warnings

import torch
from bench_collect import ENVS, table
from bench_collect import make_policy as linear_policy
from bench_json import add_json_option, row, write_rows
from torch import nn


def make_policy(env_id: str):
    from tensordict.nn import TensorDictModule

    return TensorDictModule(linear_policy(env_id), in_keys=["observation"], out_keys=["action"])


def big_mlp(obs_dim: int = 3) -> nn.Module:
    from tensordict.nn import TensorDictModule

    net = nn.Sequential(nn.Linear(obs_dim, 1000), nn.Tanh(), nn.Linear(1000, 1000), nn.Tanh(),
                        nn.Linear(1000, 1))
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def reap_env(env_id: str, num_envs: int):
    from reap import GymEnv

    return GymEnv(env_id, num_envs=num_envs, categorical_action_encoding=True)  # as torchrl_env's


def torchrl_env(env_id: str, num_envs: int):
    from torchrl.envs import GymEnv

    return GymEnv(env_id, num_envs=num_envs, categorical_action_encoding=True)


def busy_env(num_envs: int, step_ms: float):
    from reap_testing import BusyEchoEnv

    return BusyEchoEnv(num_envs, step_cost=step_ms / 1000)


def measure(collector, frames: int) -> float:
    """Frames/s over ``frames`` frames collected after the first batch."""
    it = iter(collector)
    next(it)
    count, start = 0, time.perf_counter()
    while count < frames:
        batch = next(it)
        count += batch.numel()
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return count / elapsed


def reap_single(make, policy, frames, fpb) -> float:
    from reap import Collector

    return measure(Collector(make(), policy, frames_per_batch=fpb), frames)


def reap_multi(sync, make, policy, frames, fpb, workers=2) -> float:
    from reap import MultiAsyncCollector, MultiSyncCollector

    cls = MultiSyncCollector if sync else MultiAsyncCollector
    per = fpb if sync else fpb // workers  # async: each yield is one worker's batch
    return measure(cls([make] * workers, policy, frames_per_batch=per), frames)


def torchrl_multi(sync, make, policy, frames, fpb, workers=2) -> float:
    from torchrl.collectors import MultiAsyncCollector, MultiSyncCollector

    cls = MultiSyncCollector if sync else MultiAsyncCollector
    per = fpb if sync else fpb // workers
    return measure(cls([make] * workers, policy, frames_per_batch=per, total_frames=-1), frames)


def latency(collector, policy, repeats: int) -> float:
    """Median seconds of ``update_policy_weights_`` with fresh weights (workers collecting)."""
    from tensordict import TensorDict

    it = iter(collector)
    next(it)
    weights = TensorDict.from_module(policy).data.clone()
    times = []
    for _ in range(repeats):
        weights.apply_(lambda x: x.add_(1e-3))
        start = time.perf_counter()
        collector.update_policy_weights_(weights)
        times.append(time.perf_counter() - start)
        next(it)
    collector.shutdown()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=100_000, help="frames measured per reap case")
    parser.add_argument("--torchrl-frames", type=int, default=20_000, help="frames per TorchRL case")
    parser.add_argument("--fpb", type=int, default=1600, help="frames per (sync) batch")
    parser.add_argument("--envs", nargs="*", default=list(ENVS))
    parser.add_argument("--busy-ms", type=float, default=1.0)
    parser.add_argument("--busy-frames", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=30, help="weight pushes timed")
    parser.add_argument("--no-torchrl", action="store_true")
    parser.add_argument("--skip", nargs="*", default=[], help="cheap, busy, weights")
    add_json_option(parser)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torchrl = not args.no_torchrl and importlib.util.find_spec("torchrl") is not None

    rows = [["env", "collector", "frames/s", "x torchrl same kind", "x reap Collector 16 envs"]]
    figures = []
    if "cheap" not in args.skip:
        for env_id in args.envs:
            policy = make_policy(env_id)
            make8 = functools.partial(reap_env, env_id, 8)
            single = reap_single(functools.partial(reap_env, env_id, 16), policy, args.frames, args.fpb)
            results = {}
            for sync in (True, False):
                name = "MultiSync" if sync else "MultiAsync"
                fps = reap_multi(sync, make8, policy, args.frames, args.fpb)
                peer = (torchrl_multi(sync, functools.partial(torchrl_env, env_id, 8), policy,
                                      args.torchrl_frames, args.fpb) if torchrl else None)
                results[name] = (fps, peer)
            rows.append([env_id, "reap Collector, 1 proc x 16 envs", f"{single:,.0f}", "", "1.00"])
            for name, (fps, peer) in results.items():
                rows.append([env_id, f"reap {name}, 2 x 8 envs", f"{fps:,.0f}",
                             f"{fps / peer:.1f}" if peer else "-", f"{fps / single:.2f}"])
                figures.append(row(f"`{name}Collector`, 2 workers × 8 envs, {env_id.split('-')[0]}",
                                   reap_torchrl=peer and fps / peer))
                if peer:
                    rows.append([env_id, f"torchrl {name}, 2 x 8 envs", f"{peer:,.0f}", "1.0",
                                 f"{peer / single:.2f}"])
        print(table(rows), flush=True)

    if "busy" not in args.skip:
        print(f"\nBusyEnv ({args.busy_ms:g} ms of CPU per env step), 8 envs in all:")
        from tensordict.nn import TensorDictModule

        policy = TensorDictModule(nn.Linear(2, 1), in_keys=["observation"], out_keys=["action"])
        fpb = 160
        one = reap_single(functools.partial(busy_env, 8, args.busy_ms), policy, args.busy_frames, fpb)
        two = reap_multi(True, functools.partial(busy_env, 4, args.busy_ms), policy, args.busy_frames, fpb)
        two_async = reap_multi(False, functools.partial(busy_env, 4, args.busy_ms), policy,
                               args.busy_frames, fpb)
        print(table([["collector", "frames/s", "x one process"],
                     ["reap Collector, 1 proc x 8 envs", f"{one:,.1f}", "1.00"],
                     ["reap MultiSync, 2 x 4 envs", f"{two:,.1f}", f"{two / one:.2f}"],
                     ["reap MultiAsync, 2 x 4 envs", f"{two_async:,.1f}", f"{two_async / one:.2f}"]]),
              flush=True)
        figures.append(row(f"env of {args.busy_ms:g} ms a step: 2 workers × 4 envs against 1 process × 8 envs",
                           note=f"`MultiSyncCollector` {two / one:.2f}×, `MultiAsyncCollector` {two_async / one:.2f}×"))

    if "weights" not in args.skip:
        from reap import MultiSyncCollector

        policy = big_mlp()
        n_params = sum(p.numel() for p in policy.parameters())
        print(f"\nWeight sync, MLP of {n_params / 1e6:.2f}M parameters to 2 workers "
              f"(Pendulum-v1 x 8 envs each), median of {args.repeats}:")
        make8 = functools.partial(reap_env, "Pendulum-v1", 8)
        rows = [["collector", "scheme", "median ms"]]
        for scheme in ("shared_mem", "pipe"):
            c = MultiSyncCollector([make8] * 2, policy, frames_per_batch=160,
                                   weight_sync_schemes={"policy": scheme})
            rows.append(["reap MultiSync", scheme, f"{latency(c, policy, args.repeats) * 1e3:.2f}"])
        if torchrl:
            from torchrl.collectors import MultiSyncCollector as TorchRLMultiSync

            c = TorchRLMultiSync([functools.partial(torchrl_env, "Pendulum-v1", 8)] * 2, policy,
                                 frames_per_batch=160, total_frames=-1)
            rows.append(["torchrl MultiSync", "default", f"{latency(c, policy, args.repeats) * 1e3:.2f}"])
        print(table(rows), flush=True)
        ms = {r[1]: float(r[2]) for r in rows[1:]}
        peer_ms = ms.get("default")
        figures.append(row(f"weight push, {n_params / 1e6:.1f}M-parameter MLP to 2 workers, shared memory",
                           reap_torchrl=peer_ms and peer_ms / ms["shared_mem"],
                           note=f"{ms['shared_mem']:.1f} ms" + (f", TorchRL {peer_ms:.1f} ms" if peer_ms else "")))
    write_rows(args.json, figures)


if __name__ == "__main__":
    main()
