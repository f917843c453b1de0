"""PPO on CartPole-v1 with reap, top to bottom.

    uv run python examples/ppo_cartpole.py --backend mp

reap's collector gathers batches of [workers, envs, steps] frames; reap-value's GAE computes
advantages; a reap-replay buffer with SamplerWithoutReplacement deals the minibatches of each
epoch; the clipped PPO loss is written out below. ``--backend`` (local, mp, threads, ray, rpc,
distributed) changes only the line that builds the collector. The run stops once the mean
return of the last 20 episodes reaches ``--target-return`` (195, CartPole-v1's "solved"), or
after ``--total-frames``.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from torch import nn
from torch.distributions import Categorical

from reap import (
    GAE,
    Collector,
    GymEnv,
    LazyTensorStorage,
    RewardSum,
    SamplerWithoutReplacement,
    TensorDictReplayBuffer,
    TransformedEnv,
)

BACKENDS = ("local", "mp", "threads", "ray", "rpc", "distributed")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, default="mp")
    parser.add_argument("--workers", type=int, default=2, help="collector workers (not for local)")
    parser.add_argument("--mp-start-method", choices=("spawn", "forkserver", "fork"), default="spawn",
                        help="how the mp backend starts its workers (forkserver: each is a fork of one process "
                             "that imported reap)")
    parser.add_argument("--envs-per-worker", type=int, default=8)
    parser.add_argument("--frames-per-batch", type=int, default=2048)
    parser.add_argument("--total-frames", type=int, default=150_000)
    parser.add_argument("--target-return", type=float, default=195.0)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--minibatch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--lmbda", type=float, default=0.95)
    parser.add_argument("--clip", type=float, default=0.2)
    parser.add_argument("--entropy-coef", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the run's summary (returns, frames, versions) to this file")
    return parser.parse_args(argv)


def make_env(num_envs: int = 8):
    # actions as indices, which torch's Categorical samples (TorchRL's default is one-hot);
    # RewardSum writes ("next", "episode_reward"): the return of each finished episode
    env = GymEnv("CartPole-v1", num_envs=num_envs, categorical_action_encoding=True)
    return TransformedEnv(env, RewardSum())


def mlp(out: int) -> nn.Module:
    return nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out))


class EnvFactory:
    """A picklable ``make_env`` with its number of envs (for worker processes and actors)."""

    def __init__(self, num_envs: int):
        self.num_envs = num_envs

    def __call__(self):
        return make_env(self.num_envs)


def main(args) -> dict:
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    # ---- the agent: a categorical actor and a value network -------------------------------
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(mlp(2), in_keys=["observation"], out_keys=["logits"]),
        ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=Categorical,
                                      return_log_prob=True, log_prob_key="sample_log_prob"),
    )
    critic = TensorDictModule(mlp(1), in_keys=["observation"], out_keys=["state_value"])
    advantage = GAE(gamma=args.gamma, lmbda=args.lmbda, value_network=critic, average_gae=True)
    optimizer = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=args.lr)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(args.frames_per_batch),
                                    sampler=SamplerWithoutReplacement(), batch_size=args.minibatch_size)

    # ---- the collector: the one line that --backend changes --------------------------------
    envs = EnvFactory(args.envs_per_worker)
    if args.backend == "local":
        collector = Collector(envs(), actor, frames_per_batch=args.frames_per_batch, total_frames=args.total_frames)
    else:
        options = {"mp_start_method": args.mp_start_method} if args.backend == "mp" else {}
        # worker_tags: each batch says which weights made it, ("collector", "policy_version")
        collector = Collector([envs] * args.workers, actor, backend=args.backend, sync=True,  # PPO is on-policy
                              frames_per_batch=args.frames_per_batch, total_frames=args.total_frames,
                              worker_tags=True, **options)

    returns, log, frames, solved_at = [], [], 0, None
    start = time.perf_counter()
    with collector:
        collector.set_seed(args.seed)
        for i, batch in enumerate(collector):
            frames += batch.numel()
            done = batch["next", "done"]
            returns += batch["next", "episode_reward"][done].tolist()
            recent = sum(returns[-20:]) / max(1, len(returns[-20:]))

            with torch.no_grad():
                # on-policy check: the batch was collected with the weights pushed last, so the
                # trainer's actor gives its actions the log-probabilities recorded in the batch
                lag = (actor.get_dist(batch).log_prob(batch["action"]) - batch["sample_log_prob"]).abs().max()
                advantage(batch)  # writes "advantage" and "value_target", time along the last dim
            version = batch.get(("collector", "policy_version"), None)
            log.append({"batch": i, "frames": frames, "episodes": len(returns), "mean_return_20": recent,
                        "logprob_lag": lag.item(),
                        "policy_version": None if version is None else version.unique().tolist()})
            print(f"batch {i:3d}  frames {frames:7d}  return(20) {recent:6.1f}  logprob lag {lag.item():.1e}",
                  flush=True)
            if len(returns) >= 20 and recent >= args.target_return:
                solved_at = frames
                break

            # ---- PPO: a few epochs of clipped policy-gradient steps over the batch -------------
            for group in optimizer.param_groups:  # linear learning-rate decay over the run
                group["lr"] = args.lr * max(0.05, 1.0 - frames / args.total_frames)
            buffer.empty()
            buffer.extend(batch.reshape(-1))
            for _ in range(args.epochs):
                for minibatch in buffer:
                    dist = actor.get_dist(minibatch)
                    log_ratio = dist.log_prob(minibatch["action"]) - minibatch["sample_log_prob"]
                    ratio = log_ratio.exp()
                    adv = minibatch["advantage"].squeeze(-1)
                    clipped = ratio.clamp(1 - args.clip, 1 + args.clip)
                    policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
                    value_loss = (critic(minibatch)["state_value"] - minibatch["value_target"]).pow(2).mean()
                    loss = policy_loss + 0.5 * value_loss - args.entropy_coef * dist.entropy().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_([*actor.parameters(), *critic.parameters()], 0.5)
                    optimizer.step()
            with torch.no_grad():  # how far the update moved the policy on this batch
                moved = (actor.get_dist(batch).log_prob(batch["action"]) - batch["sample_log_prob"]).abs().max()
            log[-1]["logprob_moved"] = moved.item()
            collector.update_policy_weights_()  # the workers load the new weights before their next rollout

    summary = {"backend": args.backend, "seed": args.seed, "frames": frames, "solved_at": solved_at,
               "final_mean_return_20": recent, "episodes": len(returns), "wall_s": time.perf_counter() - start,
               "log": log}
    print(f"{args.backend}: {'solved' if solved_at else 'not solved'} after {frames} frames, "
          f"mean return of the last 20 episodes {recent:.1f}, {summary['wall_s']:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f)
    return summary


if __name__ == "__main__":
    main(parse_args())
