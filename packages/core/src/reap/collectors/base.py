"""``BaseCollector``: what every collector offers, whatever runs it.

Iteration yields batches (or ``None`` when a ``replay_buffer`` receives them), ``with`` shuts
the collector down, ``shutdown()`` may be called any number of times; after it, iterating
(an iterator made before included), seeding and weight updates raise ``RuntimeError``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

from tensordict import TensorDictBase

from reap.plugins import get_registries, hook, resolve_export


class NoLengthError(RuntimeError, TypeError):
    """``len(collector)`` of a collector with no ``total_frames``."""


class BaseCollector:
    """Common protocol of the single-process, multi-process and remote collectors.

    Subclasses set ``self._closed = False`` as the last step of a successful ``__init__``;
    garbage collection then shuts down what construction started.
    """

    def _check_open(self) -> None:
        """Raise if ``shutdown()`` was called: every call that collects, seeds or moves weights
        checks this, and so does an iterator before each batch."""
        if getattr(self, "_closed", False):
            raise RuntimeError(f"{type(self).__name__}: the collector was shut down; create a new one")

    def __iter__(self) -> Iterator[TensorDictBase | None]:
        return self.iterator()

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

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        raise NotImplementedError

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state_dict: dict) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

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
