"""``ProfileConfig``: which workers to trace, which of their rollouts, and what the profiler records.

Names and defaults follow TorchRL's ``enable_profile``. Two things differ: with
``warmup_rollouts=0`` the very first rollout is recorded, and ``workers=[]`` traces nobody (the
timing summary still runs).

Examples:
    >>> from reap_profiling import ProfileConfig
    >>> config = ProfileConfig(workers=[1], num_rollouts=4, warmup_rollouts=1,
    ...                        save_path="traces/w{worker_idx}.json")
    >>> config.recorded_rollouts
    range(1, 4)
    >>> sub = config.for_worker(1).for_worker(0)  # sub-worker 0 of remote worker 1
    >>> sub.worker_label, sub.traced, sub.trace_path().as_posix()
    ('1.0', True, 'traces/w1.0.json')
    >>> config.for_worker(0).traced
    False
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

#: The profiler activities ``ProfileConfig.activities`` accepts, by name.
ACTIVITIES = ("cpu", "cuda")
DEFAULT_SAVE_PATH = "collector_profile_{worker_idx}.json"
PLACEHOLDER = "{worker_idx}"


def _activity_name(value) -> str:
    name = getattr(value, "name", value)  # torch.profiler.ProfilerActivity.CPU -> "CPU"
    if isinstance(name, str) and name.lower() in ACTIVITIES:
        return name.lower()
    raise ValueError(
        f"ProfileConfig: activities must hold 'cpu' and/or 'cuda' (or ProfilerActivity members), "
        f"got {value!r}"
    )


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"ProfileConfig: {name} must be >= {minimum} (an int), got {value!r}")


@dataclass(frozen=True, kw_only=True)
class ProfileConfig:
    """What to profile in a collector's workers (see ``collector.enable_profile``).

    Args:
        workers: indices of the workers whose rollouts are traced (default ``[0]``). A
            single-process ``Collector`` is worker 0; every sub-worker of a chosen remote worker
            is traced; ``[]`` traces nobody and only times.
        num_rollouts: rollouts counted from each worker's first, warm-up included; tracing
            stops after rollout ``num_rollouts - 1`` (0-based). Default 3.
        warmup_rollouts: rollouts skipped before recording (default 1); ``0`` records the very
            first rollout.
        save_path: each traced worker's Chrome-trace JSON; ``{worker_idx}`` becomes the worker's
            index (``"1"``, or ``"1.0"`` for sub-worker 0 of remote worker 1). Without the
            placeholder, workers of a remote collector get ``_<index>`` before the suffix.
            Default ``collector_profile_{worker_idx}.json``.
        activities: ``"cpu"``, ``"cuda"`` (default: the CPU, and CUDA when it is available).
            CUDA asked for where there is none records the CPU and warns once.
        record_shapes, profile_memory, with_stack, with_flops: passed to torch's profiler
            (defaults ``True``, ``False``, ``True``, ``False``, as TorchRL).
        on_trace_ready: called with the profiler once a worker's trace is complete, instead of
            writing ``save_path`` (picklable, for worker processes).
        timing_sample_every: one rollout in this many (the first included) times its env steps
            and policy calls one by one, to split the rollout's time between them; the other
            rollouts are timed as a whole. Default 10.

    Examples:
        >>> from reap_profiling import ProfileConfig
        >>> ProfileConfig(num_rollouts=2, warmup_rollouts=0).recorded_rollouts
        range(0, 2)
        >>> ProfileConfig(num_rollouts=1, warmup_rollouts=1)
        Traceback (most recent call last):
        ...
        ValueError: ProfileConfig: num_rollouts=1 must be greater than warmup_rollouts=1 (it counts the warm-up rollouts too); e.g. num_rollouts=2, warmup_rollouts=1 records one rollout
    """

    workers: Sequence[int] | None = None
    num_rollouts: int = 3
    warmup_rollouts: int = 1
    save_path: str | Path | None = None
    activities: Sequence | None = None
    record_shapes: bool = True
    profile_memory: bool = False
    with_stack: bool = True
    with_flops: bool = False
    on_trace_ready: Callable | None = None
    timing_sample_every: int = 10
    #: where this copy sits among nested remote workers; set by ``for_worker``, not by users
    _worker_path: tuple[int, ...] = field(default=(), repr=False)

    def __post_init__(self):
        workers = (0,) if self.workers is None else self.workers
        if isinstance(workers, (int, str)) or not all(
            isinstance(w, int) and not isinstance(w, bool) and w >= 0 for w in workers
        ):
            raise ValueError(f"ProfileConfig: workers must be a list of worker indices (ints >= 0), got {self.workers!r}")
        object.__setattr__(self, "workers", sorted(set(workers)))  # a list, as TorchRL's
        _check_int("num_rollouts", self.num_rollouts, 1)
        _check_int("warmup_rollouts", self.warmup_rollouts, 0)
        if self.num_rollouts <= self.warmup_rollouts:
            raise ValueError(
                f"ProfileConfig: num_rollouts={self.num_rollouts} must be greater than warmup_rollouts="
                f"{self.warmup_rollouts} (it counts the warm-up rollouts too); e.g. num_rollouts="
                f"{self.warmup_rollouts + 1}, warmup_rollouts={self.warmup_rollouts} records one rollout"
            )
        _check_int("timing_sample_every", self.timing_sample_every, 1)
        if self.save_path is not None and not isinstance(self.save_path, (str, Path)):
            raise TypeError(f"ProfileConfig: save_path must be a str or a Path, got {self.save_path!r}")
        if self.activities is not None:
            if isinstance(self.activities, str) or not isinstance(self.activities, Sequence):
                raise ValueError(f"ProfileConfig: activities must be a list such as ['cpu', 'cuda'], got {self.activities!r}")
            names = tuple(dict.fromkeys(_activity_name(a) for a in self.activities))
            if not names:
                raise ValueError("ProfileConfig: activities is empty; pass ['cpu'] and/or 'cuda'")
            object.__setattr__(self, "activities", names)
        for name in ("record_shapes", "profile_memory", "with_stack", "with_flops"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"ProfileConfig: {name} must be True or False, got {getattr(self, name)!r}")
        if self.on_trace_ready is not None and not callable(self.on_trace_ready):
            raise TypeError(f"ProfileConfig: on_trace_ready must be callable, got {self.on_trace_ready!r}")

    # ---- per worker ------------------------------------------------------------------------
    def for_worker(self, worker_idx: int) -> ProfileConfig:
        """This config as worker ``worker_idx`` of a remote collector receives it."""
        return dataclasses.replace(self, _worker_path=(*self._worker_path, worker_idx))

    @property
    def worker_label(self) -> str:
        """The worker's index as file names show it: ``"0"`` in-process, ``"1.0"`` nested."""
        return ".".join(map(str, self._worker_path)) or "0"

    @property
    def traced(self) -> bool:
        """Whether this worker records a trace (its top-level index is among ``workers``)."""
        top = self._worker_path[0] if self._worker_path else 0
        return top in self.workers

    @property
    def recorded_rollouts(self) -> range:
        """The 0-based indices of the rollouts a traced worker records."""
        return range(self.warmup_rollouts, self.num_rollouts)

    def trace_path(self) -> Path:
        """Where this worker's trace goes."""
        template = str(self.save_path if self.save_path is not None else DEFAULT_SAVE_PATH)
        label = self.worker_label
        if PLACEHOLDER in template:
            return Path(template.replace(PLACEHOLDER, label))
        path = Path(template)
        if not self._worker_path:
            return path
        suffix = "".join(path.suffixes)
        stem = path.name[: len(path.name) - len(suffix)] if suffix else path.name
        return path.with_name(f"{stem}_{label}{suffix}")

    # ---- TorchRL's names -----------------------------------------------------------------------
    def should_profile_worker(self, worker_idx: int) -> bool:
        """Whether worker ``worker_idx`` (top-level index) records a trace (TorchRL's name).

        Examples:
            >>> config = ProfileConfig(workers=[0, 2])
            >>> [config.should_profile_worker(i) for i in range(3)]
            [True, False, True]
        """
        return worker_idx in self.workers

    def get_save_path(self, worker_idx: int) -> Path:
        """Where worker ``worker_idx``'s trace goes (TorchRL's name; see :meth:`trace_path`).

        Examples:
            >>> ProfileConfig(save_path="traces/w{worker_idx}.json").get_save_path(2)
            PosixPath('traces/w2.json')
        """
        return self.for_worker(worker_idx).trace_path() if PLACEHOLDER in str(
            self.save_path or DEFAULT_SAVE_PATH) else self.trace_path()

    def get_activities(self) -> list:
        """The profiler activities to record (TorchRL's name for :meth:`profiler_activities`)."""
        return self.profiler_activities()

    # ---- activities ------------------------------------------------------------------------
    def with_available_activities(self, *, warn: bool = True) -> ProfileConfig:
        """This config with CUDA dropped where it is asked for but unavailable (one warning)."""
        wanted = self.activities
        if wanted is None:
            wanted = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
            return dataclasses.replace(self, activities=wanted)
        if "cuda" in wanted and not torch.cuda.is_available():
            if warn:
                warnings.warn(
                    "enable_profile: activities asks for 'cuda' but CUDA is not available here; "
                    "recording the CPU only",
                    UserWarning,
                    stacklevel=3,
                )
            return dataclasses.replace(self, activities=tuple(a for a in wanted if a != "cuda") or ("cpu",))
        return self

    def profiler_activities(self) -> list:
        """The ``torch.profiler.ProfilerActivity`` members to record."""
        from torch.profiler import ProfilerActivity

        return [ProfilerActivity.CPU if a == "cpu" else ProfilerActivity.CUDA for a in self.activities or ("cpu",)]


__all__ = ["ACTIVITIES", "ProfileConfig"]
