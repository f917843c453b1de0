"""The arguments every multi-worker collector shares, checked and split per worker.

TorchRL's ``MultiSyncCollector`` and ``MultiAsyncCollector`` take ``create_env_fn`` (one env
constructor per worker, or one for ``num_workers``), ``policy`` or ``policy_factory``,
``frames_per_batch`` (the total of a sync batch, each worker's batch in async), ``total_frames``,
``cat_results``, ``worker_timeout``... reap-collectors-mp, the reap-threads plugin and any other
backend with workers check them here, so that they accept the same values and fail with the same
message: it names the collector (``owner``), the argument and the fix.

Examples:
    >>> from reap import GymEnv
    >>> make_env = lambda: GymEnv("CartPole-v1")
    >>> fns = env_constructors(make_env, 3, "MyCollector")
    >>> len(fns), fns[0] is make_env
    (3, True)
    >>> frames_per_worker(100, len(fns), "MyCollector", sync=True)  # a sync batch, split (rounded up)
    [34, 34, 34]
    >>> frames_per_worker(100, len(fns), "MyCollector", sync=False)  # async: each worker's batch
    [100, 100, 100]
    >>> per_worker({"render": False}, len(fns), "create_env_kwargs", "MyCollector")
    [{'render': False}, {'render': False}, {'render': False}]
    >>> checked_cat_results("cat", "MySyncCollector")
    0
    >>> env_constructors(make_env(), None, "MyCollector")
    Traceback (most recent call last):
    ...
    TypeError: MyCollector: create_env_fn must be callables that build the env in the worker, not an env instance (pass the constructor, e.g. lambda: GymEnv(...))
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable

import torch
from tensordict.nn import InteractionType

from reap.envs.base import EnvBase, refuse_torchrl_env

#: TorchRL arguments that tune TorchRL's own machinery (threads, buffers, CUDA syncs, policy
#: wrapping): every reap collector takes them, and they change nothing.
TORCHRL_NO_EFFECT = frozenset({"num_threads", "num_sub_threads", "use_buffers", "trust_policy", "no_cuda_sync"})
#: TorchRL arguments for features reap does not have: taken at their default (or any false value
#: where the default is None or False), refused otherwise.
TORCHRL_DEFAULT_ONLY = {
    "reset_when_done": True, "preemptive_threshold": None, "trajs_per_batch": None, "trajs_per_write": None,
    "traj_format": None, "weight_recv_schemes": None, "init_fn": None,
    "compact_obs": False, "interruptor": None,
    "compile_policy": None, "cudagraph_policy": None, "collector_class": None, "return_same_td": False,
    "weight_sync_schemes": None,
}
_DEFAULT_ONLY_FIX = {
    "compile_policy": "compile the policy yourself (torch.compile(policy)) before passing it",
    "cudagraph_policy": "reap steps policies on the CPU; leave it unset",
    "trajs_per_batch": "reap's Collector, MultiSyncCollector and MultiAsyncCollector take it; here, "
                       "split_trajs=True regroups each batch by trajectory",
    "trajs_per_write": "reap's Collector, MultiSyncCollector and MultiAsyncCollector take it, with trajs_per_batch",
    "traj_format": "reap's Collector, MultiSyncCollector and MultiAsyncCollector take it, with trajs_per_batch",
    "preemptive_threshold": "MultiSyncCollector (worker processes, or reap-threads' threads) takes it",
    "interruptor": "reap's Collector and the multi-process collectors take it",
    "compact_obs": "reap's Collector, MultiSyncCollector and MultiAsyncCollector take it",
    "weight_sync_schemes": "a local collector runs the trainer's policy itself and takes only NoWeightSyncScheme "
                           "(updates then ignored); other schemes are for the collectors with workers "
                           "(num_collectors=..., backend=...)",
}


def check_torchrl_kwargs(kwargs: dict, owner: str, *, also_no_effect=()) -> None:
    """Accept the TorchRL arguments a collector does not implement itself: those with no
    effect (``TORCHRL_NO_EFFECT`` and ``also_no_effect``) and those at their default
    (``TORCHRL_DEFAULT_ONLY``); anything else is an error that names it.

    Examples:
        >>> check_torchrl_kwargs({"trust_policy": True, "reset_when_done": True}, "MyCollector")
        >>> check_torchrl_kwargs({"compile_policy": True}, "MyCollector")
        Traceback (most recent call last):
        ...
        NotImplementedError: MyCollector: compile_policy=True is not supported by reap; leave it at None (compile the policy yourself (torch.compile(policy)) before passing it)
    """
    for key, value in kwargs.items():
        if key in TORCHRL_NO_EFFECT or key in also_no_effect:
            continue
        if key not in TORCHRL_DEFAULT_ONLY:
            raise TypeError(f"{owner}: unexpected keyword argument {key!r}")
        default = TORCHRL_DEFAULT_ONLY[key]
        if value is default or value == default or (default in (None, False) and not value):
            continue
        fix = _DEFAULT_ONLY_FIX.get(key)
        raise NotImplementedError(f"{owner}: {key}={value!r} is not supported by reap; leave it at {default!r}"
                                  + (f" ({fix})" if fix else ""))


def pop_no_weight_sync(kwargs: dict) -> bool:
    """Take ``weight_sync_schemes`` out of a local collector's TorchRL ``kwargs`` when every
    scheme in it is a :class:`~reap.weight_update.NoWeightSyncScheme` (True: then, as TorchRL's,
    ``update_policy_weights_`` leaves the policy as it is); any other value stays for
    :func:`check_torchrl_kwargs` to refuse.

    Examples:
        >>> from reap.weight_update import NoWeightSyncScheme
        >>> kwargs = {"weight_sync_schemes": {"policy": NoWeightSyncScheme()}}
        >>> pop_no_weight_sync(kwargs), kwargs
        (True, {})
    """
    from reap.weight_update import NoWeightSyncScheme

    schemes = kwargs.get("weight_sync_schemes")
    if not isinstance(schemes, dict) or not schemes:
        return False
    if not all(isinstance(s, NoWeightSyncScheme) for s in schemes.values()):
        return False
    del kwargs["weight_sync_schemes"]
    return True


def check_int(value, name: str, owner: str, *, minimum: int = 1, allow_none: bool = True) -> None:
    """Raise ``ValueError`` unless ``value`` is an int (not a bool) ``>= minimum`` (or ``None``,
    when ``allow_none``).

    Examples:
        >>> check_int(0, "max_restarts", "MyCollector", minimum=0, allow_none=False)
        >>> check_int(0, "max_frames_per_traj", "MyCollector")
        Traceback (most recent call last):
        ...
        ValueError: MyCollector: max_frames_per_traj must be a positive int or None, got 0
    """
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive int" if minimum == 1 else "a non-negative int"
        raise ValueError(f"{owner}: {name} must be {kind}{' or None' if allow_none else ''}, got {value!r}")


def checked_init_random_frames(value, owner: str) -> int:
    """``init_random_frames`` as TorchRL takes it: the frames of random actions that come first;
    None or a negative count (TorchRL's default ``-1``) means none, a whole float counts.

    Examples:
        >>> [checked_init_random_frames(v, "C") for v in (None, -1, -5, 0, 64, 1e3)]
        [0, 0, 0, 0, 64, 1000]
        >>> checked_init_random_frames(2.5, "C")
        Traceback (most recent call last):
        ...
        ValueError: C: init_random_frames must be a whole number of frames (None or a negative one: none), got 2.5
    """
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{owner}: init_random_frames must be a whole number of frames (None or a negative "
                         f"one: none), got {value!r}")
    return max(value, 0)


def checked_exploration_type(value, owner: str) -> InteractionType:
    """``exploration_type``: an ``InteractionType`` (TorchRL's ``ExplorationType``) or its name.

    Examples:
        >>> checked_exploration_type("mode", "C")
        <InteractionType.MODE: 'mode'>
    """
    if isinstance(value, InteractionType):
        return value
    if isinstance(value, str):
        try:
            return InteractionType(value.lower())
        except ValueError:
            pass
    options = ", ".join(repr(m.value) for m in InteractionType)
    raise ValueError(f"{owner}: exploration_type must be an ExplorationType or one of {options}, got {value!r}")


def checked_device(name: str, device, owner: str) -> torch.device | None:
    """A device argument as a ``torch.device`` (None stays None); ``env_device`` must be the CPU.

    Examples:
        >>> checked_device("storing_device", "cpu", "C")
        device(type='cpu')
        >>> checked_device("env_device", "cuda:0", "C")
        Traceback (most recent call last):
        ...
        ValueError: C: env_device='cuda:0': reap envs step on the CPU; leave env_device unset and use storing_device to place batches on another device
    """
    if device is None:
        return None
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{owner}: {name}={device!r} is not a device ({exc}); give e.g. 'cpu' or 'cuda:0'") from None
    if device.type != "cpu" and name == "env_device":
        raise ValueError(f"{owner}: env_device={str(device)!r}: reap envs step on the CPU; leave env_device unset "
                         "and use storing_device to place batches on another device")
    return device


def check_collector_kwargs(kwargs: dict, owner: str) -> None:
    """Refuse, as reap's ``Collector`` would, the values it refuses among ``kwargs`` (any of its
    keyword arguments, others are ignored): ``Collector`` checks its own with it, and the
    drivers of remote workers what they will send, before any worker starts.

    Examples:
        >>> check_collector_kwargs({"init_random_frames": -1, "split_trajs": True}, "C")
        >>> check_collector_kwargs({"exploration_type": "greedy"}, "C")
        Traceback (most recent call last):
        ...
        ValueError: C: exploration_type must be an ExplorationType or one of 'mode', 'median', 'mean', 'random', 'deterministic', got 'greedy'
    """
    get = kwargs.get
    if "frames_per_batch" in kwargs:
        check_int(get("frames_per_batch"), "frames_per_batch", owner, allow_none=False)
    if "total_frames" in kwargs:
        checked_total_frames(get("total_frames"), owner)
    check_int(get("max_frames_per_traj"), "max_frames_per_traj", owner)
    checked_init_random_frames(get("init_random_frames"), owner)
    if "exploration_type" in kwargs:
        checked_exploration_type(get("exploration_type"), owner)
    if get("policy") is not None and get("policy_factory") is not None:
        raise ValueError(f"{owner}: pass policy or policy_factory, not both")
    if get("policy_factory") is not None and not callable(get("policy_factory")):
        raise TypeError(f"{owner}: policy_factory must be callable, got {get('policy_factory')!r}")
    check_postproc_and_buffer(get("postproc"), get("replay_buffer"), owner)
    for name in ("device", "storing_device", "policy_device", "env_device"):
        checked_device(name, get(name), owner)


def per_worker(value, n: int, name: str, owner: str) -> list:
    """``value`` once per worker: a list or tuple must have ``n`` entries, anything else repeats.

    Examples:
        >>> per_worker("cpu", 2, "policy_device", "MyCollector")
        ['cpu', 'cpu']
        >>> per_worker(["cpu"], 2, "policy_device", "MyCollector")
        Traceback (most recent call last):
        ...
        ValueError: MyCollector: policy_device has 1 entries but there are 2 workers
    """
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{owner}: {name} has {len(value)} entries but there are {n} workers")
        return list(value)
    return [value] * n


class EnvCopy:
    """A constructor that gives a copy of ``env`` each time it is called: an env instance in a
    multi-worker collector's ``create_env_fn`` list (TorchRL sends it to its worker pickled, so
    each worker steps its own copy; the instance itself is not stepped). It is pickled (with
    cloudpickle) here, so an env that cannot travel is named at once.

    Examples:
        >>> from reap import GymEnv
        >>> env = GymEnv("CartPole-v1")
        >>> copy = EnvCopy(env, "create_env_fn[0]", "MyCollector")()
        >>> copy is env, type(copy).__name__
        (False, 'GymEnv')
    """

    def __init__(self, env: EnvBase, name: str, owner: str):
        import cloudpickle  # gymnasium's dependency: wherever reap-core is

        try:
            self._blob = cloudpickle.dumps(env)
        except Exception as exc:
            raise TypeError(f"{owner}: {name} is an env instance that cannot be sent to a worker ({exc}); pass "
                            "a constructor instead (e.g. lambda: GymEnv(...)): each worker builds its own") from None
        self.name = type(env).__name__

    def __call__(self) -> EnvBase:
        import pickle

        return pickle.loads(self._blob)

    def __repr__(self) -> str:
        return f"EnvCopy({self.name})"


def env_constructors(create_env_fn, num_workers: int | None, owner: str) -> list[Callable]:
    """One env constructor per worker: ``create_env_fn`` as a list (``num_workers``, if given,
    must match its length), or one callable repeated ``num_workers`` times (default 1). An env
    instance in the list becomes an :class:`EnvCopy` (each worker steps its own copy, as in
    TorchRL); a lone env instance is refused (pass a list, or a constructor)."""
    for fn in create_env_fn if isinstance(create_env_fn, (list, tuple)) else [create_env_fn]:
        refuse_torchrl_env(fn, owner)
    if isinstance(create_env_fn, EnvBase):
        raise TypeError(
            f"{owner}: create_env_fn must be callables that build the env in the worker, "
            "not an env instance (pass the constructor, e.g. lambda: GymEnv(...))"
        )
    if isinstance(create_env_fn, (list, tuple)):
        copies = {}  # the same instance listed twice is pickled once
        fns = [copies.setdefault(id(fn), EnvCopy(fn, f"create_env_fn[{i}]", owner)) if isinstance(fn, EnvBase)
               else fn for i, fn in enumerate(create_env_fn)]
        if not fns:
            raise ValueError(f"{owner}: create_env_fn is an empty list; pass one env constructor per worker")
        if num_workers is not None and num_workers != len(fns):
            raise ValueError(f"{owner}: num_workers={num_workers} but create_env_fn has {len(fns)} constructors")
    elif callable(create_env_fn):
        check_int(num_workers, "num_workers", owner, minimum=1)
        fns = [create_env_fn] * (num_workers or 1)
    else:
        raise TypeError(f"{owner}: create_env_fn must be a list of env constructors (callables), got "
                        f"{type(create_env_fn).__name__}")
    for fn in fns:
        if isinstance(fn, EnvBase) or not callable(fn):
            raise TypeError(f"{owner}: every create_env_fn entry must be a callable returning an env, got {fn!r}")
    return fns


def policy_factories(policy, policy_factory, n: int, owner: str, *, allow_both: bool = False) -> list:
    """``policy_factory`` once per worker (``None`` entries where the ``policy`` is used); passing
    both ``policy`` and ``policy_factory`` is an error unless ``allow_both`` (TorchRL's
    multi-process collectors: the workers build theirs with the factory, and the ``policy`` is
    where ``update_policy_weights_()`` reads the weights, so it need not be picklable).

    Examples:
        >>> policy_factories(None, None, 2, "MyCollector")
        [None, None]
    """
    if policy is not None and policy_factory is not None and not allow_both:
        raise ValueError(f"{owner}: pass policy or policy_factory, not both")
    factories = per_worker(policy_factory, n, "policy_factory", owner)
    for factory in factories:
        if factory is not None and not callable(factory):
            raise TypeError(f"{owner}: policy_factory must be callable, got {factory!r}")
    return factories


def frames_per_worker(frames_per_batch, n: int, owner: str, *, sync: bool) -> list[int]:
    """Each worker's batch: ``frames_per_batch`` as a list (one per worker), or an int that is the
    total of one batch split across the ``n`` workers (``sync``, rounded up) or each worker's
    batch (async)."""
    if isinstance(frames_per_batch, (list, tuple)):
        if len(frames_per_batch) != n:
            raise ValueError(
                f"{owner}: frames_per_batch has {len(frames_per_batch)} entries but there are "
                f"{n} workers; pass one per worker or an int for the total"
            )
        for value in frames_per_batch:
            check_int(value, "frames_per_batch", owner, allow_none=False)
        return list(frames_per_batch)
    check_int(frames_per_batch, "frames_per_batch", owner, allow_none=False)
    return [-(-frames_per_batch // n) if sync else frames_per_batch] * n


def checked_total_frames(total_frames, owner: str) -> int:
    """``total_frames`` as an int: a positive count, or ``-1`` (also for ``None``) to collect forever.

    Examples:
        >>> checked_total_frames(None, "MyCollector")
        -1
    """
    if total_frames is None:
        return -1
    if isinstance(total_frames, bool) or not isinstance(total_frames, int) or (
        total_frames <= 0 and total_frames != -1
    ):
        raise ValueError(f"{owner}: total_frames must be a positive int, or -1 to collect forever, got {total_frames!r}")
    return total_frames


def checked_cat_results(cat_results, owner: str, *, sync_name: str | None = None) -> str | int:
    """``cat_results`` as ``"stack"`` (the default) or the dim to concatenate along (``"cat"`` is
    ``0``). ``sync_name`` is the sync collector's name when ``owner`` is an async collector, where
    only ``"stack"`` (the default) is allowed.

    Examples:
        >>> checked_cat_results("cat", "MyAsyncCollector", sync_name="MySyncCollector")
        Traceback (most recent call last):
        ...
        ValueError: MyAsyncCollector: cat_results=0 only applies to MySyncCollector
    """
    if cat_results == "cat":
        cat_results = 0
    if cat_results is None:
        cat_results = "stack"
    if not (cat_results == "stack" or (isinstance(cat_results, int) and not isinstance(cat_results, bool))):
        raise ValueError(
            f"{owner}: cat_results must be 'stack', 'cat' or an int dim to concatenate along, got {cat_results!r}"
        )
    if sync_name is not None and cat_results != "stack":
        raise ValueError(f"{owner}: cat_results={cat_results!r} only applies to {sync_name}")
    return cat_results


def idle_seconds_from_env(environ=os.environ) -> float | None:
    """TorchRL's ``MAX_IDLE_COUNT`` variable (idle polls of one second each, read at import), in
    seconds; ``None`` when it is not set.

    Examples:
        >>> idle_seconds_from_env({"MAX_IDLE_COUNT": "30"}), idle_seconds_from_env({})
        (30.0, None)
        >>> idle_seconds_from_env({"MAX_IDLE_COUNT": "soon"})
        Traceback (most recent call last):
        ...
        ValueError: MAX_IDLE_COUNT must be a positive whole number of seconds (TorchRL's idle polls, 1 s each), got 'soon'; unset it for reap's worker_timeout of 120 s
    """
    value = environ.get("MAX_IDLE_COUNT")
    if value is None:
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"MAX_IDLE_COUNT must be a positive whole number of seconds (TorchRL's idle polls, 1 s "
                         f"each), got {value!r}; unset it for reap's worker_timeout of 120 s")
    return float(int(value))


#: What every multi-worker backend takes, with the same defaults: seconds a worker that owes a
#: batch (or an answer) may go without delivering one (TorchRL's ``MAX_IDLE_COUNT`` where it is
#: set); seconds to start a worker; restarts per worker with ``on_worker_failure="restart"``.
WORKER_TIMEOUT = idle_seconds_from_env() or 120.0
START_TIMEOUT = 120.0
MAX_RESTARTS = 3
FAILURE_MODES = ("raise", "restart")


def checked_seconds(value, name: str, owner: str) -> float:
    """A positive number of seconds, as a float.

    Examples:
        >>> checked_seconds(2, "start_timeout", "C")
        2.0
        >>> checked_seconds(0, "worker_timeout", "C")
        Traceback (most recent call last):
        ...
        ValueError: C: worker_timeout must be a positive number of seconds, got 0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive number of seconds, got {value!r}")
    return float(value)


def checked_worker_timeout(worker_timeout, owner: str) -> float:
    """``worker_timeout`` (seconds a worker may take to answer) as a positive float."""
    return checked_seconds(worker_timeout, "worker_timeout", owner)


def checked_failure_options(on_worker_failure, max_restarts, owner: str) -> None:
    """``on_worker_failure`` (``"raise"`` or ``"restart"``) and ``max_restarts`` (>= 0).

    Examples:
        >>> checked_failure_options("retry", 3, "C")
        Traceback (most recent call last):
        ...
        ValueError: C: on_worker_failure must be one of ('raise', 'restart'), got 'retry'
    """
    if on_worker_failure not in FAILURE_MODES:
        raise ValueError(f"{owner}: on_worker_failure must be one of {FAILURE_MODES}, got {on_worker_failure!r}")
    check_int(max_restarts, "max_restarts", owner, minimum=0, allow_none=False)


def renamed(old: str, old_value, new: str, new_value, default, owner: str):
    """The value of argument ``new``, taking ``old`` (its deprecated name) with a DeprecationWarning.

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     renamed("actor_timeout", 30, "worker_timeout", 120.0, 120.0, "C"), str(caught[0].message)
        (30, 'C: actor_timeout is deprecated; pass worker_timeout=30')
    """
    if old_value is None:
        return new_value
    if new_value != default:
        raise TypeError(f"{owner}: pass {new} or {old} (its deprecated name), not both")
    warnings.warn(f"{owner}: {old} is deprecated; pass {new}={old_value!r}", DeprecationWarning, stacklevel=3)
    return old_value


def checked_flag(value, name: str, owner: str, hint: str = "") -> bool:
    """A True/False argument ``name`` (``hint`` ends the error message).

    Examples:
        >>> checked_flag(True, "worker_tags", "MyCollector")
        True
        >>> checked_flag(None, "worker_tags", "MyCollector")
        Traceback (most recent call last):
        ...
        TypeError: MyCollector: worker_tags must be True or False, got None
    """
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be True or False, got {value!r}{hint}")
    return value


def checked_track_policy_version(value, owner: str) -> bool:
    """``track_policy_version``: True or False (TorchRL also takes a ``PolicyVersion``
    transform; reap counts versions itself).

    Examples:
        >>> checked_track_policy_version("uuid", "MyCollector")
        Traceback (most recent call last):
        ...
        TypeError: MyCollector: track_policy_version must be True or False, got 'uuid' (reap numbers versions 0, 1, ... itself: pass True)
    """
    return checked_flag(value, "track_policy_version", owner, " (reap numbers versions 0, 1, ... itself: pass True)")


def check_postproc_and_buffer(postproc, replay_buffer, owner: str) -> None:
    """``postproc`` must be callable and ``replay_buffer`` have ``extend()`` (each or ``None``)."""
    if postproc is not None and not callable(postproc):
        raise TypeError(f"{owner}: postproc must be callable, got {postproc!r}")
    if replay_buffer is not None and not hasattr(replay_buffer, "extend"):
        raise TypeError(f"{owner}: replay_buffer must have an extend() method (a reap replay buffer)")


def checked_worker_ids(worker_ids, num_workers: int) -> list[int]:
    """The workers ``update_policy_weights_(worker_ids=...)`` addresses: all (``None``), one index
    or a sequence of indices in ``[0, num_workers)``.

    Examples:
        >>> checked_worker_ids(None, 3), checked_worker_ids(1, 3), checked_worker_ids((0, 2), 3)
        ([0, 1, 2], [1], [0, 2])
        >>> checked_worker_ids(3, 3)
        Traceback (most recent call last):
        ...
        ValueError: update_policy_weights_: worker_ids must be worker indices in [0, 3), got 3
    """
    if worker_ids is None:
        return list(range(num_workers))
    ids = [worker_ids] if isinstance(worker_ids, int) else list(worker_ids)
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < num_workers:
            raise ValueError(
                f"update_policy_weights_: worker_ids must be worker indices in [0, {num_workers}), got {worker_ids!r}"
            )
    return ids


__all__ = [
    "FAILURE_MODES",
    "MAX_RESTARTS",
    "START_TIMEOUT",
    "WORKER_TIMEOUT",
    "check_collector_kwargs",
    "check_int",
    "check_postproc_and_buffer",
    "checked_cat_results",
    "checked_device",
    "checked_exploration_type",
    "checked_failure_options",
    "checked_init_random_frames",
    "checked_flag",
    "checked_track_policy_version",
    "checked_seconds",
    "checked_total_frames",
    "checked_worker_ids",
    "checked_worker_timeout",
    "idle_seconds_from_env",
    "EnvCopy",
    "env_constructors",
    "frames_per_worker",
    "per_worker",
    "policy_factories",
    "renamed",
]


def round_up(n: int, multiple: int) -> int:
    """``n`` rounded up to a whole number of ``multiple`` (how collectors round frame counts).

    Example:
        >>> round_up(10, 4)
        12
    """
    return -(-n // multiple) * multiple
