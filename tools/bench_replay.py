"""reap-replay vs TorchRL, side by side in one run: extend, sample, prioritized sample+update.

Run with ``uv run --group bench python tools/bench_replay.py`` (``--quick`` for a short run).

Setup: a 1M-capacity ``LazyTensorStorage`` of rows with a 17-dim observation, a 6-dim action,
reward, done and next observation (TorchRL's layout: reward/done under ``"next"``).

* extend: ``TensorDictReplayBuffer.extend`` of 1,000 rows, while the buffer fills (every write
  lands on memory the kernel has not mapped yet: page faults weigh on both libraries alike), then
  once it is full (overwriting, as in a long training run);
* sample: ``sample(256)`` from 100k rows;
* prioritized: ``TensorDictPrioritizedReplayBuffer.sample(256)`` + ``update_priority`` of the
  256 sampled indices, at 100k rows, then at 1M (full).

TorchRL's prioritized sampler needs its C++ extension (``torchrl._torchrl``). When the wheel's
binary does not load against the installed torch, this script compiles TorchRL's own shipped
segment-tree sources (``torchrl/csrc/segment_tree.h``) against it, once, into a cache folder,
and plugs them in, so the comparison is against TorchRL's real C++ tree. If that is impossible
it says so and prints TorchRL's prioritized column as unavailable.

``--device cuda`` runs the GPU table instead: the whole buffer on the GPU (storage, priority tree)
against reap on the CPU and TorchRL with the same CUDA storage; extend 10,000 rows, uniform
sample 256, slice sample 256, prioritized sample+update 256 at 1M full, and the tree alone on
each of its paths. Every timed loop ends with a device sync, so a figure is the time per call of
a long run of calls, launches and kernels included.

Timings are medians over rounds, reap's and TorchRL's rounds taking turns. The ratio is the
median over rounds of TorchRL's time / reap's time in the same round (>1: reap is faster): this
machine's speed drifts between rounds, and a round's two timings share its drift.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
import warnings

import torch
from tensordict import TensorDict

sys.path.insert(0, os.path.dirname(__file__))
from bench_collect import results_in_turns  # noqa: E402
from bench_json import add_json_option, row, write_rows  # noqa: E402

CAPACITY = 1_000_000
FILLED = 100_000
EXTEND_ROWS = 1_000
BATCH = 256
#: How the README's speed table names each operation.
TABLE_NAMES = {"extend 1000, filling": "extend 1,000 transitions, buffer filling",
               "extend 1000, full": "extend 1,000 transitions, buffer full",
               "sample 256": "uniform sample 256",
               "prioritized 256, 100k filled": "prioritized sample + update 256, 100k of 1M filled",
               "prioritized 256, 1M filled": "prioritized sample + update 256, 1M of 1M filled"}


def make_batch(n: int) -> TensorDict:
    return TensorDict(
        {
            "observation": torch.randn(n, 17),
            "action": torch.randn(n, 6),
            "done": torch.zeros(n, 1, dtype=torch.bool),
            "next": {
                "observation": torch.randn(n, 17),
                "reward": torch.randn(n, 1),
                "done": torch.zeros(n, 1, dtype=torch.bool),
            },
        },
        [n],
    )


def per_call_us(fn, iters: int) -> float:
    """Mean time of ``iters`` calls of ``fn``, in microseconds (what a GPU still runs included)."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - start) / iters * 1e6


def timeit(fns: list, iters: int, rounds: int) -> list[list[float]]:
    """Each function's mean call time in each of ``rounds`` rounds, in microseconds.

    The functions take turns round by round (see ``results_in_turns``).
    """
    for fn in fns:
        fn()
    cases = {i: functools.partial(per_call_us, fn) for i, fn in enumerate(fns)}
    return list(results_in_turns(cases, rounds, iters).values())


