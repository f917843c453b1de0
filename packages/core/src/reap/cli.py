"""The ``reap`` command: ``reap collect`` (the main job) and ``reap plugins``.

    reap collect --env Pendulum-v1 --frames 20000 --num-envs 8 --out runs/pendulum
    reap collect --env CartPole-v1 --frames 50000 --backend mp --workers 2 \\
        --policy mypkg.policies:make_policy --weights policy.safetensors
    reap plugins
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math
import os
import sys
import time
from pathlib import Path

import torch


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reap", description="Collect reinforcement-learning experience.")
    sub = parser.add_subparsers(dest="command", required=True)
    collect = sub.add_parser("collect", help="run envs under a policy and write the transitions")
    collect.add_argument("--env", required=True, help="gymnasium env id, e.g. CartPole-v1")
    collect.add_argument("--frames", type=int, required=True, help="frames to collect (rounded up to a batch)")
    collect.add_argument("--backend", default="local", help="local (default), mp, ray, or a plugin's backend")
    collect.add_argument("--workers", type=int, default=1, help="worker processes (backends other than local)")
    collect.add_argument("--num-envs", type=int, default=1, help="envs batched in each worker")
    collect.add_argument("--frames-per-batch", type=int, default=1000)
    collect.add_argument("--max-frames-per-traj", type=int, default=None)
    collect.add_argument("--policy", default=None, help="MODULE:FACTORY building the policy (default: random)")
    collect.add_argument("--weights", default=None, help="weights for the policy: .safetensors or a torch state dict")
    collect.add_argument("--seed", type=int, default=None)
    collect.add_argument("--out", default=None, help="directory to write the data to (memory-mapped tensors)")
    collect.add_argument("--no-progress", action="store_true", help="no progress bar")
    sub.add_parser("plugins", help="list the installed reap plugins and what they register")
    return parser


def fail(message: str) -> None:
    print(f"reap: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def load_policy(spec: str, env):
    """Build the policy named by ``MODULE:FACTORY``; the factory may take the env as argument."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        fail(f"--policy must look like MODULE:FACTORY, got {spec!r}")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        fail(f"--policy {spec!r} cannot be imported: {exc}")
    takes_env = bool(inspect.signature(factory).parameters)
    return factory(env) if takes_env else factory()


def load_weights(path: str) -> dict:
    """A state dict from a safetensors file or a torch file, never unpickling code."""
    file = Path(path)
    if not file.is_file():
        fail(f"--weights {path!r} does not exist")
    if file.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(file))
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:
        fail(f"--weights {path!r} is not a weights-only torch file (no code is unpickled): {exc}")
    if not isinstance(state, dict):
        fail(f"--weights {path!r} holds a {type(state).__name__}, expected a state dict")
    return state


def _make_env_fn(env_id: str, num_envs: int):
    from functools import partial

    return partial(_build_env, env_id, num_envs)


def _build_env(env_id: str, num_envs: int):
    from reap import GymEnv, RewardSum, TransformedEnv

    return TransformedEnv(GymEnv(env_id, num_envs=None if num_envs == 1 else num_envs), RewardSum())


class Writer:
    """Writes batches, flattened to ``[frames]``, into memory-mapped tensors under ``out``."""

    def __init__(self, out: str, capacity: int):
        self.path = Path(out)
        if self.path.exists() and any(self.path.iterdir()):
            fail(f"--out {out!r} exists and is not empty; choose a new directory")
        self.capacity = capacity
        self.data = None
        self.cursor = 0

    def write(self, batch) -> None:
        flat = batch.reshape(-1)
        if self.data is None:
            layout = flat[0]
            self.data = layout.expand(self.capacity).clone().zero_().memmap_(prefix=self.path)
        n = min(flat.shape[0], self.capacity - self.cursor)
        self.data[self.cursor : self.cursor + n] = flat[:n]
        self.cursor += n

    def close(self, meta: dict) -> None:
        if self.data is None:
            return
        self.data = None
        tmp = self.path / "reap_meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=2))
        os.replace(tmp, self.path / "reap_meta.json")


def collect(args) -> None:
    from tqdm import tqdm

    from reap import Collector, GymEnv

    for name in ("frames", "workers", "num_envs", "frames_per_batch"):
        if getattr(args, name) < 1:
            fail(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    import gymnasium as gym

    if args.env not in gym.registry:
        fail(f"--env {args.env!r} is not a registered gymnasium id")
    if args.workers > 1 and args.backend == "local":
        fail("--workers > 1 needs a multi-process backend, e.g. --backend mp")
    if args.weights and not args.policy:
        fail("--weights needs --policy (the factory that builds the module to load them into)")
    env_fn = _make_env_fn(args.env, args.num_envs)
    policy = None
    if args.policy:
        probe = GymEnv(args.env, num_envs=None if args.num_envs == 1 else args.num_envs)
        policy = load_policy(args.policy, probe)
        probe.close()
        if args.weights:
            if not isinstance(policy, torch.nn.Module):
                fail(f"--policy {args.policy!r} built a {type(policy).__name__}; weights need an nn.Module")
            try:
                policy.load_state_dict(load_weights(args.weights))
            except RuntimeError as exc:
                fail(f"--weights do not fit the policy: {exc}")
    kwargs = dict(frames_per_batch=args.frames_per_batch, total_frames=args.frames,
                  max_frames_per_traj=args.max_frames_per_traj)
    if args.backend == "local":
        collector = Collector(env_fn(), policy, **kwargs)
    else:
        collector = Collector([env_fn] * args.workers, policy, backend=args.backend, **kwargs)
    total = math.ceil(args.frames / collector.frames_per_batch) * collector.frames_per_batch
    writer = Writer(args.out, total) if args.out else None
    episodes, reward_sum, frames = 0, 0.0, 0
    start = time.perf_counter()
    with collector, tqdm(total=total, unit="frames", disable=args.no_progress, file=sys.stderr) as bar:
        if args.seed is not None:
            collector.set_seed(args.seed)
        for batch in collector:
            done = batch["next", "done"]
            finished = batch["next", "episode_reward"][done]
            episodes += finished.numel()
            reward_sum += float(finished.sum())
            frames += batch.numel()
            if writer is not None:
                writer.write(batch)
            bar.update(batch.numel())
            fps = frames / max(time.perf_counter() - start, 1e-9)
            mean = reward_sum / episodes if episodes else float("nan")
            bar.set_postfix(fps=f"{fps:,.0f}", episode_reward=f"{mean:.2f}")
    elapsed = time.perf_counter() - start
    mean = reward_sum / episodes if episodes else float("nan")
    if writer is not None:
        writer.close({"format": "reap-collect", "version": 1, "env": args.env, "frames": frames,
                      "episodes": episodes, "backend": args.backend, "workers": args.workers,
                      "num_envs": args.num_envs, "seed": args.seed})
    print(f"collected {frames} frames in {elapsed:.2f} s ({frames / elapsed:,.0f} frames/s), "
          f"{episodes} episodes, mean episode reward {mean:.2f}"
          + (f", written to {args.out}" if args.out else ""))


def plugins() -> None:
    from reap.plugins import get_registries

    registries = get_registries()
    for info in sorted(registries.plugins, key=lambda i: i.name):
        status = f"FAILED: {info.error}" if info.error else ", ".join(info.provides) or "(no registrations)"
        print(f"{info.name:<10} {info.distribution} {info.version}: {status}")


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "collect":
        collect(args)
    else:
        plugins()


if __name__ == "__main__":
    main()
