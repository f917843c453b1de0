"""The ``reap`` command: ``reap collect`` (the main job) and ``reap plugins``.

    reap collect --env Pendulum-v1 --frames 20000 --num-envs 8 --out runs/pendulum
    reap collect --env CartPole-v1 --frames 50000 --backend mp --workers 2 \\
        --policy mypkg.policies:make_policy --weights policy.safetensors
    reap plugins
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import importlib.util
import inspect
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import NoReturn

import torch

#: The largest count an option takes: frames and envs are counted in int64 tensors.
INT64_MAX = 2**63 - 1
#: Upper bounds of the options that start processes, actors or envs (one machine's worth).
MAX_WORKERS, MAX_NUM_ENVS = 1024, 65536
#: Env namespaces that a package registers on import: (distribution to install, module to import).
ENV_PACKAGES = {"ALE": ("ale-py", "ale_py")}


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as ``reap: error: ...`` (exit code 2), as reap's own checks report."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        fail(message)


def _whole(text: str) -> int:
    """argparse type of the counts: an integer, also written ``2e4`` or ``20_000``."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text[:40]!r}")
    return int(value)


def _backends_help() -> str:
    """The installed collector backends, one a line: the registry's, so a plugin's shows too."""
    from reap.plugins import collector_backends

    backends = collector_backends()
    names = sorted(backends, key=lambda name: (name != "local", name))
    return "backends (--backend; installed plugins add theirs):\n" + "\n".join(
        f"  {name:<12} {backends[name].summary}" for name in names)


def _parser() -> argparse.ArgumentParser:
    from reap import __version__

    parser = _Parser(prog="reap", description="Collect reinforcement-learning experience.")
    parser.add_argument("--version", action="version", version=f"reap {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    collect = sub.add_parser("collect", help="run envs under a policy and write the transitions",
                             formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_backends_help())
    count = {"type": _whole, "metavar": "N"}
    collect.add_argument("--env", required=True, help="gymnasium env id, e.g. CartPole-v1")
    collect.add_argument("--frames", required=True, help="frames to collect (rounded up to whole batches)", **count)
    collect.add_argument("--backend", default="local", help="where the envs run, one of the backends below "
                                                            "(default: %(default)s)")
    collect.add_argument("--workers", default=1, help=f"worker processes, actors or ranks, 1 to {MAX_WORKERS} "
                                                      "(backends other than local; default: %(default)s)", **count)
    collect.add_argument("--num-envs", default=1, help=f"envs batched in each worker, 1 to {MAX_NUM_ENVS} "
                                                       "(default: %(default)s)", **count)
    collect.add_argument("--frames-per-batch", default=1000, help="frames in each batch, across workers "
                                                                 "(default: %(default)s)", **count)
    collect.add_argument("--max-frames-per-traj", default=None, help="cut trajectories after N steps "
                                                                     "(default: no limit)", **count)
    collect.add_argument("--policy", default=None, metavar="MODULE:FACTORY",
                         help="the factory building the policy: MODULE importable or in the current "
                              "directory, or a file (path/to/policy.py:make); it receives the env if it "
                              "takes an argument (default: random actions)")
    collect.add_argument("--weights", default=None, metavar="FILE",
                         help="weights for the policy: .safetensors or a torch state dict, loaded "
                              "without unpickling code (default: the factory's)")
    collect.add_argument("--seed", default=None, help="seed of the envs and the random actions, 0 to 2**63 - 1 "
                                                      "(default: unseeded)", **count)
    collect.add_argument("--out", default=None, metavar="DIR",
                         help="new directory for the data: a memory-mapped replay-buffer checkpoint "
                              "(default: nothing written)")
    collect.add_argument("--no-progress", action="store_true", help="no progress bar")
    collect.add_argument("--profile", default=None, metavar="DIR",
                         help="torch.profiler traces of worker 0 into DIR, and a table of where each "
                              "worker's time went at the end (needs reap-profiling)")
    sub.add_parser("plugins", help="list the installed reap plugins and what they register")
    return parser


