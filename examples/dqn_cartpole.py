"""DQN with prioritized replay on CartPole-v1 with reap, top to bottom.

    uv run python examples/dqn_cartpole.py

A ``MultiAsyncCollector`` (two worker processes) yields each worker's batch as soon as it is
done; the batches fill a ``TensorDictPrioritizedReplayBuffer``; each gradient step samples by
priority, weights the loss by the importance weights and writes the new TD errors back with
``update_priority``. The epsilon of the epsilon-greedy policy is a buffer of the policy module,
so it travels to the workers with the weights.
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import torch
from tensordict.nn import TensorDictModule
from torch import nn

from reap import (
    GymEnv,
    LazyTensorStorage,
    MultiAsyncCollector,
    RewardSum,
    TensorDictPrioritizedReplayBuffer,
    TransformedEnv,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--mp-start-method", choices=("spawn", "forkserver", "fork"), default="spawn",
                        help="how the workers start (forkserver: each is a fork of one process that imported reap)")
    parser.add_argument("--envs-per-worker", type=int, default=4)
    parser.add_argument("--frames-per-batch", type=int, default=128, help="per worker batch")
    parser.add_argument("--total-frames", type=int, default=40_000)
    parser.add_argument("--init-frames", type=int, default=1_000, help="frames in the buffer before learning")
    parser.add_argument("--updates-per-batch", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--eps-start", type=float, default=1.0)
    parser.add_argument("--eps-end", type=float, default=0.05)
    parser.add_argument("--eps-frames", type=int, default=15_000, help="frames over which epsilon decays")
    parser.add_argument("--target-update", type=int, default=250, help="gradient steps between target copies")
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--beta", type=float, default=0.4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the run's summary to this file")
    return parser.parse_args(argv)


class EnvFactory:
    """A picklable env constructor for the worker processes."""

    def __init__(self, num_envs: int):
        self.num_envs = num_envs

    def __call__(self):
        # actions as indices, as EpsilonGreedy picks them (TorchRL's default is one-hot)
        env = GymEnv("CartPole-v1", num_envs=self.num_envs, categorical_action_encoding=True)
        return TransformedEnv(env, RewardSum())


class EpsilonGreedy(nn.Module):
    """Q-network plus epsilon-greedy action choice; ``epsilon`` is a buffer (sent with the weights)."""

    def __init__(self, qnet: nn.Module, epsilon: float):
        super().__init__()
        self.qnet = qnet
        self.register_buffer("epsilon", torch.tensor(epsilon))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        greedy = self.qnet(observation).argmax(-1)
        explore = torch.rand(greedy.shape) < self.epsilon
        return torch.where(explore, torch.randint_like(greedy, 2), greedy)


def main(args) -> dict:
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    qnet = nn.Sequential(nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2))
    target = copy.deepcopy(qnet).requires_grad_(False)
    explorer = EpsilonGreedy(qnet, args.eps_start)
    policy = TensorDictModule(explorer, in_keys=["observation"], out_keys=["action"])
    optimizer = torch.optim.Adam(qnet.parameters(), lr=args.lr)
    buffer = TensorDictPrioritizedReplayBuffer(alpha=args.alpha, beta=args.beta, priority_key="td_error",
                                               storage=LazyTensorStorage(args.total_frames),
                                               batch_size=args.batch_size)

    collector = MultiAsyncCollector([EnvFactory(args.envs_per_worker)] * args.workers, policy,
                                    frames_per_batch=args.frames_per_batch, total_frames=args.total_frames,
                                    mp_start_method=args.mp_start_method,
                                    worker_tags=True)  # ("collector", "worker_id"): who delivered a batch
    returns, log, frames, steps = [], [], 0, 0
    start = time.perf_counter()
    with collector:
        collector.set_seed(args.seed)
        for batch in collector:
            frames += batch.numel()
            done = batch["next", "done"]
            returns += [(frames, r) for r in batch["next", "episode_reward"][done].tolist()]
            buffer.extend(batch.reshape(-1))  # new transitions get the highest priority so far
            if len(buffer) < args.init_frames:
                continue

            losses, weight_spread = [], []
            for _ in range(args.updates_per_batch):
                sample = buffer.sample()
                q = qnet(sample["observation"]).gather(-1, sample["action"].long().reshape(-1, 1)).squeeze(-1)
                with torch.no_grad():
                    next_q = target(sample["next", "observation"]).max(-1).values
                    not_done = (~sample["next", "terminated"]).squeeze(-1).float()
                    y = sample["next", "reward"].squeeze(-1) + args.gamma * not_done * next_q
                td_error = y - q
                # importance weights correct for sampling by priority
                loss = (sample["priority_weight"] * nn.functional.smooth_l1_loss(q, y, reduction="none")).mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(qnet.parameters(), 10.0)
                optimizer.step()
                buffer.update_priority(sample["index"], td_error.detach().abs())
                steps += 1
                if steps % args.target_update == 0:
                    target.load_state_dict(qnet.state_dict())
                losses.append(loss.item())
                weight_spread.append((sample["priority_weight"].max() - sample["priority_weight"].min()).item())

            explorer.epsilon.fill_(max(args.eps_end, args.eps_start - (args.eps_start - args.eps_end)
                                       * frames / args.eps_frames))
            worker = int(batch["collector", "worker_id"].flatten()[0])
            collector.update_policy_weights_(worker_ids=worker)  # the worker that just delivered
            recent = [r for _, r in returns[-20:]]
            log.append({"frames": frames, "loss": sum(losses) / len(losses), "epsilon": explorer.epsilon.item(),
                        "priority_weight_spread": max(weight_spread),
                        "mean_return_20": sum(recent) / max(1, len(recent))})
            if len(log) % 20 == 0:
                print(f"frames {frames:6d}  epsilon {explorer.epsilon.item():.2f}  loss {log[-1]['loss']:.3f}  "
                      f"return(20) {log[-1]['mean_return_20']:6.1f}", flush=True)

    summary = {"frames": frames, "episodes": len(returns), "returns": returns, "log": log,
               "wall_s": time.perf_counter() - start}
    print(f"dqn: {frames} frames, {len(returns)} episodes, mean return of the last 20 "
          f"{log[-1]['mean_return_20'] if log else float('nan'):.1f}, {summary['wall_s']:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f)
    return summary


if __name__ == "__main__":
    main(parse_args())
