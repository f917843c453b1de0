"""Benchmark reap-rnn-kernels' recurrent backends against TorchRL's and the fused-RNN floor.

Usage:
    uv run --group bench python tools/bench_rnn.py [--rounds N] [--skip-collect]
    python tools/bench_rnn.py --device cuda [--cases C1,C2] [--backends pad,scan,triton,auto]
        [--torchrl-backends pad,scan,triton] [--torchrl-timeout S] [--rounds N] [--warmup N]

Training step: forward + backward of a 2-layer, 256-hidden LSTM and GRU (input 64) over a
``[32, 128]`` batch with about 2% resets, on the CPU, for every reap backend that runs here
(``"triton"`` needs a GPU: under the CPU interpreter it is a test tool, not a contender) and
for TorchRL's ``LSTMModule``/``GRUModule`` with each of its CPU backends, all sharing one
``torch.nn`` module (same weights, same data; outputs are checked against each other first).
The floor is that ``torch.nn`` module on the same batch without resets: one fused call.
Contenders take turns, one call each per round; each reports its median over the rounds.

Collection: frames/s of a ``Collector`` with an LSTM policy on 8 batched CartPole envs, reap
against TorchRL's ``Collector``, taking turns the same way.

``--device cuda`` (no collection): one table of training-step times (ms, CUDA-synchronised,
median over the rounds after warm-up calls) for LSTM and GRU at ``[32, 128]`` 2 x 256,
``[256, 128]`` 1 x 256 and ``[64, 256]`` 1 x 1024 (input 64, ~2% resets, float32 in IEEE
arithmetic: cuDNN's TF32 is turned off): the cuDNN floor, reap's ``"pad"``, ``"scan"``,
``"triton"`` and ``"auto"`` (with the backend it picked), and TorchRL's backends, each also as a
ratio to the floor. Each reap backend's output is checked against the floor on the batch
without resets before it is timed. TorchRL runs in a child process per backend, each case
time-boxed by ``--torchrl-timeout`` (its triton backend's first call has taken minutes).
Then the peak memory of one LSTM ``[64, 1024]`` 1 x 256 step of reap's triton backend with
``recurrent_recompute="none"`` and ``"full"``. ``--table`` runs the same table on the CPU (a
smoke test of this mode: use small ``--cases`` and ``TRITON_INTERPRET=1`` for triton).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

import torch
from bench_json import add_json_option, row, write_rows
from tensordict import TensorDict

import reap_rnn

F = 64  # input size, every case
CPU_SHAPE = (32, 128, 2, 256)  # B, T, layers, hidden
RESET_P = 0.02
CUDA_CASES = [f"{kind}-{b}x{t}-{n_layers}x{h}" for b, t, n_layers, h in
              [(32, 128, 2, 256), (256, 128, 1, 256), (64, 256, 1, 1024)] for kind in ("lstm", "gru")]
MEMORY_CASE = ("lstm", 64, 1024, 1, 256)
REAP_BACKENDS = ("pad", "scan", "triton", "auto")
TORCHRL_BACKENDS = ("pad", "scan", "triton")
FLOOR = "floor (torch.nn, no resets)"
CHECK_TOL = {"rtol": 1e-3, "atol": 1e-4}  # float32: reap's backends against the fused call
_RESULT, _READY, _IMPORT_ERROR = "@@result ", "@@ready ", "@@import-error "


def make_data(kind: str, B: int = 32, T: int = 128, F: int = F, H: int = 256, L: int = 2, seed: int = 0,
              device="cpu") -> TensorDict:
    """The ``[B, T]`` batch, drawn on the CPU (the same values on every device), then moved."""
    gen = torch.Generator().manual_seed(seed)
    data = {
        "obs": torch.randn(B, T, F, generator=gen),
        "is_init": (torch.rand(B, T, 1, generator=gen) < RESET_P),
    }
    keys = ["recurrent_state_h", "recurrent_state_c"] if kind == "lstm" else ["recurrent_state"]
    for key in keys:  # zero where a trajectory starts, as collected data is
        data[key] = torch.randn(B, T, L, H, generator=gen).mul(0.1).masked_fill(data["is_init"].unsqueeze(-1), 0)
    return TensorDict(data, batch_size=[B, T]).to(device)


def without_resets(td: TensorDict) -> TensorDict:
    """``td`` as the floor sees it: every row one trajectory from zero states (a reset at step 0)."""
    clean = td.clone()
    clean["is_init"].zero_()
    clean["is_init"][:, 0] = True
    for key in clean.keys():
        if isinstance(key, str) and key.startswith("recurrent_state"):
            clean[key].zero_()
    return clean


def build_rnn(kind: str, F: int, H: int, L: int, device="cpu") -> torch.nn.Module:
    """The shared ``torch.nn`` module, initialised on the CPU (the same weights in every process)."""
    torch.manual_seed(0)
    return (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(F, H, L, batch_first=True).to(device)


def contenders(kind: str, rnn: torch.nn.Module, backends=("pad", "scan"), torchrl_backends=("pad", "scan")):
    """name -> module to run in recurrent mode, all wrapping ``rnn``."""
    ours = reap_rnn.LSTMModule if kind == "lstm" else reap_rnn.GRUModule
    arg = {kind: rnn}
    cases = {f"reap {b}": ours(**arg, in_key="obs", out_key="y", recurrent_backend=b) for b in backends}
    if not torchrl_backends:
        return cases
    import torchrl.modules as trm

    theirs = trm.LSTMModule if kind == "lstm" else trm.GRUModule
    for b in torchrl_backends:
        try:
            cases[f"torchrl {b}"] = theirs(**arg, in_key="obs", out_key="y", recurrent_backend=b)
        except Exception as exc:  # e.g. a backend TorchRL cannot build here
            print(f"  (torchrl {b} unavailable: {exc})")
    return cases


def train_step(module, td, mode_ctx, deep: bool = True):
    with mode_ctx():
        out = module(td.clone() if deep else td.copy())
    loss = out["y"].pow(2).mean()
    loss.backward()
    return out["y"].detach()


def floor_step(rnn, td):
    y, _ = rnn(td["obs"])
    y.pow(2).mean().backward()


def time_calls(fns: dict, rounds: int, zero_grad, warmup: int = 0, sync=None) -> dict[str, float]:
    """Median ms of each function; they take turns, one call each per round, after ``warmup``
    calls each; ``sync`` (e.g. ``torch.cuda.synchronize``) runs before and after each timed call."""
    sync = sync or (lambda: None)
    for _ in range(warmup):
        for fn in fns.values():
            zero_grad()
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            zero_grad()
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(v) * 1e3 for name, v in times.items()}


def bench_training(kind: str, rounds: int, shape=CPU_SHAPE) -> dict[str, float]:
    import torchrl.modules as trm

    B, T, L, H = shape
    rnn = build_rnn(kind, F, H, L)
    td = make_data(kind, B, T, F, H, L)
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
    fns[FLOOR] = lambda: floor_step(rnn, td)
    return time_calls(fns, rounds, lambda: rnn.zero_grad(set_to_none=True))


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


def cpu_main(args) -> None:
    """The CPU benchmark (the default): two training-step tables, then collection."""
    import torchrl

    B, T, L, H = CPU_SHAPE
    print(f"torch {torch.__version__}, torchrl {torchrl.__version__}, {torch.get_num_threads()} threads, "
          f"[{B}, {T}] batch, input {F}, hidden {H}, {L} layers, ~{RESET_P:.0%} resets, median of {args.rounds}")
    figures = []
    for kind in ("lstm", "gru"):
        times = bench_training(kind, args.rounds)
        floor = times[FLOOR]
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


# ---- the device table (--device cuda, or --table) --------------------------------------------

def parse_case(name: str) -> tuple[str, int, int, int, int]:
    """``"lstm-32x128-2x256"`` -> ``("lstm", B=32, T=128, L=2, H=256)``."""
    m = re.fullmatch(r"(lstm|gru)-(\d+)x(\d+)-(\d+)x(\d+)", name.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"case {name!r} is not KIND-BxT-LAYERSxHIDDEN, e.g. lstm-32x128-2x256")
    kind, *dims = m.groups()
    return (kind, *map(int, dims))


def names_list(choices):
    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip() and n.strip() != "none"]
        bad = [n for n in names if n not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; choose among {list(choices)} (comma-separated) or none")
        return names

    return parse


def cases_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        parse_case(n)
    return names


def setup_device(device: str) -> None:
    """float32 in IEEE arithmetic everywhere: cuDNN's RNNs may otherwise use TF32 (torch's default),
    which is ~1e-3 off, while reap's and TorchRL's Triton kernels default to IEEE."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.backends.cudnn.allow_tf32 = False
        if device.index is not None:
            torch.cuda.set_device(device)


