"""Benchmark reap-value's estimators side by side with TorchRL's, in one run.

Usage:
    uv run --group bench python tools/bench_value.py [--repeat N] [--threads N]

For each shape (float32, CPU, ~0.5% dones, a third of them terminations), every estimator
is timed for reap and for both of TorchRL's implementations (the loop and the vectorised one);
the ratio is TorchRL's faster time over reap's. Each contender runs blocks of ``--repeat``
calls, in turns, three rounds; the time is its best call (the best, not the median: the
machine may be shared, and the best call is the least disturbed one). Calls are not
interleaved one by one, as that makes every contender pay for the caches and threads the
previous one left behind. Results are checked against
each other before timing.
"""

from __future__ import annotations

import argparse
import time

import torch
from bench_json import add_json_option, row, write_rows

import reap_value as rv

SHAPES = [(16, 2048, 1), (256, 128, 1)]
GAMMA, LMBDA = 0.99, 0.95


def make_inputs(shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    value = torch.randn(shape, generator=gen)
    next_value = torch.randn(shape, generator=gen)
    reward = torch.randn(shape, generator=gen)
    done = torch.rand(shape, generator=gen) < 0.005
    terminated = done & (torch.rand(shape, generator=gen) < 0.33)
    return value, next_value, reward, done, terminated


def estimators(trl):
    """(name, reap callable, {torchrl variant: callable}) for every benchmarked estimator."""
    g, lm = GAMMA, LMBDA
    return [
        (
            "GAE",
            lambda v, nv, r, d, t: rv.vec_generalized_advantage_estimate(g, lm, v, nv, r, d, t)[0],
            {
                "loop": lambda v, nv, r, d, t: trl.generalized_advantage_estimate(
                    g, lm, v, nv, r, d, t
                )[0],
                "vec": lambda v, nv, r, d, t: trl.vec_generalized_advantage_estimate(
                    g, lm, v, nv, r, d, t
                )[0],
            },
        ),
        (
            "TD(lambda) return",
            lambda v, nv, r, d, t: rv.vec_td_lambda_return_estimate(g, lm, nv, r, d, t),
            {
                "loop": lambda v, nv, r, d, t: trl.td_lambda_return_estimate(g, lm, nv, r, d, t),
                "vec": lambda v, nv, r, d, t: trl.vec_td_lambda_return_estimate(g, lm, nv, r, d, t),
            },
        ),
        (
            "TD(lambda) advantage",
            lambda v, nv, r, d, t: rv.vec_td_lambda_advantage_estimate(g, lm, v, nv, r, d, t),
            {
                "loop": lambda v, nv, r, d, t: trl.td_lambda_advantage_estimate(
                    g, lm, v, nv, r, d, t
                ),
                "vec": lambda v, nv, r, d, t: trl.vec_td_lambda_advantage_estimate(
                    g, lm, v, nv, r, d, t
                ),
            },
        ),
        (
            "TD(1) return",
            lambda v, nv, r, d, t: rv.vec_td1_return_estimate(g, nv, r, d, t),
            {
                "loop": lambda v, nv, r, d, t: trl.td1_return_estimate(g, nv, r, d, t),
                "vec": lambda v, nv, r, d, t: trl.vec_td1_return_estimate(g, nv, r, d, t),
            },
        ),
        (
            "TD(1) advantage",
            lambda v, nv, r, d, t: rv.vec_td1_advantage_estimate(g, v, nv, r, d, t),
            {
                "loop": lambda v, nv, r, d, t: trl.td1_advantage_estimate(g, v, nv, r, d, t),
                "vec": lambda v, nv, r, d, t: trl.vec_td1_advantage_estimate(g, v, nv, r, d, t),
            },
        ),
    ]


def time_blocks(fns: dict, args, repeat: int, rounds: int = 3) -> dict[str, float]:
    """Best time per call in ms: each contender runs blocks of ``repeat`` calls, in turns."""
    best = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn(*args)  # warm-up after the other contenders ran
            for _ in range(repeat):
                start = time.perf_counter()
                fn(*args)
                best[name] = min(best[name], time.perf_counter() - start)
    return {name: t * 1e3 for name, t in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None)
    add_json_option(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    import torchrl
    import torchrl.objectives.value.functional as trl

    print(
        f"torch {torch.__version__}, torchrl {torchrl.__version__}, "
        f"{torch.get_num_threads()} threads, best call of 3 x {args.repeat}, times in ms"
    )
    header = f"{'shape':<16}{'estimator':<22}{'reap':>8}{'trl loop':>10}{'trl vec':>10}{'ratio':>8}"
    print(header)
    print("-" * len(header))
    figures = []
    with torch.no_grad():
        for shape in SHAPES:
            inputs = make_inputs(shape)
            for name, ours, theirs in estimators(trl):
                expected = ours(*inputs)
                for fn in theirs.values():
                    torch.testing.assert_close(expected, fn(*inputs), rtol=1e-4, atol=1e-4)
                times = time_blocks({"reap": ours, **theirs}, inputs, args.repeat)
                best = min(times["loop"], times["vec"])
                print(
                    f"{str(list(shape)):<16}{name:<22}{times['reap']:>8.3f}"
                    f"{times['loop']:>10.3f}{times['vec']:>10.3f}{best / times['reap']:>7.1f}x"
                )
                figures.append(row(f"{name} `{list(shape)}`", reap_torchrl=best / times["reap"]))
    write_rows(args.json, figures)
    print("ratio = faster of TorchRL's loop and vectorised times / reap's time")
    bench_modules(args.repeat)


def bench_modules(repeat: int) -> None:
    """The GAE module on a collector-like batch, value network (an MLP) included."""
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule
    from torchrl.objectives.value import GAE as TorchRLGAE

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    net = TensorDictModule(mlp, in_keys=["observation"], out_keys=["state_value"])
    print(f"\nGAE module with an 8-64-1 MLP value network (best call of 3 x {repeat}, ms)")
    for n_envs, steps in [(16, 2048), (256, 128)]:
        v, nv, r, d, t = make_inputs((n_envs, steps, 1))
        batch = TensorDict(
            {
                "observation": torch.randn(n_envs, steps, 8),
                "next": {
                    "observation": torch.randn(n_envs, steps, 8),
                    "reward": r,
                    "done": d,
                    "terminated": t,
                },
            },
            [n_envs, steps],
        )
        ours = rv.GAE(gamma=GAMMA, lmbda=LMBDA, value_network=net)
        theirs = TorchRLGAE(gamma=GAMMA, lmbda=LMBDA, value_network=net)
        torch.testing.assert_close(
            ours(batch.clone())["advantage"],
            theirs(batch.clone())["advantage"],
            rtol=1e-4,
            atol=1e-4,
        )
        times = time_blocks(
            {
                "reap": lambda m=ours, b=batch: m(b.clone()),
                "torchrl": lambda m=theirs, b=batch: m(b.clone()),
            },
            (),
            repeat,
        )
        print(
            f"{str([n_envs, steps]):<16}reap {times['reap']:.3f}  torchrl {times['torchrl']:.3f}  "
            f"ratio {times['torchrl'] / times['reap']:.1f}x"
        )


if __name__ == "__main__":
    main()
