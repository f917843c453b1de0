"""``BaseCollector``: what every collector offers, whatever runs it.

Iteration yields batches (or ``None`` when a ``replay_buffer`` receives them), ``with`` shuts
the collector down, ``shutdown()`` may be called any number of times; after it, iterating
(an iterator made before included), seeding and weight updates raise ``RuntimeError``.
``start()`` collects into the replay buffer in a background thread instead (TorchRL's).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
from collections.abc import Callable, Iterator

from tensordict import TensorDictBase

from reap.plugins import get_registries, hook, resolve_export


class NoLengthError(RuntimeError, TypeError):
    """``len(collector)`` of a collector with no ``total_frames``."""


#: Methods that touch the envs, the policy or the workers: while ``start()``'s thread runs, each
#: waits for the batch under way (they and the thread take one lock), so they act between batches.
_BETWEEN_BATCHES = ("update_policy_weights_", "set_seed", "reset", "state_dict", "load_state_dict")


def _between_batches(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with self._background_lock():
            return method(self, *args, **kwargs)
    return wrapper


def _stopping_background(shutdown):
    @functools.wraps(shutdown)
    def wrapper(self, *args, **kwargs):
        self._stop_background(None)
        return shutdown(self, *args, **kwargs)
    return wrapper


class BaseCollector:
    """Common protocol of the single-process, multi-process and remote collectors.

    Subclasses set ``self._closed = False`` as the last step of a successful ``__init__``;
    garbage collection then shuts down what construction started.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in _BETWEEN_BATCHES:
            if name in cls.__dict__:
                setattr(cls, name, _between_batches(cls.__dict__[name]))
        if "shutdown" in cls.__dict__:
            cls.shutdown = _stopping_background(cls.__dict__["shutdown"])

    def _check_open(self) -> None:
        """Raise if ``shutdown()`` was called: every call that collects, seeds or moves weights
        checks this, and so does an iterator before each batch."""
        if getattr(self, "_closed", False):
            raise RuntimeError(f"{type(self).__name__}: the collector was shut down; create a new one")

    def __iter__(self) -> Iterator[TensorDictBase | None]:
        return self.iterator()

    @property
    def _traj_assembly(self) -> tuple[dict, list] | None:
        """TorchRL's name for ``trajs_per_batch``'s queues: (running trajectories by id, complete
        ones not yet handed out); None without ``trajs_per_batch``."""
        trajs = self.__dict__.get("_trajs")
        return None if trajs is None else (trajs.partial, trajs.complete)

    @property
    def trajs_per_batch(self) -> int | None:
        """The complete trajectories in each batch (None: ``frames_per_batch`` frames)."""
        trajs = self.__dict__.get("_trajs")
        return None if trajs is None else trajs.trajs_per_batch

    @property
    def trajs_per_write(self) -> int | None:
        """The complete trajectories per ``replay_buffer.extend()`` (None: all that are ready)."""
        trajs = self.__dict__.get("_trajs")
        return None if trajs is None else trajs.trajs_per_write

    @property
    def traj_format(self) -> str:
        """The layout of ``trajs_per_batch`` batches: ``"padded"`` (also without it, as TorchRL's) or ``"cat"``."""
        trajs = self.__dict__.get("_trajs")
        return "padded" if trajs is None else trajs.traj_format

    def __len__(self) -> int:
        """The number of batches, ``ceil(total_frames / frames_per_batch)``, as TorchRL's.

        A collector with ``total_frames=-1`` never stops and has no length: ``len()`` raises
        :class:`NoLengthError`, a ``RuntimeError`` as in TorchRL (and a ``TypeError``, so
        ``list()`` and progress bars treat it as an iterable of unknown length).
        """
        total = getattr(self, "total_frames", -1)
        if total is None or total <= 0:
            raise NoLengthError(
                f"{type(self).__name__} with total_frames={total} never stops and has no length; "
                "pass total_frames to get one"
            )
        return -(total // -self.frames_per_batch)

    def __bool__(self) -> bool:  # not len(): an endless collector is still a collector
        return True

    def iterator(self) -> Iterator[TensorDictBase | None]:
        raise NotImplementedError

    def next(self) -> TensorDictBase | None:
        """One batch (creates an iterator on first use and keeps it)."""
        self._check_open()
        if getattr(self, "_next_iter", None) is None:
            self._next_iter = self.iterator()
        try:
            return next(self._next_iter)
        except StopIteration:
            self._next_iter = None
            raise

    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, model_id=None,
                               weights_dict=None, **kwargs) -> None:
        raise NotImplementedError

    def get_policy_version(self) -> int:
        """How many times ``update_policy_weights_`` sent weights (TorchRL's ``get_policy_version``;
        multi-worker batches carry it as ``("collector", "policy_version")``)."""
        return self.policy_version

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        raise NotImplementedError

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state_dict: dict) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

    # ---- background collection (TorchRL's start / async_shutdown) --------------------------
    def start(self) -> None:
        """Collect in a background thread, every batch into the ``replay_buffer``, until
        ``total_frames`` are collected or :meth:`async_shutdown` (TorchRL's ``start``).

        Meanwhile weight updates, seeding and state calls act between two batches. An error
        in the background stops it with a warning; :meth:`async_shutdown` raises it.

        Examples:
            >>> from reap import Collector, GymEnv, LazyTensorStorage, ReplayBuffer
            >>> rb = ReplayBuffer(storage=LazyTensorStorage(1000))
            >>> collector = Collector(GymEnv("CartPole-v1"), None, frames_per_batch=50,
            ...                       total_frames=200, replay_buffer=rb)
            >>> collector.start()
            >>> collector.async_shutdown()  # after the batch under way
            >>> len(rb) % 50
            0
        """
        self._check_open()
        if getattr(self, "replay_buffer", None) is None:
            fix = ("build the collector with replay_buffer=..." if hasattr(self, "replay_buffer")
                   else f"{type(self).__name__} takes none")
            raise RuntimeError(f"{type(self).__name__}.start() collects into a replay buffer: {fix}, or iterate it")
        if self.is_running():
            return
        self._background_stop = threading.Event()
        self._background_error = None
        self.__dict__.setdefault("_batch_lock", threading.RLock())
        self._background = threading.Thread(target=self._collect_in_background, daemon=True,
                                            name=f"reap-{type(self).__name__}-start")
        self._background.start()

    def _collect_in_background(self) -> None:
        batches = self.iterator()
        try:
            while not self._background_stop.is_set():
                with self._batch_lock:
                    if next(batches, StopIteration) is StopIteration:
                        return
        except Exception as exc:
            self._background_error = exc
            warnings.warn(f"{type(self).__name__}: background collection stopped: {exc!r} "
                          "(async_shutdown() raises it)", RuntimeWarning, stacklevel=1)
        finally:
            batches.close()

    def is_running(self) -> bool:
        """Whether :meth:`start`'s background collection is running."""
        thread = self.__dict__.get("_background")
        return thread is not None and thread.is_alive()

    def async_shutdown(self, timeout: float | None = None, **shutdown_kwargs) -> None:
        """Stop :meth:`start`'s background collection after the batch under way (waiting at
        most ``timeout`` s for it), then ``shutdown(**shutdown_kwargs)``; raise the error that
        stopped the background collection, if any."""
        self._stop_background(timeout)
        self.shutdown(**shutdown_kwargs)
        error = self.__dict__.pop("_background_error", None)
        if error is not None:
            raise RuntimeError(f"{type(self).__name__}: the background collection failed: {error}") from error

    @contextlib.contextmanager
    def pause(self):
        """Inside the ``with`` block, :meth:`start`'s background collection waits (after the
        batch under way); remote collectors also drain the requests in flight."""
        self._check_open()
        with self._background_lock():
            yield None

    def _stop_background(self, timeout: float | None) -> None:
        thread = self.__dict__.get("_background")
        if thread is None or thread is threading.current_thread():
            return
        self._background_stop.set()
        thread.join(timeout)
        self._background = None  # past the timeout it ends after its batch, unwaited for

    def _background_lock(self):
        """The lock :meth:`start`'s thread holds for each batch (none before ``start()``)."""
        return self.__dict__.get("_batch_lock") or contextlib.nullcontext()

    # ---- TorchRL's remote helpers: attributes and methods of the collector(s) that collect ---
    def get_distant_attr(self, attr: str):
        """The attribute at path ``attr`` (``"env.batch_size"``, ``"plugin_options['x']"``) of
        the collector that runs the rollouts: this one; a multi-worker collector gives a list,
        one value per worker.

        Examples:
            >>> from reap import Collector, GymEnv
            >>> with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, worker_idx=3) as c:
            ...     c.get_distant_attr("worker_idx"), c.map_fn("get_distant_attr", [("worker_idx",), ("frames",)])
            (3, [3, 0])
        """
        return resolve_attr(self, attr)

    def map_fn(self, method_name: str, list_of_args: list | None = None, list_of_kwargs: list | None = None) -> list:
        """Call method ``method_name`` (a path, as :meth:`get_distant_attr`'s) once per entry of
        ``list_of_args`` and ``list_of_kwargs`` (equal lengths; either may be left out), in
        order; returns the results. A multi-worker collector takes one entry per worker and
        makes each call in its worker."""
        calls = paired_calls(list_of_args, list_of_kwargs, None, f"{type(self).__name__}.map_fn")
        method = resolve_attr(self, method_name)
        if not callable(method):
            raise TypeError(f"{type(self).__name__}.map_fn: {method_name!r} is not a method, it is {method!r}")
        return [method(*args, **kwargs) for args, kwargs in calls]

    # ---- TorchRL's collect hooks -------------------------------------------------------------
    _pre_collect_hook: Callable[[], None] | None = None
    _post_collect_hook: Callable[[TensorDictBase], None] | None = None

    @property
    def pre_collect_hook(self) -> Callable[[], None] | None:
        """Called with no argument before each rollout, where the rollout runs (in each worker
        of a multi-worker collector), as TorchRL's.

        Examples:
            >>> from reap import Collector, GymEnv
            >>> calls = []
            >>> with Collector(GymEnv("CartPole-v1"), None, frames_per_batch=4, total_frames=8,
            ...                pre_collect_hook=lambda: calls.append("pre"),
            ...                post_collect_hook=lambda batch: calls.append(batch.numel())) as c:
            ...     _ = list(c)
            >>> calls
            ['pre', 4, 'pre', 4]
        """
        return self._pre_collect_hook

    @pre_collect_hook.setter
    def pre_collect_hook(self, fn: Callable[[], None] | None) -> None:
        self._set_collect_hooks(checked_hook(fn, "pre_collect_hook"), self._post_collect_hook)

    @property
    def post_collect_hook(self) -> Callable[[TensorDictBase], None] | None:
        """Called with each batch: the batch the collector yields (after ``postproc``, before a
        ``replay_buffer`` gets it); in a multi-worker collector, each worker's batch, in the
        worker. An error it raises stops the iteration."""
        return self._post_collect_hook

    @post_collect_hook.setter
    def post_collect_hook(self, fn: Callable[[TensorDictBase], None] | None) -> None:
        self._set_collect_hooks(self._pre_collect_hook, checked_hook(fn, "post_collect_hook"))

    def set_post_collect_hook(self, fn: Callable[[TensorDictBase], None] | None) -> None:
        """The ``post_collect_hook`` setter as a method (TorchRL's)."""
        self.post_collect_hook = fn

    def _set_collect_hooks(self, pre, post) -> None:
        """Keep both hooks; a collector with workers also sends them to each worker."""
        self._pre_collect_hook, self._post_collect_hook = pre, post

    # ---- plugins: options that reach every worker, reports that come back ----------------
    def set_plugin_options(self, name: str, options) -> None:
        """Give plugin ``name`` its ``options`` in this collector and in each of its workers.

        ``None`` removes them. The ``reap_plugin_options`` hook sees them here; a remote
        collector then forwards :func:`options_for_worker` ``(options, i)`` to each worker ``i``,
        whose process calls ``set_plugin_options`` on the collector it runs.
        """
        table = self.__dict__.setdefault("_plugin_options", {})
        if options is None:
            table.pop(name, None)
        else:
            table[name] = options
        hook().reap_plugin_options(collector=self, name=name, options=options)
        self._forward_plugin_options(name, options)

    @property
    def plugin_options(self) -> dict:
        """The options set with :meth:`set_plugin_options`, by plugin name."""
        return dict(self.__dict__.get("_plugin_options", {}))

    def _forward_plugin_options(self, name: str, options) -> None:
        """Remote collectors send ``options_for_worker(options, i)`` to each worker ``i`` (and
        keep it for workers that restart); a collector that runs its own rollouts has none."""

    def plugin_report(self, name: str):
        """What plugin ``name`` gathered here and in the workers (the ``reap_plugin_report`` hook)."""
        return hook().reap_plugin_report(collector=self, name=name)

    def worker_plugin_reports(self, name: str) -> list | None:
        """Remote collectors: each worker's ``plugin_report(name)``, in worker order; None for a
        collector that runs its own rollouts."""
        return None

    # ---- profiling (reap-profiling, found through the plugin registry) ---------------------
    def enable_profile(self, config=None, **kwargs) -> None:
        """Trace chosen workers' rollouts with ``torch.profiler`` and time every phase.

        ``config`` is a ``ProfileConfig``, or pass its fields as keywords (``workers``,
        ``num_rollouts``, ``warmup_rollouts``, ``save_path``, ...). Call it before iterating.
        Provided by reap-profiling; without it this raises ``PluginNotInstalledError``.
        """
        resolve_export("enable_profile")(self, config, **kwargs)

    def disable_profile(self) -> None:
        """Stop profiling (writing the traces recorded so far); a no-op when it is not on."""
        if "disable_profile" in get_registries().exports:  # without reap-profiling nothing is on
            resolve_export("disable_profile")(self)

    @property
    def profile_config(self):
        """The ``ProfileConfig`` :meth:`enable_profile` set (None when profiling is off)."""
        if "profile_config" not in get_registries().exports:  # without reap-profiling nothing is on
            return None
        return resolve_export("profile_config")(self)

    def timings(self):
        """Per worker, the share of wall time in each phase of collection (reap-profiling)."""
        return resolve_export("collector_timings")(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __del__(self):
        if self.__dict__.get("_closed") is False:
            try:
                self.shutdown()
            except Exception as exc:  # interpreter teardown: report, never raise
                warnings.warn(f"{type(self).__name__}.shutdown() failed during garbage collection: {exc}",
                              RuntimeWarning, stacklevel=1)


def resolve_attr(obj, path: str):
    """``obj``'s attribute at ``path``: names joined by dots, each optionally indexed with
    literal keys (``"a.b['c'][0].d"``).

    Examples:
        >>> import types
        >>> resolve_attr(types.SimpleNamespace(a={"c": [5, 6]}), "a['c'][1]")
        6
        >>> resolve_attr(types.SimpleNamespace(a=1), "a..b")
        Traceback (most recent call last):
        ...
        ValueError: cannot read attribute path 'a..b': use names joined by dots, each optionally indexed with literal keys
    """
    import ast

    try:
        node = ast.parse(path, mode="eval").body
    except SyntaxError:
        node = None
    steps = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            steps.append(("attr", node.attr))
        else:
            steps.append(("item", ast.literal_eval(node.slice)))
        node = node.value
    if not isinstance(node, ast.Name):
        raise ValueError(f"cannot read attribute path {path!r}: use names joined by dots, each optionally "
                         "indexed with literal keys")
    value = getattr(obj, node.id)
    for kind, key in reversed(steps):
        value = getattr(value, key) if kind == "attr" else value[key]
    return value


def paired_calls(list_of_args, list_of_kwargs, expected: int | None, owner: str) -> list[tuple[tuple, dict]]:
    """``(args, kwargs)`` pairs of :meth:`BaseCollector.map_fn`'s lists (a missing one filled with
    ``()`` or ``{}``), checked: equal lengths, and ``expected`` entries when given (one per worker).

    Examples:
        >>> paired_calls([(1,), (2,)], None, 2, "map_fn")
        [((1,), {}), ((2,), {})]
        >>> paired_calls([(1,)], None, 2, "map_fn")
        Traceback (most recent call last):
        ...
        ValueError: map_fn: Expected 2 argument entries (one per worker), got 1
    """
    if list_of_args is None:
        list_of_args = [()] * (len(list_of_kwargs) if list_of_kwargs is not None else expected or 1)
    if list_of_kwargs is None:
        list_of_kwargs = [{}] * len(list_of_args)
    if len(list_of_args) != len(list_of_kwargs):
        raise ValueError(f"{owner}: list_of_args and list_of_kwargs must have the same length, got "
                         f"{len(list_of_args)} and {len(list_of_kwargs)}")
    if expected is not None and len(list_of_args) != expected:
        raise ValueError(f"{owner}: Expected {expected} argument entries (one per worker), got {len(list_of_args)}")
    return [(tuple(args), dict(kwargs)) for args, kwargs in zip(list_of_args, list_of_kwargs)]


def is_private_key(key) -> bool:
    """Whether a key has a part starting with ``"_"`` (reap's hidden arrays included): TorchRL's
    collectors leave such entries (e.g. an exploration module's ``"_ou_prev_noise"``) out of
    their batches, and so do reap's.

    Examples:
        >>> is_private_key("_dummy"), is_private_key(("out", "_dummy")), is_private_key(("next", "obs"))
        (True, True, False)
    """
    parts = key if isinstance(key, tuple) else (key,)
    return any(isinstance(part, str) and part.startswith("_") for part in parts)


def checked_hook(fn, name: str):
    """``fn`` if it is a callable or None, else a ``TypeError`` naming ``name``.

    Examples:
        >>> checked_hook(None, "pre_collect_hook") is None
        True
        >>> checked_hook(3, "post_collect_hook")
        Traceback (most recent call last):
        ...
        TypeError: post_collect_hook must be a callable or None, got 3
    """
    if fn is not None and not callable(fn):
        raise TypeError(f"{name} must be a callable or None, got {fn!r}")
    return fn


def options_for_worker(options, worker_idx: int):
    """``options`` as worker ``worker_idx`` of a remote collector gets them.

    A value with a ``for_worker(idx)`` method is specialised for that worker (nested remote
    collectors apply it at each level); any other value is forwarded unchanged.

    Examples:
        >>> from reap.collectors.base import options_for_worker
        >>> options_for_worker({"level": 2}, 1)
        {'level': 2}
    """
    for_worker = getattr(options, "for_worker", None)
    return options if for_worker is None else for_worker(worker_idx)


def check_frames(frames_per_batch, total_frames, name: str = "") -> None:
    """Validate the two frame-count arguments with messages that name them."""
    prefix = f"{name}: " if name else ""
    if isinstance(frames_per_batch, bool) or not isinstance(frames_per_batch, int) or frames_per_batch <= 0:
        raise ValueError(f"{prefix}frames_per_batch must be a positive int, got {frames_per_batch!r}")
    if isinstance(total_frames, bool) or not isinstance(total_frames, int) or (
        total_frames <= 0 and total_frames != -1
    ):
        raise ValueError(
            f"{prefix}total_frames must be a positive int, or -1 to collect forever, got {total_frames!r}"
        )
