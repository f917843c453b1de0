"""``BaseCollector``: what every collector offers, whatever runs it.

Iteration yields batches (or ``None`` when a ``replay_buffer`` receives them), ``with`` shuts
the collector down, ``shutdown()`` may be called any number of times; after it, iterating
(an iterator made before included), seeding and weight updates raise ``RuntimeError``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

from tensordict import TensorDictBase


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
