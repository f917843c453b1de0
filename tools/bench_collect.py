"""Collection speed: reap vs the raw gymnasium loop (the ceiling) and TorchRL (the peer).

Every case runs the same ``nn.Linear`` policy (argmax over it for discrete actions) for the same
number of frames, in this process. The cases of one env take turns for ``--rounds`` rounds and
each reports its median frames/s, so a slow spell of the machine weighs on all of them alike.
Ratios are frames/s over the raw loop's.

    uv run --group bench python tools/bench_collect.py [--frames 20000] [--rounds 5] [--cases local]

TorchRL columns appear when torchrl is installed (the ``bench`` dependency group).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
import warnings

import gymnasium as gym
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
from bench_json import add_json_option, row, write_rows  # noqa: E402

ENVS = ("Pendulum-v1", "CartPole-v1")


class LinearPolicy(nn.Module):
    """``nn.Linear`` over the observation; argmax of it when the action space is discrete."""

    def __init__(self, obs_dim: int, act_dim: int, discrete: bool):
        super().__init__()
        self.linear = nn.Linear(obs_dim, act_dim)
        self.discrete = discrete

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        out = self.linear(observation)
        return out.argmax(-1) if self.discrete else out


def make_policy(env_id: str) -> LinearPolicy:
    env = gym.make(env_id)
    discrete = isinstance(env.action_space, gym.spaces.Discrete)
    act_dim = env.action_space.n if discrete else env.action_space.shape[0]
    torch.manual_seed(0)
    policy = LinearPolicy(env.observation_space.shape[0], act_dim, discrete)
    env.close()
    return policy


def raw_loop(env_id: str, num_envs: int, frames: int) -> float:
    """The ceiling: gymnasium stepped by hand, the policy called on ``torch.from_numpy(obs)``."""
    policy = make_policy(env_id)
    if num_envs == 1:
        env = gym.make(env_id)
    else:
        env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync")
    obs, _ = env.reset(seed=0)
    steps = frames // num_envs
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(steps):
            action = policy(torch.from_numpy(obs)).numpy()
            obs, reward, terminated, truncated, _ = env.step(action)
            if num_envs == 1 and (terminated or truncated):
                obs, _ = env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps * num_envs / elapsed


def reap_collector(env_id: str, num_envs: int, frames: int, frames_per_batch: int = 1000) -> float:
    from tensordict.nn import TensorDictModule

    from reap import Collector, GymEnv

    policy = TensorDictModule(make_policy(env_id), in_keys=["observation"], out_keys=["action"])
    # index actions (the policy's argmax), as TorchRL's case and the raw loop take them
    env = GymEnv(env_id, num_envs=None if num_envs == 1 else num_envs, categorical_action_encoding=True)
    with Collector(env, policy, frames_per_batch=frames_per_batch, total_frames=frames) as collector:
        start = time.perf_counter()
        count = sum(batch.numel() for batch in collector)
        elapsed = time.perf_counter() - start
    return count / elapsed


def torchrl_collector(env_id: str, num_envs: int, frames: int, frames_per_batch: int = 1000) -> float:
    from tensordict.nn import TensorDictModule
    from torchrl.collectors import Collector
    from torchrl.envs import GymEnv

    policy = TensorDictModule(make_policy(env_id), in_keys=["observation"], out_keys=["action"])
    kwargs = {"categorical_action_encoding": True}
    env = GymEnv(env_id, **kwargs) if num_envs == 1 else GymEnv(env_id, num_envs=num_envs, **kwargs)
    collector = Collector(env, policy, frames_per_batch=frames_per_batch, total_frames=frames)
    start = time.perf_counter()
    count = sum(batch.numel() for batch in collector)
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return count / elapsed


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows)


def results_in_turns(cases: dict, rounds: int, *args) -> dict:
    """``{name: [run(*args) per round]}`` for ``cases = {name: run}``, the runs taking turns.

    One round calls every case once, so a slow spell of the machine weighs on all of them alike.
    """
    results = {name: [] for name in cases}
    for _ in range(rounds):
        for name, run in cases.items():
            results[name].append(run(*args))
    return results


def median_in_turns(cases: dict, rounds: int, *args) -> dict:
    """``{name: median of run(*args)}`` over ``rounds`` rounds of :func:`results_in_turns`."""
    return {name: statistics.median(r) for name, r in results_in_turns(cases, rounds, *args).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5, help="turns per case; the median is shown")
    parser.add_argument("--envs", nargs="*", default=list(ENVS))
    parser.add_argument("--num-envs", nargs="*", type=int, default=[1, 8])
    parser.add_argument("--no-torchrl", action="store_true", help="skip TorchRL even if installed")
    parser.add_argument("--cases", nargs="*", default=["local"], help="local (and mp once installed)")
    add_json_option(parser)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    with_torchrl = not args.no_torchrl and importlib.util.find_spec("torchrl") is not None
    rows = [["env", "envs", "collector", "frames/s", "x raw", "x torchrl"]]
    figures = []
    for env_id in args.envs:
        for num_envs in args.num_envs:
            cases = {"raw gymnasium": raw_loop}
            if with_torchrl:
                cases["torchrl Collector"] = torchrl_collector
            if "local" in args.cases:
                cases["reap Collector"] = reap_collector
            rates = median_in_turns(cases, args.rounds, env_id, num_envs, args.frames)
            raw, peer = rates["raw gymnasium"], rates.get("torchrl Collector")
            for name, fps in rates.items():
                vs_peer = "" if peer is None or name == "raw gymnasium" else f"{fps / peer:.1f}"
                rows.append([env_id, str(num_envs), name, f"{fps:,.0f}", f"{fps / raw:.2f}", vs_peer])
            if "reap Collector" in rates:
                ours = rates["reap Collector"]
                figures.append(row(f"`Collector`, {env_id.split('-')[0]}, {num_envs} env{'s' * (num_envs > 1)}",
                                   reap_raw=ours / raw, torchrl_raw=peer and peer / raw,
                                   reap_torchrl=peer and ours / peer))
    print(table(rows))
    write_rows(args.json, figures)


if __name__ == "__main__":
    main()