def syncer(device: str):
    return torch.cuda.synchronize if torch.device(device).type == "cuda" else None


def floor_mismatch(module, rnn, td, mode_ctx) -> str | None:
    """None when ``module``'s output on ``td`` without resets equals the fused ``rnn`` call's
    (float32 tolerance), else what differs."""
    clean = without_resets(td)
    with torch.no_grad():
        with mode_ctx():
            y = module(clean.copy())["y"]
        want, _ = rnn(clean["obs"])
    try:
        torch.testing.assert_close(y, want, **CHECK_TOL)
    except AssertionError:
        err = (y - want).abs()
        return f"differs from the floor: max abs error {err.max().item():.3g} ({(err > 1e-3).float().mean().item():.2%} of entries above 1e-3)"
    return None


def short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) < 300 else text[:297] + "..."


def bench_reap_case(case: str, backends, args) -> tuple[dict, dict, str | None]:
    """reap's backends and the floor on ``case``: (name -> ms or a short failure, name -> note,
    the backend that auto picked)."""
    kind, B, T, L, H = parse_case(case)
    dev = args.device
    rnn = build_rnn(kind, F, H, L, dev)
    td = make_data(kind, B, T, F, H, L, device=dev)
    cells, notes, picked = {}, {}, None
    fns = {}
    ours = reap_rnn.LSTMModule if kind == "lstm" else reap_rnn.GRUModule
    for b in backends:
        name = f"reap {b}"
        try:
            module = ours(**{kind: rnn}, in_key="obs", out_key="y", recurrent_backend=b)
            if b == "auto":
                picked = module.auto_backend(td.device)
            bad = floor_mismatch(module, rnn, td, reap_rnn.set_recurrent_mode)
        except Exception as exc:  # a backend that fails here is reported, the others still run
            cells[name], notes[name] = "error", short(exc)
            continue
        if bad is not None:
            cells[name], notes[name] = "WRONG", bad
            continue
        fns[name] = lambda m=module: train_step(m, td, reap_rnn.set_recurrent_mode, deep=False)
    fns[FLOOR] = lambda: floor_step(rnn, td)
    zero = lambda: rnn.zero_grad(set_to_none=True)  # noqa: E731
    try:
        cells.update(time_calls(fns, args.rounds, zero, args.warmup, syncer(dev)))
    except Exception:  # time them one by one to find the one that fails
        for name, fn in fns.items():
            try:
                cells.update(time_calls({name: fn}, args.rounds, zero, args.warmup, syncer(dev)))
            except Exception as exc:
                cells[name], notes[name] = "error", short(exc)
    return cells, notes, picked