def fail(message: str) -> NoReturn:
    print(f"reap: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _policy_module(target: str, spec: str):
    """The module of ``--policy``: a ``.py`` file (its folder goes on ``sys.path``, so that worker
    processes import it by name too) or a module name (the current directory is searched first)."""
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            fail(f"--policy {spec!r}: there is no file {target} (looked in {path.parent})")
        if not path.stem.isidentifier():
            fail(f"--policy {spec!r}: {path.name} cannot be imported by name; rename it to a Python "
                 "identifier (letters, digits, underscores)")
        name, folder = path.stem, str(path.parent)
    else:
        name, folder = target, os.getcwd()
    if folder not in sys.path and (target.endswith(".py") or "" not in sys.path):
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - whatever the module raises, said in one line
        fail(f"--policy {spec!r} cannot be imported: {type(exc).__name__}: {exc}; give an importable module "
             "(a MODULE.py in the current directory, an installed package, or a path/to/file.py)")
    if target.endswith(".py") and Path(module.__file__ or "").resolve() != path:
        fail(f"--policy {spec!r}: the module {name!r} is already imported from {module.__file__}; rename {target}")
    return module


def load_policy(spec: str, env):
    """Build the policy named by ``MODULE:FACTORY`` or ``path/to/file.py:FACTORY``; the factory
    may take the env as argument."""
    target, sep, attribute = spec.rpartition(":")
    if not sep or not target or not attribute:
        fail(f"--policy must look like MODULE:FACTORY or path/to/file.py:FACTORY, got {spec!r}")
    module = _policy_module(target, spec)
    factory = getattr(module, attribute, None)
    if factory is None:
        fail(f"--policy {spec!r}: {target} defines no {attribute!r}; name a factory defined in it")
    if not callable(factory):
        fail(f"--policy {spec!r}: {attribute} is a {type(factory).__name__}, not a factory; name a function "
             "(or class) that returns the policy")
    try:
        takes_env = bool(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # a builtin without a signature
        takes_env = False
    try:
        return factory(env) if takes_env else factory()
    except Exception as exc:  # noqa: BLE001 - the factory's error, said in one line with where
        where = traceback.extract_tb(exc.__traceback__)[-1]
        fail(f"--policy {spec!r}: the factory raised {type(exc).__name__}: {exc} (at {where.filename}:"
             f"{where.lineno}); fix the factory")


def load_weights(path: str) -> dict:
    """A state dict from a safetensors file or a torch file, never unpickling code."""
    file = Path(path)
    if not file.is_file():
        fail(f"--weights {path!r} does not exist")
    if file.suffix == ".safetensors":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            return load_file(str(file))
        except SafetensorError as exc:
            fail(f"--weights {path!r} is not a safetensors file ({exc}); save the state dict with "
                 "safetensors.torch.save_file, or give a torch.save file a name not ending in .safetensors")
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

    _register_namespace(env_id)  # also in worker processes, which build their own envs
    return TransformedEnv(GymEnv(env_id, num_envs=None if num_envs == 1 else num_envs), RewardSum())


def _register_namespace(env_id: str) -> None:
    """Import the package that registers ``env_id``'s namespace (ALE's), if it is installed."""
    package = ENV_PACKAGES.get(env_id.rpartition("/")[0])
    if package and importlib.util.find_spec(package[1]):
        importlib.import_module(package[1])


class ReplayWriter:
    """Writes batches, flattened to ``[frames]``, into a reap-replay memory-mapped buffer at ``out``.

    :meth:`close` makes the directory a replay-buffer checkpoint of what was written (``meta.json``
    plus the memmap files): reload it with ``TensorDictReplayBuffer(storage=LazyMemmapStorage.open(out))``
    and ``loads(out)``. With nothing written it leaves no checkpoint (there is nothing to reload).
    """

    def __init__(self, path: Path, capacity: int, storage_cls, buffer_cls):
        self.path = path
        self.frames = 0
        self.buffer = buffer_cls(storage=storage_cls(capacity, scratch_dir=path, auto_cleanup=False))

    def write(self, batch) -> None:
        flat = batch.reshape(-1)
        self.buffer.extend(flat)
        self.frames += flat.shape[0]

    def close(self) -> None:
        if self.frames:
            self.buffer.dumps(self.path)


class MemmapWriter:
    """Without reap-replay: batches, flattened to ``[frames]``, in a tensordict memmap at ``out``.

    Reload it with ``tensordict.TensorDict.load_memmap(out)``; its first ``frames`` rows (see
    ``reap_meta.json``) hold data.
    """

    def __init__(self, path: Path, capacity: int):
        self.path = path
        self.capacity = capacity
        self.data = None
        self.frames = 0

    def write(self, batch) -> None:
        flat = batch.reshape(-1)
        if self.data is None:
            self.data = flat[0].expand(self.capacity).clone().zero_().memmap_(prefix=self.path)
        n = min(flat.shape[0], self.capacity - self.frames)
        self.data[self.frames : self.frames + n] = flat[:n]
        self.frames += n

    def close(self) -> None:
        self.data = None


def check_out_dir(path: Path) -> None:
    """``--out`` must be a new or empty directory that can be written: tried before collecting."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        fail(f"--out {str(path)!r} exists and is not an empty directory; choose a new directory")
    created = []
    missing = path
    while not missing.exists() and missing != missing.parent:
        created.append(missing)
        missing = missing.parent
    try:
        for directory in reversed(created):
            directory.mkdir()
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        fail(f"--out {str(path)!r} cannot be written ({exc.strerror or exc}); choose a directory "
             "in a place you can write to")
    finally:
        for directory in created:  # made only to try; the writer makes it again
            if directory.is_dir():
                directory.rmdir()


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
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / "reap_meta.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, path / "reap_meta.json")


def _allowed_actions(spec) -> str:
    from reap.specs import OneHot

    if isinstance(spec, OneHot):
        return f"one-hot vectors of length {spec.n}"
    if hasattr(spec, "n"):
        return f"integers from 0 to {spec.n - 1}"
    if hasattr(spec, "low"):
        low, high = spec.low.unique().tolist(), spec.high.unique().tolist()
        if len(low) == 1 and len(high) == 1:
            return f"integers from {low[0]} to {high[0]}"
        return f"integers from {spec.low.tolist()} to {spec.high.tolist()}"
    return repr(spec)


def check_policy(policy, env, spec: str, env_id: str) -> None:
    """Run ``policy`` once on a reset of ``env`` (built as the collector builds it); fail unless its
    action fits the env's action spec: shape, an integer dtype for a discrete env, and range there.

    Continuous actions outside their bounds are passed to the env as they are, as gymnasium does
    (its envs clip them).
    """
    from tensordict.nn import InteractionType, set_interaction_type

    from reap.collectors.policy import PolicyRunner, check_action

    def does_not_fit(exc: Exception) -> NoReturn:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        fail(f"--policy {spec!r} does not fit --env {env_id}: {message.removeprefix('policy: ')}")

    try:
        runner = PolicyRunner(policy, env)
    except (TypeError, ValueError, KeyError) as exc:
        does_not_fit(exc)
    root = env.reset()
    try:
        with torch.no_grad(), set_interaction_type(InteractionType.RANDOM):
            action = runner.probe(root.select(*env.state_keys))[env.action_key]
    except KeyError as exc:  # it writes other keys than the action
        does_not_fit(exc)
    except Exception as exc:  # noqa: BLE001 - e.g. a layer sized for another observation
        shapes = {key: tuple(root.get(key).shape) for key in runner.in_keys}
        fail(f"--policy {spec!r} fails on the first observation of --env {env_id} {shapes}: "
             f"{type(exc).__name__}: {exc}; build it for this env (a factory that takes an argument "
             "receives the env)")
    if not isinstance(action, torch.Tensor):
        fail(f"--policy {spec!r} does not fit --env {env_id}: its action is a {type(action).__name__}, not a "
             f"tensor; return the action, or write it under {env.action_key!r} (a TensorDictModule)")
    try:
        check_action(action, env)
    except (TypeError, ValueError) as exc:
        does_not_fit(exc)
    action_spec = env.action_spec
    if not action_spec.dtype.is_floating_point and not action_spec.is_in(action.to(action_spec.dtype)):
        shown = action.flatten()[:8].tolist()
        fail(f"--policy {spec!r} does not fit --env {env_id}: its first action is {shown}, the env "
             f"takes {_allowed_actions(action_spec)} ({type(action_spec).__name__}); make the policy "
             "return valid actions (e.g. logits.argmax(-1))")


class Interrupted(KeyboardInterrupt):
    """Raised in ``reap collect`` by SIGINT (Ctrl-C) or SIGTERM; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopSignals:
    """While active, SIGINT and SIGTERM stop ``reap collect`` in order.

    The first signal raises :class:`Interrupted`, or, inside :meth:`deferred`, is held until the
    block ends (so a batch is written whole or not at all; with ``then_raise=False`` it is only
    recorded). Later signals are only recorded: shutting down and saving are never cut short.
    The previous handlers come back on exit.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.signum: int | None = None
        self._deferring = False
        self._previous: dict = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    @property
    def name(self) -> str | None:
        return None if self.signum is None else signal.Signals(self.signum).name

    def _handle(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum
            if not self._deferring:
                raise Interrupted(signum)

    @contextlib.contextmanager
    def deferred(self, *, then_raise: bool = True):
        held = self.signum
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
        if then_raise and held is None and self.signum is not None:
            raise Interrupted(self.signum)


class RunStats:
    """Frames, finished episodes and their rewards, as the batches come."""

    def __init__(self):
        self.frames, self.episodes, self.reward_sum = 0, 0, 0.0

    def add(self, batch) -> None:
        finished = batch["next", "episode_reward"][batch["next", "done"]]
        self.episodes += finished.numel()
        self.reward_sum += float(finished.sum())
        self.frames += batch.numel()

    @property
    def mean_reward(self) -> float:
        return self.reward_sum / self.episodes if self.episodes else float("nan")


def check_args(args) -> None:
    """Every ``reap collect`` option that can be checked before anything runs (exit 2 if wrong)."""
    limits = {"frames": (1, INT64_MAX), "workers": (1, MAX_WORKERS), "num_envs": (1, MAX_NUM_ENVS),
              "frames_per_batch": (1, INT64_MAX), "max_frames_per_traj": (1, INT64_MAX), "seed": (0, INT64_MAX)}
    for name, (low, high) in limits.items():
        value = getattr(args, name)
        if value is not None and not low <= value <= high:
            shown = "2**63 - 1" if high == INT64_MAX else high
            fail(f"--{name.replace('_', '-')} must be an integer from {low} to {shown}, got {value}")
    check_env_id(args.env)
    if args.workers > 1 and args.backend == "local":
        fail("--workers > 1 needs a multi-process backend, e.g. --backend mp")
    if args.backend != "local":
        from reap.plugins import PluginNotInstalledError, get_collector_backend

        try:
            get_collector_backend(args.backend)
        except PluginNotInstalledError as exc:
            fail(f"--backend {args.backend!r}: {exc}")
    if args.weights and not args.policy:
        fail("--weights needs --policy (the factory that builds the module to load them into)")
    if args.out:
        check_out_dir(Path(args.out))


def check_env_id(env_id: str) -> None:
    """``--env`` must be registered: else name the package of its namespace, or close ids."""
    import gymnasium as gym

    _register_namespace(env_id)
    if env_id in gym.registry:
        return
    namespace = env_id.rpartition("/")[0]
    if namespace in ENV_PACKAGES:
        package = ENV_PACKAGES[namespace][0]
        fail(f"--env {env_id!r}: the {namespace} envs come with {package}, which is not installed; "
             f"install it (uv pip install {package})")
    close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else (
        "; python -c 'import gymnasium; gymnasium.pprint_registry()' lists them")
    fail(f"--env {env_id!r} is not a registered gymnasium id{hint}")


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def _available_memory() -> int:
    """Bytes of memory available to a new allocation (Linux's MemAvailable, else the total)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemAvailable:"))
        return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_sizes(args) -> None:
    """One batch must fit in memory and, with ``--out``, the whole run on its disk: estimated
    from the size of one frame of one env (the policy's own outputs come on top)."""
    import gymnasium as gym

    try:
        probe = _build_env(args.env, 1)
    except gym.error.DependencyNotInstalled as exc:
        fail(f"--env {args.env!r} needs a package that is not installed: {exc}")
    try:
        frame = probe.fake_tensordict().bytes() + 8  # and its trajectory id
    finally:
        probe.close()
    per_worker = -(-args.frames_per_batch // (args.workers * args.num_envs)) * args.num_envs
    batch = per_worker * args.workers
    need = 3 * batch * frame  # the collector's buffers, the batch handed out, the copy written
    if need > _available_memory():
        fail(f"--frames-per-batch {args.frames_per_batch} ({batch} frames a batch with --num-envs {args.num_envs}, "
             f"--workers {args.workers}) needs about {_gib(need)} of memory at {frame} bytes a frame of "
             f"{args.env}, more than the {_gib(_available_memory())} available; lower --frames-per-batch")
    if args.out:
        total = -(-args.frames // batch) * batch * frame
        folder = Path(args.out).absolute()
        while not folder.exists():
            folder = folder.parent
        free = shutil.disk_usage(folder).free
        if total > free:
            fail(f"--frames {args.frames} with --out needs about {_gib(total)} of disk at {frame} bytes a frame "
                 f"of {args.env}, more than the {_gib(free)} free in {folder}; collect fewer frames or "
                 "choose a disk with room")


def build_policy(args, env_fn):
    """The ``--policy`` with its ``--weights``, checked on the env (None: random actions)."""
    if not args.policy:
        return None
    probe = env_fn()
    try:
        policy = load_policy(args.policy, probe)
        if args.weights:
            if not isinstance(policy, torch.nn.Module):
                fail(f"--policy {args.policy!r} built a {type(policy).__name__}; weights need an nn.Module")
            try:
                policy.load_state_dict(load_weights(args.weights))
            except RuntimeError as exc:
                fail(f"--weights do not fit the policy: {exc}")
        check_policy(policy, probe, args.policy, args.env)
    finally:
        probe.close()
    return policy


def collect(args) -> None:
    """``reap collect``: see the module docstring and the README for the options."""
    with StopSignals() as signals:
        try:
            check_args(args)
            check_sizes(args)
            env_fn = _make_env_fn(args.env, args.num_envs)
            policy = build_policy(args, env_fn)
        except Interrupted:
            print(f"reap: stopped by {signals.name} before collecting; nothing was written", file=sys.stderr)
            raise SystemExit(128 + signals.signum) from None
        run(args, env_fn, policy, signals)


def run(args, env_fn, policy, signals: StopSignals) -> None:
    """Collect, write and summarise; SIGINT/SIGTERM or an error keep the frames so far."""
    from tqdm import tqdm

    from reap import Collector
    from reap.collectors.arguments import round_up
    from reap.plugins import PluginNotInstalledError, get_registries

    kwargs = dict(frames_per_batch=args.frames_per_batch, total_frames=args.frames,
                  max_frames_per_traj=args.max_frames_per_traj)
    stats, writer, total, error, profiled = RunStats(), None, None, None, None
    start = time.perf_counter()
    try:
        try:
            if args.backend == "local":
                collector = Collector(env_fn(), policy, **kwargs)
            else:
                collector = Collector([env_fn] * args.workers, policy, backend=args.backend, sync=True, **kwargs)
        except PluginNotInstalledError as exc:
            fail(f"--backend {args.backend!r}: {exc}")
        except ValueError as exc:  # options the backend refuses (e.g. a batch it cannot split evenly)
            fail(f"--backend {args.backend!r} with --workers {args.workers}, --frames-per-batch "
                 f"{args.frames_per_batch}: {exc}")
        if args.profile:
            try:
                collector.enable_profile(save_path=Path(args.profile) / "worker_{worker_idx}.json")
            except PluginNotInstalledError as exc:
                collector.shutdown()
                fail(f"--profile: {exc}")
            profiled = collector
        total = round_up(args.frames, collector.frames_per_batch)
        writer = open_writer(args.out, total) if args.out else None
        get_registries()  # plugins load now, not inside the timed loop
        bar = tqdm(total=total, unit="frames", disable=args.no_progress, file=sys.stderr,
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} frames [{elapsed}{postfix}]")
        start = time.perf_counter()
        with collector, bar:
            if args.seed is not None:
                collector.set_seed(args.seed)
            for batch in collector:
                with signals.deferred():  # a batch is written and counted whole, or not at all
                    if writer is not None:
                        writer.write(batch)
                    stats.add(batch)
                bar.update(batch.numel())
                fps = stats.frames / max(time.perf_counter() - start, 1e-9)
                bar.set_postfix(fps=f"{fps:,.0f}", episode_reward=f"{stats.mean_reward:.2f}")
    except Interrupted:
        pass
    except Exception as exc:  # noqa: BLE001 - the frames so far are saved, then it is re-raised
        if signals.signum is None:  # not a consequence of the signal (e.g. a worker it reached)
            error = exc
    elapsed = max(time.perf_counter() - start, 1e-9)
    with signals.deferred(then_raise=False):  # saving is never cut short
        finish(args, writer, stats, total, elapsed, signals.name, error)
    if profiled is not None and error is None:
        print(profiled.timings(), flush=True)
    if error is not None:
        raise error
    if signals.signum is not None:
        raise SystemExit(128 + signals.signum)


def finish(args, writer, stats: RunStats, total, elapsed: float, stopped_by, error) -> None:
    """Save what was collected (a checkpoint plus ``reap_meta.json``) and print the summary line."""
    complete = total is not None and stats.frames >= total
    if writer is not None:
        try:
            writer.close()
        except Exception as exc:  # noqa: BLE001 - keep the error that stopped the run
            if error is None:
                raise
            print(f"reap: the frames collected so far could not be saved: {exc}", file=sys.stderr)
        write_run_meta(writer.path, {
            "format": "reap-collect", "version": 1, "env": args.env, "frames": stats.frames,
            "frames_requested": total, "complete": complete, "stopped_by": stopped_by,
            "error": None if error is None else f"{type(error).__name__}: {error}",
            "episodes": stats.episodes, "backend": args.backend, "workers": args.workers,
            "num_envs": args.num_envs, "seed": args.seed, "writer": type(writer).__name__})
    line = (f"collected {stats.frames} frames in {elapsed:.2f} s ({stats.frames / elapsed:,.0f} frames/s), "
            f"{stats.episodes} episodes, mean episode reward {stats.mean_reward:.2f}")
    if writer is not None:
        line += f", written to {args.out}" if stats.frames else f", none written to {args.out}"
    if not complete:
        reason = f"stopped by {stopped_by}" if stopped_by else "stopped by an error"
        line += f"; {reason} before {total or args.frames} frames"
        if writer is not None:
            line += ", marked incomplete in reap_meta.json"
    print(line, flush=True)


#: How ``reap plugins`` heads each kind of registration.
PROVIDES_LABELS = {"backend": "collector backends", "weight sync": "weight-sync schemes",
                   "recurrent": "recurrent backends", "name": "names"}


def plugins(width: int = 100) -> None:
    """``reap plugins``: each plugin's distribution and version, then what it registers, grouped
    by kind and wrapped to ``width`` columns (or the terminal's, if narrower)."""
    import textwrap

    from reap.plugins import get_registries

    width = min(width, shutil.get_terminal_size((width, 24)).columns)
    indent = " " * 4
    for info in sorted(get_registries().plugins, key=lambda i: i.name):
        print(f"{info.name}: {info.distribution} {info.version}")
        groups: dict[str, list[str]] = {}
        for item in info.provides:  # "backend 'mp'", "weight sync 'pipe'", "name RayCollector"
            kind, _, name = item.rpartition(" ")
            groups.setdefault(kind, []).append(name.strip("'"))
        lines = [f"FAILED: {info.error}"] if info.error else [
            f"{PROVIDES_LABELS.get(kind, kind)}: {', '.join(names)}"
            for kind, names in groups.items()] or ["(no registrations)"]
        for line in lines:
            print(textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent * 2))


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "collect":
        collect(args)
    else:
        plugins()


if __name__ == "__main__":
    main()
