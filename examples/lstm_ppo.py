"""PPO with an LSTM policy on a partially observed CartPole-v1 (velocities masked), top to bottom.

    uv run python examples/lstm_ppo.py

The policy sees the cart position and the pole angle only (``ObservationNorm`` multiplies the
two velocities by 0), so it must remember earlier steps: reap-rnn-kernels' ``LSTMModule`` keeps
its state in the batch while collecting, and recomputes the whole sequence in recurrent mode
when training. The value network is an asymmetric critic that sees the full state (kept as
``"state"`` before masking); only the trainer uses it. Minibatches are whole env rows (each a
``[T]`` sequence holding several episodes), dealt by ``SamplerWithoutReplacement``.
``--backend`` changes only the collector line, as in ``ppo_cartpole.py``.
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
    CatTensors,
    Collector,
    Compose,
    GymEnv,
    InitTracker,
    LazyTensorStorage,
    LSTMModule,
    ObservationNorm,
    RewardSum,
    SamplerWithoutReplacement,
    TensorDictReplayBuffer,
    TransformedEnv,
    set_recurrent_mode,
)

BACKENDS = ("local", "mp", "threads", "ray", "rpc", "distributed")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, default="local")
    parser.add_argument("--workers", type=int, default=2, help="collector workers (not for local)")
    parser.add_argument("--num-envs", type=int, default=16, help="envs (per worker)")
    parser.add_argument("--frames-per-batch", type=int, default=2048)
    parser.add_argument("--total-frames", type=int, default=100_000)
    parser.add_argument("--target-return", type=float, default=195.0)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--rows-per-minibatch", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--lmbda", type=float, default=0.95)
    parser.add_argument("--clip", type=float, default=0.2)
    parser.add_argument("--entropy-coef", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the run's summary to this file")
    return parser.parse_args(argv)


class EnvFactory:
    """CartPole with the velocities masked; the full state kept as ``"state"`` for the critic."""

    def __init__(self, num_envs: int, lstm: LSTMModule):
        self.num_envs = num_envs
        self.primer = lstm.make_tensordict_primer()  # the LSTM's state travels in the batch

    def __call__(self):
        # actions as indices, which torch's Categorical samples (TorchRL's default is one-hot)
        env = GymEnv("CartPole-v1", num_envs=self.num_envs, categorical_action_encoding=True)
        return TransformedEnv(env, Compose(
            CatTensors(["observation"], out_key="state", del_keys=False),  # a copy, before masking
            ObservationNorm(loc=torch.zeros(4), scale=torch.tensor([1.0, 0.0, 1.0, 0.0]), in_keys=["observation"],
                            standard_normal=False),  # x, 0, theta, 0
            InitTracker(),  # "is_init": where the LSTM restarts from zero
            RewardSum(),
            self.primer,
        ))


def main(args) -> dict:
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    lstm = LSTMModule(input_size=4, hidden_size=args.hidden, in_key="observation", out_key="embed")
    actor = ProbabilisticTensorDictSequential(
        lstm,
        TensorDictModule(nn.Linear(args.hidden, 2), in_keys=["embed"], out_keys=["logits"]),
        ProbabilisticTensorDictModule(in_keys=["logits"], out_keys=["action"], distribution_class=Categorical,
                                      return_log_prob=True, log_prob_key="sample_log_prob"),
    )
    critic = TensorDictModule(nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                                            nn.Linear(64, 1)), in_keys=["state"], out_keys=["state_value"])
    advantage = GAE(gamma=args.gamma, lmbda=args.lmbda, value_network=critic, average_gae=True)
    params = [*actor.parameters(), *critic.parameters()]
    optimizer = torch.optim.Adam(params, lr=args.lr)
    envs = EnvFactory(args.num_envs, lstm)

    # ---- the collector: the one line that --backend changes --------------------------------
    if args.backend == "local":
        collector = Collector(envs(), actor, frames_per_batch=args.frames_per_batch, total_frames=args.total_frames)
    else:
        collector = Collector([envs] * args.workers, actor, backend=args.backend, sync=True,  # PPO is on-policy
                              frames_per_batch=args.frames_per_batch, total_frames=args.total_frames)

    returns, log, frames, solved_at = [], [], 0, None
    start = time.perf_counter()
    with collector:
        collector.set_seed(args.seed)
        for i, batch in enumerate(collector):
            frames += batch.numel()
            done = batch["next", "done"]
            returns += batch["next", "episode_reward"][done].tolist()
            recent = sum(returns[-20:]) / max(1, len(returns[-20:]))
            log.append({"batch": i, "frames": frames, "episodes": len(returns), "mean_return_20": recent})
            print(f"batch {i:3d}  frames {frames:7d}  return(20) {recent:6.1f}", flush=True)
            if len(returns) >= 20 and recent >= args.target_return:
                solved_at = frames
                break

            rows = batch.reshape(-1, batch.shape[-1])  # [env rows, T]: each row a sequence
            with torch.no_grad():
                advantage(rows)
            buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(rows.shape[0]),
                                            sampler=SamplerWithoutReplacement(), batch_size=args.rows_per_minibatch)
            buffer.extend(rows)
            for _ in range(args.epochs):
                for minibatch in buffer:  # [rows, T]: the LSTM re-runs each row from its stored state
                    with set_recurrent_mode(True):
                        dist = actor.get_dist(minibatch.clone())
                    log_ratio = dist.log_prob(minibatch["action"]) - minibatch["sample_log_prob"]
                    ratio = log_ratio.exp()
                    adv = minibatch["advantage"].squeeze(-1)
                    clipped = ratio.clamp(1 - args.clip, 1 + args.clip)
                    policy_loss = -torch.min(ratio * adv, clipped * adv).mean()
                    value_loss = (critic(minibatch)["state_value"] - minibatch["value_target"]).pow(2).mean()
                    loss = policy_loss + 0.5 * value_loss - args.entropy_coef * dist.entropy().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(params, 0.5)
                    optimizer.step()
            collector.update_policy_weights_()

    summary = {"backend": args.backend, "frames": frames, "solved_at": solved_at, "returns": returns,
               "final_mean_return_20": recent, "wall_s": time.perf_counter() - start, "log": log}
    print(f"lstm {args.backend}: {frames} frames, mean return of the last 20 episodes {recent:.1f}, "
          f"{summary['wall_s']:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f)
    return summary


if __name__ == "__main__":
    main(parse_args())