def torchrl_worker(args) -> None:
    """Child process: TorchRL's ``args.torchrl_worker`` backend on each of ``args.cases``, one
    ``_RESULT`` line each (the parent times each case out)."""
    def emit(tag, obj):
        print(tag + json.dumps(obj), flush=True)

    try:
        import torchrl
        import torchrl.modules as trm
    except BaseException as exc:  # ImportError, or its compiled extension failing to load
        emit(_IMPORT_ERROR, {"error": short(exc)})
        sys.exit(3)
    backend, dev = args.torchrl_worker, args.device
    setup_device(dev)
    emit(_READY, {"version": torchrl.__version__})
    for case in args.cases:
        rec = {"case": case}
        kind, B, T, L, H = parse_case(case)
        theirs = trm.LSTMModule if kind == "lstm" else trm.GRUModule
        try:
            rnn = build_rnn(kind, F, H, L, dev)
            td = make_data(kind, B, T, F, H, L, device=dev)
            module = theirs(**{kind: rnn}, in_key="obs", out_key="y", recurrent_backend=backend)
        except Exception as exc:
            rec.update(cell="unavailable", note=short(exc))
            emit(_RESULT, rec)
            continue
        try:
            bad = floor_mismatch(module, rnn, td, trm.set_recurrent_mode)
            if bad is not None:  # reported beside its time: TorchRL is the peer, not under test
                rec["note"] = bad
            step = lambda m=module, d=td: train_step(m, d, trm.set_recurrent_mode, deep=False)  # noqa: E731
            rec["ms"] = time_calls({"x": step}, args.rounds, lambda r=rnn: r.zero_grad(set_to_none=True),
                                   args.warmup, syncer(dev))["x"]
        except Exception as exc:
            rec.update(cell="error", note=short(exc))
        emit(_RESULT, rec)


