"""torch.distributed collection speed: reap's RPCCollector and DistributedCollector vs reap's
multi-process collectors (same envs) and TorchRL's RPCCollector and DistributedCollector
(``launcher="mp"``).

Every case runs 2 workers x 8 Pendulum-v1 envs with the same ``nn.Linear`` policy and ``--fpb``
frames a batch (sync: the total of one batch; async: each worker's batch is ``--fpb / 2``).
reap's cases of one mode are started together and take turns for ``--rounds`` rounds, each
measuring frames/s over whole batches; the medians are shown (start-up excluded). One RPC agent and one default
process group fit in a process, so each TorchRL case is built alone and takes turns with reap's
multi-process collector of the same mode: its ratio to TorchRL is the ratio of the two ratios.

    uv run --group bench python tools/bench_collect_rpc.py [--fpb 2048] [--rounds 3] [--no-torchrl]
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import socket
import statistics
import time
import warnings

import torch
from bench_collect import make_policy as linear_policy
from bench_collect import table
from bench_json import add_json_option, row, write_rows


def reap_pendulum():
    from reap import GymEnv

    return GymEnv("Pendulum-v1", num_envs=8)


def torchrl_pendulum():
    from torchrl.envs import GymEnv

    return GymEnv("Pendulum-v1", num_envs=8)


def module(net):
    from tensordict.nn import TensorDictModule

    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def rate(iterator, frames: int) -> float:
    """Frames/s over at least ``frames`` frames (whole batches) from a running iterator."""
    count, start = 0, time.perf_counter()
    while count < frames:
        count += next(iterator).numel()
    return count / (time.perf_counter() - start)


def started(collector):
    it = iter(collector)
    next(it)
    return collector, it


def turns(cases: dict, rounds: int, frames: int) -> dict:
    rates = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (_, it) in cases.items():
            rates[name].append(rate(it, frames))
    return {name: statistics.median(r) for name, r in rates.items()}


def _timeout(signum, frame):
    raise TimeoutError("no first batch within 180 s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fpb", type=int, default=2048, help="frames of one sync batch (2 x 8 envs)")
    parser.add_argument("--batches", type=int, default=4, help="sync batches' worth of frames per turn")
    parser.add_argument("--rounds", type=int, default=3, help="turns per case; the median is shown")
    parser.add_argument("--no-torchrl", action="store_true")
    parser.add_argument("--torchrl-only", action="store_true", help="only TorchRL's cases (ratios to reap's multi-process)")
    add_json_option(parser)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torchrl = not args.no_torchrl and importlib.util.find_spec("torchrl") is not None
    from reap import DistributedCollector, MultiAsyncCollector, MultiSyncCollector, RPCCollector

    policy = module(linear_policy("Pendulum-v1"))
    half, frames = args.fpb // 2, args.fpb * args.batches
    anchors = {"sync": lambda: MultiSyncCollector([reap_pendulum] * 2, policy, frames_per_batch=args.fpb),
               "async": lambda: MultiAsyncCollector([reap_pendulum] * 2, policy, frames_per_batch=half)}
    # TorchRL's cases first: its launcher forks workers from this process, and a fork taken after
    # reap's RPC driver ran here inherits its RPC state (init_rpc then fails in TorchRL's workers).
    peers = {}
    if torchrl:
        from torchrl.collectors.distributed import DistributedCollector as TLDist
        from torchrl.collectors.distributed import RPCCollector as TLRPC

        # TorchRL 0.14.1's async RPC/Distributed collectors never delivered a turn here (waited
        # 10 min), so only its sync cases are timed.
        print("torchrl async cases: not run (they did not deliver a batch in 10 minutes)", flush=True)
        for kind, sync, fpb in (("sync", True, args.fpb),):
            for name, cls in (("RPCCollector", TLRPC), ("DistributedCollector", TLDist)):
                label = f"torchrl {name} {kind}"
                signal.signal(signal.SIGALRM, _timeout)
                signal.alarm(180)
                try:
                    peer = started(cls([torchrl_pendulum] * 2, policy, frames_per_batch=fpb, total_frames=10**12,
                                       sync=sync, launcher="mp", tcp_port=str(free_port())))
                except Exception as exc:  # reported, the other cases still run
                    print(f"{label}: failed to start: {type(exc).__name__}: {exc}", flush=True)
                    continue
                finally:
                    signal.alarm(0)
                anchor = started(anchors[kind]())
                got = turns({label: peer, "anchor": anchor}, args.rounds, frames)
                peers[label] = got[label] / got["anchor"]  # relative to reap's multi-process collector
                print(f"{label}: {got[label]:,.0f} frames/s, {peers[label]:.3f} x reap multi-process", flush=True)
                for collector, _ in (peer, anchor):
                    try:
                        collector.shutdown()
                    except Exception as exc:  # TorchRL's shutdown can time out; the figures stand
                        print(f"{label}: shutdown failed: {type(exc).__name__}: {exc}", flush=True)

    med = {}
    for kind, sync, fpb in (("sync", True, args.fpb), ("async", False, half)):  # one RPC agent at a time
        if args.torchrl_only:
            break
        cases = {f"reap RPCCollector {kind}": started(RPCCollector([reap_pendulum] * 2, policy, frames_per_batch=fpb, sync=sync)),
                 f"reap DistributedCollector {kind}": started(
                     DistributedCollector([reap_pendulum] * 2, policy, frames_per_batch=fpb, sync=sync)),
                 f"reap multi-process {kind}": started(anchors[kind]())}
        med.update(turns(cases, args.rounds, frames))
        for collector, _ in cases.values():
            collector.shutdown()

    if args.torchrl_only:
        for label, ratio in peers.items():
            print(f"{label}: {ratio:.3f} x reap multi-process")
        return
    rows = [["collector (2 workers x 8 Pendulum envs)", "frames/s", "x reap multi-process", "x torchrl same class"]]
    figures = []
    for kind in ("sync", "async"):
        mp = med[f"reap multi-process {kind}"]
        for name in ("RPCCollector", "DistributedCollector"):
            ours = med[f"reap {name} {kind}"]
            peer = peers.get(f"torchrl {name} {kind}")
            rows.append([f"reap {name} {kind}", f"{ours:,.0f}", f"{ours / mp:.2f}",
                         f"{ours / mp / peer:.1f}" if peer else "-"])
            batch = f", {args.fpb:,} frames a batch" if kind == "sync" else ""
            figures.append(row(f"`{name}` {kind}, 2 workers × 8 envs, Pendulum{batch}", reap_torchrl=peer and ours / mp / peer,
                               note=f"{ours / mp:.2f}× reap's `Multi{kind.capitalize()}Collector`"))
        rows.append([f"reap multi-process {kind}", f"{mp:,.0f}", "1.00", ""])
        for name in ("RPCCollector", "DistributedCollector"):
            peer = peers.get(f"torchrl {name} {kind}")
            if peer:
                rows.append([f"torchrl {name} {kind}", "", f"{peer:.2f}", "1.0"])
    print(f"fpb={args.fpb}, {frames} frames a turn, median of {args.rounds} rounds")
    print(table(rows), flush=True)
    write_rows(args.json, figures)


if __name__ == "__main__":
    main()