def torchrl_prioritized_status() -> str | None:
    """Makes TorchRL's C++ segment trees importable; returns why not, or None if they work."""
    import torchrl.data.replay_buffers.samplers.prioritized as prio

    if prio.SumSegmentTreeFp32 is not None:
        return None
    try:
        import torchrl
        from torch.utils.cpp_extension import load_inline

        csrc = os.path.join(os.path.dirname(torchrl.__file__), "csrc")
        build = os.path.join(
            os.path.expanduser("~"), ".cache", "reap-bench", f"torchrl-trees-{torch.__version__}"
        )
        os.makedirs(build, exist_ok=True)
        source = (
            '#include "segment_tree.h"\n'
            "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
            '  torchrl::DefineSumSegmentTree<float>("Fp32", m);\n'
            '  torchrl::DefineSumSegmentTree<double>("Fp64", m);\n'
            '  torchrl::DefineMinSegmentTree<float>("Fp32", m);\n'
            '  torchrl::DefineMinSegmentTree<double>("Fp64", m);\n'
            "}\n"
        )
        print("building TorchRL's C++ segment trees against this torch (cached)...", flush=True)
        ext = load_inline(
            "torchrl_segment_trees",
            cpp_sources=[source],
            extra_include_paths=[csrc],
            build_directory=build,
            extra_cflags=["-O3"],
        )
    except Exception as err:  # noqa: BLE001 - reported, not hidden
        return f"TorchRL's C++ extension does not load and could not be rebuilt: {err}"
    for name in ("SumSegmentTreeFp32", "SumSegmentTreeFp64", "MinSegmentTreeFp32", "MinSegmentTreeFp64"):
        setattr(prio, name, getattr(ext, name))
    return None


