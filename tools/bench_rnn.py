"""Benchmark reap-rnn-kernels' recurrent backends against TorchRL's and the fused-RNN floor.

Usage:
    uv run --group bench python tools/bench_rnn.py [--rounds N] [--skip-collect]

Training step: forward + backward of a 2-layer, 256-hidden LSTM and GRU (input 64) over a
``[32, 128]`` batch with about 2% resets, on the CPU, for every reap backend that runs here
(``"triton"`` needs a GPU: under the CPU interpreter it is a test tool, not a contender) and
for TorchRL's ``LSTMModule``/``GRUModule`` with each of its CPU backends, all sharing one
``torch.nn`` module (same weights, same data; outputs are checked against each other first).
The floor is that ``torch.nn`` module on the same batch without resets: one fused call.
Contenders take turns, one call each per round; each reports its median over the rounds.

Collection: frames/s of a ``Collector`` with an LSTM policy on 8 batched CartPole envs, reap
against TorchRL's ``Collector``, taking turns the same way.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from bench_json import add_json_option, row, write_rows
from tensordict import TensorDict

import reap_rnn

B, T, F, H, L = 32, 128, 64, 256, 2
RESET_P = 0.02


def make_data(kind: str, seed: int = 0) -> TensorDict:
    gen = torch.Generator().manual_seed(seed)
    data = {
        "obs": torch.randn(B, T, F, generator=gen),
        "is_init": (torch.rand(B, T, 1, generator=gen) < RESET_P),
    }
    keys = ["recurrent_state_h", "recurrent_state_c"] if kind == "lstm" else ["recurrent_state"]
    for key in keys:  # zero where a trajectory starts, as collected data is
        data[key] = torch.randn(B, T, L, H, generator=gen).mul(0.1).masked_fill(data["is_init"].unsqueeze(-1), 0)
    return TensorDict(data, batch_size=[B, T])


def contenders(kind: str, rnn: torch.nn.Module):
    """name -> module to run in recurrent mode, all wrapping ``rnn``."""
    import torchrl.modules as trm

    ours = reap_rnn.LSTMModule if kind == "lstm" else reap_rnn.GRUModule
    theirs = trm.LSTMModule if kind == "lstm" else trm.GRUModule
    arg = {kind: rnn}
    cases = {f"reap {b}": ours(**arg, in_key="obs", out_key="y", recurrent_backend=b) for b in ("pad", "scan")}
    for b in ("pad", "scan"):
        try:
            cases[f"torchrl {b}"] = theirs(**arg, in_key="obs", out_key="y", recurrent_backend=b)
        except Exception as exc:  # e.g. a backend TorchRL cannot build here
            print(f"  (torchrl {b} unavailable: {exc})")
    return cases


def train_step(module, td, mode_ctx):
    with mode_ctx():
        out = module(td.clone())
    loss = out["y"].pow(2).mean()
    loss.backward()
    return out["y"].detach()


def floor_step(rnn, td):
    y, _ = rnn(td["obs"])
    y.pow(2).mean().backward()


def bench_training(kind: str, rounds: int) -> dict[str, float]:
    import torchrl.modules as trm

    torch.manual_seed(0)
    rnn = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(F, H, L, batch_first=True)
    td = make_data(kind)
    cases = contenders(kind, rnn)
    ctx = {name: (reap_rnn.set_recurrent_mode if name.startswith("reap") else trm.set_recurrent_mode)
           for name in cases}
    ref = None
    for name, module in cases.items():
        y = train_step(module, td, ctx[name])
        if ref is None:
            ref = y
        else:
            torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    fns = {name: (lambda m=m, c=ctx[name]: train_step(m, td, c)) for name, m in cases.items()}
    fns["floor (torch.nn, no resets)"] = lambda: floor_step(rnn, td)
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            rnn.zero_grad(set_to_none=True)
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(v) * 1e3 for name, v in times.items()}


def bench_collection(rounds: int, frames: int = 4000) -> dict[str, float]:
    from tensordict.nn import TensorDictModule, TensorDictSequential

    import reap

    def policy_for(lib_lstm, head_mod):
        torch.manual_seed(0)
        lstm = lib_lstm(input_size=4, hidden_size=64, in_key="observation", out_key="embed")
        head = head_mod(torch.nn.Linear(64, 2), in_keys=["embed"], out_keys=["logits"])
        # a one-hot action, CartPole's default encoding in both libraries
        act = head_mod(lambda logits: torch.nn.functional.one_hot(logits.argmax(-1), 2), in_keys=["logits"],
                       out_keys=["action"])
        return lstm, TensorDictSequential(lstm, head, act)

    def reap_run():
        lstm, policy = policy_for(reap_rnn.LSTMModule, TensorDictModule)
        env = reap.TransformedEnv(reap.GymEnv("CartPole-v1", num_envs=8), reap.InitTracker())
        env.append_transform(lstm.make_tensordict_primer())
        with reap.Collector(env, policy, frames_per_batch=800, total_frames=frames) as c:
            start = time.perf_counter()
            n = sum(b.numel() for b in c)
        return n / (time.perf_counter() - start)

    def torchrl_run():
        import torchrl.collectors as trc
        import torchrl.envs as tre
        import torchrl.modules as trm

        lstm, policy = policy_for(trm.LSTMModule, TensorDictModule)
        env = tre.TransformedEnv(tre.GymEnv("CartPole-v1", num_envs=8), tre.InitTracker())
        env.append_transform(lstm.make_tensordict_primer())
        c = trc.Collector(env, policy, frames_per_batch=800, total_frames=frames)
        try:
            start = time.perf_counter()
            n = sum(b.numel() for b in c)
            return n / (time.perf_counter() - start)
        finally:
            c.shutdown()

    rates = {"reap": [], "torchrl": []}
    for _ in range(rounds):
        rates["reap"].append(reap_run())
        rates["torchrl"].append(torchrl_run())
    return {k: statistics.median(v) for k, v in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--skip-collect", action="store_true")
    add_json_option(parser)
    args = parser.parse_args()
    import torchrl

    print(f"torch {torch.__version__}, torchrl {torchrl.__version__}, {torch.get_num_threads()} threads, "
          f"[{B}, {T}] batch, input {F}, hidden {H}, {L} layers, ~{RESET_P:.0%} resets, median of {args.rounds}")
    figures = []
    for kind in ("lstm", "gru"):
        times = bench_training(kind, args.rounds)
        floor = times["floor (torch.nn, no resets)"]
        ours = min(v for k, v in times.items() if k.startswith("reap"))
        theirs = min((v for k, v in times.items() if k.startswith("torchrl")), default=float("nan"))
        print(f"\n{kind.upper()} forward+backward (ms)          time    / floor")
        for name, ms in times.items():
            print(f"  {name:<30}{ms:>9.1f}{ms / floor:>8.2f}x")
        print(f"  reap's fastest vs TorchRL's fastest: {theirs / ours:.2f}x faster; reap / floor: {ours / floor:.2f}x")
        figures.append(row(f"`{kind.upper()}Module` forward + backward, `[{B}, {T}]`, {L} layers × {H}, fastest backend each",
                           reap_torchrl=theirs / ours, note=f"{ours / floor:.2f}× the time of one fused `torch.nn` call"))
    if not args.skip_collect:
        rates = bench_collection(max(1, args.rounds // 2))
        print(f"\nCollection, LSTM policy (hidden 64), 8 CartPole envs: reap {rates['reap']:.0f} frames/s, "
              f"TorchRL {rates['torchrl']:.0f} frames/s, {rates['reap'] / rates['torchrl']:.1f}x")
        figures.append(row("`Collector` with an LSTM policy, 8 CartPole envs", reap_torchrl=rates["reap"] / rates["torchrl"]))
    write_rows(args.json, figures)


if __name__ == "__main__":
    main()
