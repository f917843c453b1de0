"""A stand-in replay buffer for collector tests: it keeps what ``extend`` receives."""

from __future__ import annotations


class BatchSink:
    """A collector's ``replay_buffer``: keeps a copy of every batch (list appends are atomic, so a
    background collection may fill it while a test reads it); raises once ``fail_after`` batches
    are in, like a storage that is full.

    Examples:
        >>> import torch
        >>> sink = BatchSink(fail_after=1)
        >>> sink.extend(torch.zeros(2)); len(sink.batches)
        1
        >>> sink.extend(torch.zeros(2))
        Traceback (most recent call last):
        ...
        RuntimeError: storage is full
    """

    def __init__(self, fail_after: int | None = None):
        self.batches = []
        self.fail_after = fail_after

    def extend(self, batch) -> None:
        if self.fail_after is not None and len(self.batches) >= self.fail_after:
            raise RuntimeError("storage is full")
        self.batches.append(batch.clone())