def cases(lib: str) -> dict:
    """``{operation: fn}`` for one library, its buffers built and filled."""
    if lib == "reap":
        from reap_replay import (
            LazyTensorStorage,
            TensorDictPrioritizedReplayBuffer,
            TensorDictReplayBuffer,
        )
    else:
        from torchrl.data import (
            LazyTensorStorage,
            TensorDictPrioritizedReplayBuffer,
            TensorDictReplayBuffer,
        )
    out = {}
    batches = [make_batch(EXTEND_ROWS) for _ in range(4)]
    k = iter(range(1 << 60))
    writes = TensorDictReplayBuffer(storage=LazyTensorStorage(CAPACITY), batch_size=BATCH)
    out["extend 1000, filling"] = lambda: writes.extend(batches[next(k) % 4])
    full = TensorDictReplayBuffer(storage=LazyTensorStorage(CAPACITY), batch_size=BATCH)
    for i in range(CAPACITY // EXTEND_ROWS):
        full.extend(batches[i % 4])
    out["extend 1000, full"] = lambda: full.extend(batches[next(k) % 4])
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(CAPACITY), batch_size=BATCH)
    for _ in range(FILLED // EXTEND_ROWS):
        rb.extend(make_batch(EXTEND_ROWS))
    out["sample 256"] = rb.sample
    if lib == "torchrl" and (why := torchrl_prioritized_status()) is not None:
        print(f"TorchRL prioritized: unavailable ({why})")
        return out
    new_priority = [torch.rand(BATCH) for _ in range(8)]
    for filled, name in ((FILLED, "100k"), (CAPACITY, "1M")):
        prb = TensorDictPrioritizedReplayBuffer(
            alpha=0.7, beta=0.5, storage=LazyTensorStorage(CAPACITY), batch_size=BATCH
        )
        for i in range(filled // EXTEND_ROWS):
            prb.extend(batches[i % 4])
        prb.update_priority(torch.arange(filled), torch.rand(filled) * 10)

        def prioritized(prb=prb):
            sample = prb.sample()
            prb.update_priority(sample["index"], new_priority[next(k) % 8])

        out[f"prioritized 256, {name} filled"] = prioritized
    return out


def bench_tree_paths(iters: int, rounds: int) -> dict[str, float]:
    """reap's ``PriorityTree`` alone, sample+update 256 at 100k filled, on each CPU path.

    The CPU default runs the tree's index work on NumPy views of its tensors; ``use_numpy=False``
    is the pure torch-op path that CUDA runs.
    """
    from reap_replay import PriorityTree

    steps = {}
    for name, use_numpy in (("NumPy views (CPU default)", True), ("torch ops (CUDA path)", False)):
        tree = PriorityTree(CAPACITY, use_numpy=use_numpy)
        tree.update(torch.arange(FILLED), torch.rand(FILLED) * 10)
        gen = torch.Generator().manual_seed(0)
        values = [torch.rand(BATCH) for _ in range(8)]
        k = iter(range(1 << 60))

        def step(tree=tree, gen=gen, values=values, k=k):
            index, _ = tree.sample_with_weights(torch.rand(BATCH, generator=gen, dtype=torch.float64), 0.5)
            tree.update(index, values[next(k) % 8])

        steps[name] = step
    times = timeit(list(steps.values()), iters, rounds)
    return {name: statistics.median(t) for name, t in zip(steps, times)}


def filled_buffer(lib: str, kind: str, device: str):
    """A full 1M buffer of ``lib`` (``"reap"`` or ``"torchrl"``) on ``device``: ``kind`` is
    ``"uniform"``, ``"slice"`` (trajectories of 100 steps, slices of 8) or ``"prioritized"``."""
    mod = __import__("reap_replay" if lib == "reap" else "torchrl.data", fromlist=["x"])
    storage = mod.LazyTensorStorage(CAPACITY, device=device)
    if kind == "prioritized":
        rb = mod.TensorDictPrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=storage, batch_size=BATCH)
    elif kind == "slice":
        rb = mod.TensorDictReplayBuffer(storage=storage, batch_size=BATCH,
                                        sampler=mod.SliceSampler(slice_len=8, traj_key="traj"))
    else:
        rb = mod.TensorDictReplayBuffer(storage=storage, batch_size=BATCH)
    rows = min(100_000, CAPACITY // 10)
    chunk = make_batch(rows)
    chunk["traj"] = torch.arange(rows) // 100
    for _ in range(CAPACITY // rows):
        chunk["traj"] += 1000
        rb.extend(chunk.to(device))
    if kind == "prioritized":
        rb.update_priority(torch.arange(CAPACITY, device=device), torch.rand(CAPACITY, device=device) * 10)
    return rb


def device_cases(lib: str, device: str) -> dict:
    """``{operation: fn}`` of the GPU table for one library with its storage on ``device``."""
    out = {}
    rows = make_batch(EXTEND_ROWS * 10)
    rows["traj"] = torch.zeros(EXTEND_ROWS * 10, dtype=torch.int64)
    rows = rows.to(device)
    uniform = filled_buffer(lib, "uniform", device)
    out["extend 10,000, full"] = lambda: uniform.extend(rows)
    out["uniform sample 256"] = uniform.sample
    out["slice sample 256 (32 x 8)"] = filled_buffer(lib, "slice", device).sample
    if lib == "torchrl":
        import torchrl.data.replay_buffers.samplers.prioritized as prio

        if prio.SumSegmentTreeFp32 is None:
            print(f"TorchRL prioritized on {device}: unavailable (its C++ segment tree does not load against "
                  f"torch {torch.__version__}; not rebuilt here)")
            return out
    prb = filled_buffer(lib, "prioritized", device)
    new = [torch.rand(BATCH, device=device) for _ in range(8)]
    k = iter(range(1 << 60))

    def prioritized():
        sample, info = prb.sample(return_info=True)
        prb.update_priority(info["index"], new[next(k) % 8])

    out["prioritized 256, 1M full"] = prioritized
    return out


def device_tree_paths(device: str, iters: int, rounds: int) -> dict[str, float]:
    """reap's PriorityTree alone, sample+update 256 at 1M full, on each path that runs on ``device``
    (and NumPy on the CPU for reference)."""
    from reap_replay import PriorityTree

    steps = {}
    for name, dev, backend in ((f"triton kernels ({device})", device, "triton"), (f"torch ops ({device})", device, "torch"),
                               ("NumPy views (cpu)", "cpu", "numpy")):
        tree = PriorityTree(CAPACITY, device=dev, backend=backend)
        tree.update(torch.arange(CAPACITY, device=dev), torch.rand(CAPACITY, device=dev) * 10)
        gen = torch.Generator().manual_seed(0)
        values = [torch.rand(BATCH, device=dev) for _ in range(8)]
        k = iter(range(1 << 60))

        def step(tree=tree, gen=gen, values=values, k=k, dev=dev):
            uniform = torch.rand(BATCH, generator=gen, dtype=torch.float64)
            index, _ = tree.sample_with_weights(uniform.to(dev), 0.4)
            tree.update(index, values[next(k) % 8])

        def sample_only(tree=tree, gen=gen, dev=dev):
            tree._stale = True  # as after an update
            tree.sample_with_weights(torch.rand(BATCH, generator=gen, dtype=torch.float64).to(dev), 0.4)

        index = torch.randint(CAPACITY, (BATCH,), device=dev)

        def update_only(tree=tree, values=values, k=k, index=index):
            tree.update(index, values[next(k) % 8])

        steps[f"{name} [{tree.backend}]"] = step
        steps[f"  {tree.backend}: sample alone"] = sample_only
        steps[f"  {tree.backend}: update alone"] = update_only
    times = timeit(list(steps.values()), iters, rounds)
    return {name: statistics.median(t) for name, t in zip(steps, times)}


def main_device(device: str, iters: int, rounds: int) -> None:
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else device
    print(f"\n{name}, torch {torch.__version__}, capacity {CAPACITY:,}, batch {BATCH}")
    libs = {"reap": device_cases("reap", device), "reap on the CPU": device_cases("reap", "cpu")}
    try:
        import torchrl  # noqa: F401

        libs["TorchRL"] = device_cases("torchrl", device)
    except ImportError as err:
        print(f"TorchRL: not installed ({err})")
    heads = list(libs)
    print(f"{'operation':<30}" + "".join(f"{h + ' (us)':>22}" for h in heads) + f"{'vs reap CPU':>13}{'vs TorchRL':>12}")
    for op in libs["reap"]:
        fns = [libs[h][op] for h in heads if op in libs[h]]
        times = timeit(fns, iters, rounds)
        got = dict(zip([h for h in heads if op in libs[h]], times))
        cells = "".join(f"{statistics.median(got[h]):>22.1f}" if h in got else f"{'n/a':>22}" for h in heads)
        ratios = [f"{statistics.median(t / m for m, t in zip(got['reap'], got[h])):.2f}x" if h in got else "n/a"
                  for h in ("reap on the CPU", "TorchRL")]
        print(f"{op:<30}{cells}{ratios[0]:>13}{ratios[1]:>12}")
    print("\nreap's PriorityTree alone, sample+update 256 at 1M full:")
    for label, us in device_tree_paths(device, iters, rounds).items():
        print(f"  {label:<40}{us:>10.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--device", default="cpu", help="cuda: the GPU table (whole buffer on the GPU)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    add_json_option(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("RL_WARNINGS", "0")
    iters, rounds = (50, 3) if args.quick else (100, 11)
    try:
        import torchrl  # noqa: F401
    except ImportError:
        sys.exit("TorchRL is not installed: run with `uv run --group bench python tools/bench_replay.py`")
    import logging

    logging.getLogger("torchrl").setLevel(logging.WARNING)
    if args.device != "cpu":
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            sys.exit(f"--device {args.device}: CUDA is not available here")
        main_device(args.device, iters, rounds)
        return
    reap, trl = cases("reap"), cases("torchrl")
    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} threads, capacity {CAPACITY:,}")
    print(f"{'operation':<32}{'reap (us)':>12}{'TorchRL (us)':>14}{'ratio':>9}")
    figures = []
    for name, fn in reap.items():
        if name not in trl:
            print(f"{name:<32}{statistics.median(timeit([fn], iters, rounds)[0]):>12.1f}{'n/a':>14}")
            continue
        mine, theirs = timeit([fn, trl[name]], iters, rounds)
        ratio = statistics.median(t / m for m, t in zip(mine, theirs))
        print(f"{name:<32}{statistics.median(mine):>12.1f}{statistics.median(theirs):>14.1f}{ratio:>8.2f}x")
        figures.append(row(TABLE_NAMES.get(name, name), reap_torchrl=ratio))
    write_rows(args.json, figures)
    print("\nreap's PriorityTree alone, sample+update 256 at 100k filled:")
    for name, us in bench_tree_paths(iters, rounds).items():
        print(f"  {name:<30}{us:>12.1f} us")


if __name__ == "__main__":
    main()
