"""What reap-profiling costs: collection with profiling off, with the timing summary on, and with
the per-rollout hooks of reap-profiling unregistered (as if it were not installed).

The three cases take turns for ``--rounds`` rounds in this process and report median frames/s
(see ``bench_collect.py``); ratios are over "not installed".

    uv run python tools/bench_profiling.py [--frames 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))

from bench_collect import make_policy, median_in_turns, table  # noqa: E402
from bench_json import add_json_option, row, write_rows  # noqa: E402


def run(env_id: str, num_envs: int, frames: int, mode: str) -> float:
    from tensordict.nn import TensorDictModule

    from reap import Collector, GymEnv
    from reap.plugins import get_registries

    pm = get_registries().pm
    plugin = pm.get_plugin("profiling")
    if mode == "not installed" and plugin is not None:
        pm.unregister(plugin)
    try:
        policy = TensorDictModule(make_policy(env_id), in_keys=["observation"], out_keys=["action"])
        env = GymEnv(env_id, num_envs=None if num_envs == 1 else num_envs, categorical_action_encoding=True)
        with Collector(env, policy, frames_per_batch=1000, total_frames=frames) as collector:
            if mode == "timings on":
                collector.enable_profile(workers=[])
            start = time.perf_counter()
            count = sum(batch.numel() for batch in collector)
            elapsed = time.perf_counter() - start
    finally:
        if mode == "not installed" and plugin is not None:
            pm.register(plugin, name="profiling")
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--envs", nargs="*", default=["CartPole-v1", "Pendulum-v1"])
    add_json_option(parser)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    modes = ("not installed", "installed, off", "timings on")
    rows = [["env", "envs", "profiling", "frames/s", "x not installed"]]
    figures = []
    for env_id in args.envs:
        for num_envs in (1, 8):
            cases = {mode: (lambda e, n, f, m=mode: run(e, n, f, m)) for mode in modes}
            rates = median_in_turns(cases, args.rounds, env_id, num_envs, args.frames)
            base = rates["not installed"]
            for mode, fps in rates.items():
                rows.append([env_id, str(num_envs), mode, f"{fps:,.0f}", f"{fps / base:.3f}"])
            figures.append(row(f"`Collector` with reap-profiling, {env_id.split('-')[0]}, {num_envs} env{'s' * (num_envs > 1)}",
                               note=", ".join(f"{mode}: {rates[mode] / base:.3f}×" for mode in modes[1:])
                               + " the frames/s without it"))
    print(table(rows))
    write_rows(args.json, figures)


if __name__ == "__main__":
    main()
