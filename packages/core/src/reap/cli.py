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
from typing import NoReturn

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
    collect.add_argument("--out", default=None,
                         help="new directory for the data: a memory-mapped replay-buffer checkpoint")
    collect.add_argument("--no-progress", action="store_true", help="no progress bar")
    sub.add_parser("plugins", help="list the installed reap plugins and what they register")
    return parser


def fail(message: str) -> NoReturn:
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


class ReplayWriter:
    """Writes batches, flattened to ``[frames]``, into a reap-replay memory-mapped buffer at ``out``.

    The directory is a replay-buffer checkpoint (``meta.json`` plus the memmap files, written in
    place): reload it with ``TensorDictReplayBuffer(storage=LazyMemmapStorage.open(out))``.
    """

    def __init__(self, path: Path, capacity: int, storage_cls, buffer_cls):
        self.path = path
        self.buffer = buffer_cls(storage=storage_cls(capacity, scratch_dir=path, auto_cleanup=False))

    def write(self, batch) -> None:
        self.buffer.extend(batch.reshape(-1))

    def close(self) -> None:
        self.buffer.dumps(self.path)


class MemmapWriter:
    """Without reap-replay: batches, flattened to ``[frames]``, in a tensordict memmap at ``out``.

    Reload it with ``tensordict.TensorDict.load_memmap(out)``.
    """

    def __init__(self, path: Path, capacity: int):
        self.path = path
        self.capacity = capacity
        self.data = None
        self.cursor = 0

    def write(self, batch) -> None:
        flat = batch.reshape(-1)
        if self.data is None:
            self.data = flat[0].expand(self.capacity).clone().zero_().memmap_(prefix=self.path)
        n = min(flat.shape[0], self.capacity - self.cursor)
        self.data[self.cursor : self.cursor + n] = flat[:n]
        self.cursor += n

    def close(self) -> None:
        self.data = None


def check_out_dir(path: Path) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        fail(f"--out {str(path)!r} exists and is not an empty directory; choose a new directory")


def open_writer(out: str, capacity: int):
    """The writer for ``--out``: a reap-replay buffer when installed, else a tensordict memmap."""
    from reap.plugins import PluginNotInstalledError, resolve_export

    path = Path(out)  # collect() has checked it is new or empty
    try:
        storage_cls = resolve_export("LazyMemmapStorage")
        buffer_cls = resolve_export("TensorDictReplayBuffer")
    except PluginNotInstalledError:
        print("reap: reap-replay is not installed, so --out gets a plain tensordict memmap "
              "(install reap-replay for a replay-buffer checkpoint)", file=sys.stderr)
        return MemmapWriter(path, capacity)
    return ReplayWriter(path, capacity, storage_cls, buffer_cls)


def write_run_meta(path: Path, meta: dict) -> None:
    """``reap_meta.json`` beside the data: what was collected, written atomically."""
    tmp = path / "reap_meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, path / "reap_meta.json")


def collect(args) -> None:
    from tqdm import tqdm

    from reap import Collector, GymEnv
    from reap.plugins import PluginNotInstalledError

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
    if args.out:
        check_out_dir(Path(args.out))
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
    try:
        if args.backend == "local":
            collector = Collector(env_fn(), policy, **kwargs)
        else:
            collector = Collector([env_fn] * args.workers, policy, backend=args.backend, **kwargs)
    except PluginNotInstalledError as exc:
        fail(f"--backend {args.backend!r}: {exc}")
    total = math.ceil(args.frames / collector.frames_per_batch) * collector.frames_per_batch
    writer = open_writer(args.out, total) if args.out else None
    episodes, reward_sum, frames = 0, 0.0, 0
    start = time.perf_counter()
    bar = tqdm(total=total, unit="frames", disable=args.no_progress, file=sys.stderr,
               bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} frames [{elapsed}{postfix}]")
    with collector, bar:
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
        writer.close()
        write_run_meta(writer.path, {
            "format": "reap-collect", "version": 1, "env": args.env, "frames": frames,
            "episodes": episodes, "backend": args.backend, "workers": args.workers,
            "num_envs": args.num_envs, "seed": args.seed, "writer": type(writer).__name__})
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