def run_torchrl_backend(backend: str, cases: list[str], args, info: dict) -> tuple[dict, dict, str | None]:
    """TorchRL's ``backend`` on ``cases`` in a child process, each case (and the imports) given
    ``args.torchrl_timeout`` seconds: (case -> ms or a short failure, case -> note, what stops
    TorchRL altogether (not importable) or None); ``info["version"]`` gets TorchRL's version."""
    cells, notes = {}, {}
    pending = list(cases)
    while pending:
        cmd = [sys.executable, "-u", os.path.abspath(__file__), "--device", args.device, "--table",
               "--torchrl-worker", backend, "--cases", ",".join(pending), "--rounds", str(args.rounds),
               "--warmup", str(args.warmup)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            pending, fatal = _follow_child(proc, backend, pending, args, cells, notes, info)
        finally:
            if proc.poll() is None:  # interrupted: the child and what it started, nothing else
                _kill(proc)
        if fatal is not None:
            return cells, notes, fatal
    return cells, notes, None


def _kill(proc) -> None:
    """Kill a TorchRL child and what it started (its own process group, nothing else)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _follow_child(proc, backend, pending, args, cells, notes, info):
    """Read one TorchRL child's results into ``cells``/``notes`` until it ends or a case times
    out: (the cases still to run, the import error or None)."""
    lines: queue.Queue = queue.Queue()

    def read(stream=proc.stdout, out=lines):
        for line in stream:
            out.put(line.rstrip("\n"))
        out.put(None)

    threading.Thread(target=read, daemon=True).start()
    log: list[str] = []
    deadline = time.monotonic() + args.torchrl_timeout
    timed_out = False
    while pending:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            timed_out = True
            break
        if line is None:
            break
        if line.startswith(_IMPORT_ERROR):
            proc.wait()
            return [], json.loads(line[len(_IMPORT_ERROR):])["error"]
        if line.startswith(_READY):
            info.update(json.loads(line[len(_READY):]))
            deadline = time.monotonic() + args.torchrl_timeout
        elif line.startswith(_RESULT):
            rec = json.loads(line[len(_RESULT):])
            cells[rec["case"]] = rec.get("ms", rec.get("cell", "error"))
            if rec.get("note"):
                notes[rec["case"]] = rec["note"]
            pending.remove(rec["case"])
            got = cells[rec["case"]]
            print(f"    {rec['case']}: {f'{got:.2f} ms' if isinstance(got, float) else got}", flush=True)
            deadline = time.monotonic() + args.torchrl_timeout
        else:
            log.append(line)
    if not pending:
        proc.wait()
        return [], None
    case = pending.pop(0)
    if timed_out:
        _kill(proc)
        cells[case] = f"timeout {args.torchrl_timeout:g}s"
        notes[case] = f"timed out after {args.torchrl_timeout:g} s"
        print(f"    {case}: timed out after {args.torchrl_timeout:g} s", flush=True)
        if not args.torchrl_keep_trying:
            for rest in pending:
                cells[rest] = "skipped"
                notes[rest] = f"skipped: TorchRL {backend} timed out on {case} (--torchrl-keep-trying runs it)"
            return [], None
    else:  # the child ended early: a crash
        rc = proc.wait()
        cells[case] = "crashed"
        notes[case] = f"child exited with {rc}: " + " | ".join(log[-3:])
        print(f"    {case}: crashed ({notes[case]})", flush=True)
    return pending, None


def measure_peak_memory(args) -> None:
    """Peak memory of one training step of reap's triton LSTM with recompute none vs full."""
    kind, B, T, L, H = MEMORY_CASE
    what = f"reap triton {kind.upper()} [{B}, {T}] {L}x{H}, one forward+backward"
    if torch.device(args.device).type != "cuda":
        print(f"\nPeak memory ({what}): CUDA only, left out")
        return
    peaks = {}
    for recompute in ("none", "full"):
        try:
            rnn = build_rnn(kind, F, H, L, args.device)
            module = reap_rnn.LSTMModule(lstm=rnn, in_key="obs", out_key="y", recurrent_backend="triton",
                                         recurrent_recompute=recompute)
            td = make_data(kind, B, T, F, H, L, device=args.device)
            train_step(module, td, reap_rnn.set_recurrent_mode, deep=False)  # compile first
            rnn.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            train_step(module, td, reap_rnn.set_recurrent_mode, deep=False)
            torch.cuda.synchronize()
            peaks[recompute] = (torch.cuda.max_memory_allocated(), before)
        except Exception as exc:
            print(f"\nPeak memory, recurrent_recompute={recompute!r}: {short(exc)}")
        finally:
            module = rnn = td = None
            torch.cuda.empty_cache()
    mib = 2**20
    print(f"\nPeak memory ({what}; torch.cuda.max_memory_allocated, batch and weights included):")
    for recompute, (peak, before) in peaks.items():
        print(f"  recurrent_recompute={recompute!r:<7} {peak / mib:>9.1f} MiB  ({(peak - before) / mib:.1f} MiB above "
              f"the {before / mib:.1f} MiB held before the step)")
    if len(peaks) == 2:
        (p_none, b_none), (p_full, b_full) = peaks["none"], peaks["full"]
        print(f"  none / full: {p_none / p_full:.2f}x peak, {(p_none - b_none) / max(1, p_full - b_full):.2f}x above "
              "what was held before")


def device_main(args) -> None:
    import triton

    dev = args.device
    setup_device(dev)
    where = torch.cuda.get_device_name() if torch.device(dev).type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, triton {triton.__version__}, {where}; input {F}, ~{RESET_P:.0%} resets, "
          f"float32 (cuDNN TF32 off, reap matmul precision {reap_rnn.get_recurrent_matmul_precision()}), "
          f"median of {args.rounds} after {args.warmup} warm-up calls each")
    cases = args.cases
    cells: dict[str, dict[str, object]] = {}  # row -> case -> ms or failure
    notes: list[str] = []
    picked: dict[str, str | None] = {}
    for case in cases:
        print(f"  reap: {case} ...", flush=True)
        got, why, picked[case] = bench_reap_case(case, args.backends, args)
        for name, v in got.items():
            cells.setdefault(name, {})[case] = v
        notes += [f"{name}, {case}: {n}" for name, n in why.items()]
    if torch.device(dev).type == "cuda":
        torch.cuda.empty_cache()  # leave the GPU's memory to TorchRL's child processes
    info: dict = {}
    for backend in args.torchrl_backends:
        print(f"  TorchRL {backend}: {len(cases)} case(s) in a child process, {args.torchrl_timeout:g} s each ...",
              flush=True)
        got, why, fatal = run_torchrl_backend(backend, cases, args, info)
        if fatal is not None:
            print(f"  TorchRL is not importable ({fatal}): its rows are left out")
            break
        for case, v in got.items():
            cells.setdefault(f"torchrl {backend}", {})[case] = v
        notes += [f"torchrl {backend}, {case}: {n}" for case, n in why.items()]

    order = [FLOOR] + [f"reap {b}" for b in args.backends] + [f"torchrl {b}" for b in args.torchrl_backends]
    labels = {FLOOR: "cuDNN floor (no resets)" if torch.device(dev).type == "cuda" else "torch.nn floor (no resets)"}
    width = max(19, *(len(c) + 2 for c in cases))

    def cell(name, case):
        v = cells.get(name, {}).get(case, "-")
        floor = cells.get(FLOOR, {}).get(case)
        if isinstance(v, float) and isinstance(floor, float):
            return f"{v:.2f} ({v / floor:.2f}x)"
        return f"{v:.2f}" if isinstance(v, float) else str(v)

    if info.get("version"):
        print(f"\nTorchRL {info['version']}")
    print(f"\nforward+backward, ms (/ floor){'':<8}" + "".join(f"{c:>{width}}" for c in cases))
    for name in order:
        if name not in cells:
            continue
        label = labels.get(name, name)
        print(f"  {label:<35}" + "".join(f"{cell(name, c):>{width}}" for c in cases))
        if name == "reap auto":
            print(f"  {'  (auto picked)':<35}" + "".join(f"{picked.get(c) or '-':>{width}}" for c in cases))
    figures, line, fastest = [], [], []
    on = "a GPU" if torch.device(dev).type == "cuda" else "the CPU"
    for case in cases:
        ours = cells.get("reap triton", {}).get(case)
        theirs = [(r[case], n) for n, r in cells.items() if n.startswith("torchrl") and isinstance(r.get(case), float)]
        if isinstance(ours, float) and theirs:
            best, who = min(theirs)
            line.append(f"{best / ours:.2f}x")
            fastest.append(who.split()[1])
            kind, B, T, L, H = parse_case(case)
            figures.append(row(f"`{kind.upper()}Module` forward + backward on {on}, `[{B}, {T}]`, {L} layers × {H}, "
                               "reap triton vs TorchRL's fastest", reap_torchrl=best / ours,
                               note=f"TorchRL's fastest: {who.split()[1]}"))
        else:
            line.append("-")
            fastest.append("-")
    print(f"  {'reap triton vs TorchRL fastest':<35}" + "".join(f"{v:>{width}}" for v in line))
    print(f"  {'  (TorchRL fastest)':<35}" + "".join(f"{v:>{width}}" for v in fastest))
    print("  (TorchRL's fastest time over reap triton's: above 1, reap's triton is faster)")
    if notes:
        print("\nNotes:")
        for n in notes:
            print(f"  {n}")
    if args.memory:
        measure_peak_memory(args)
    write_rows(args.json, figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="timed calls per contender (default 5 on the "
                        "CPU benchmark, 20 with --device cuda)")
    parser.add_argument("--skip-collect", action="store_true")
    parser.add_argument("--device", default="cpu", help="cpu (the default benchmark) or cuda[:N] (the GPU table)")
    parser.add_argument("--table", action="store_true", help="the GPU table's mode on --device cpu (a smoke test)")
    parser.add_argument("--cases", type=cases_list, default=CUDA_CASES,
                        help=f"GPU table: comma-separated KIND-BxT-LAYERSxHIDDEN (default {','.join(CUDA_CASES)})")
    parser.add_argument("--backends", type=names_list(REAP_BACKENDS), default=list(REAP_BACKENDS),
                        help="GPU table: reap's backends (comma-separated; default pad,scan,triton,auto)")
    parser.add_argument("--torchrl-backends", type=names_list(TORCHRL_BACKENDS), default=list(TORCHRL_BACKENDS),
                        help="GPU table: TorchRL's backends (default pad,scan,triton; none: no TorchRL)")
    parser.add_argument("--torchrl-timeout", type=float, default=60.0,
                        help="GPU table: seconds for each TorchRL case (default 60), its child's imports too")
    parser.add_argument("--torchrl-keep-trying", action="store_true",
                        help="GPU table: after a TorchRL backend times out, still run it on the remaining cases")
    parser.add_argument("--warmup", type=int, default=3, help="GPU table: untimed calls per contender first")
    parser.add_argument("--no-memory", dest="memory", action="store_false",
                        help="GPU table: leave out the peak-memory comparison")
    parser.add_argument("--torchrl-worker", default=None, help=argparse.SUPPRESS)
    add_json_option(parser)
    args = parser.parse_args()
    table = args.table or torch.device(args.device).type != "cpu"
    if args.rounds is None:
        args.rounds = 20 if table else 5
    if args.torchrl_worker is not None:
        torchrl_worker(args)
    elif table:
        device_main(args)
    else:
        cpu_main(args)


if __name__ == "__main__":
    main()
