"""The timing summary: where each worker's wall time went, phase by phase.

A worker's clock runs from its first rollout to its last event, and is in exactly one phase at
a time, so the phases add up to the wall time. Phase changes happen at rollout boundaries
(lifecycle hooks) and around calls made once per batch; the split of a rollout between env
steps, policy calls and the collector's own work comes from rollouts sampled one in
``timing_sample_every`` whose steps are timed one by one.

Examples:
    >>> from reap_profiling import CollectorTimings, WorkerTimings
    >>> w = WorkerTimings(worker="0", wall=2.0, frames=1000, rollouts=4, env_step=1.0,
    ...                   policy=0.5, other=0.1, write_batch=0.1, wait=0.3)
    >>> w.frames_per_s
    500.0
    >>> round(sum(w.shares().values()), 6)
    1.0
    >>> print(CollectorTimings((w,)))
    worker  frames  frames/s  wall s  env step  policy  rollout, other  write batch   wait  weight sync  traced rollouts
         0   1,000       500    2.00     50.0%   25.0%            5.0%         5.0%  15.0%         0.0%             0.0%
"""

from __future__ import annotations

import time
from dataclasses import dataclass

#: Phases of the summary, in table order, with their column titles.
PHASES = {
    "env_step": "env step",
    "policy": "policy",
    "other": "rollout, other",
    "write_batch": "write batch",
    "wait": "wait",
    "weight_sync": "weight sync",
    "profiler": "traced rollouts",
}
#: What the clock itself tracks; "rollout" is split into env_step/policy/other at report time.
CLOCK_PHASES = ("rollout", "write_batch", "wait", "weight_sync", "profiler")


@dataclass(frozen=True)
class WorkerTimings:
    """Seconds one worker spent in each phase, with its frames and rollouts.

    ``env_step``: the env's steps and resets; ``policy``: policy calls; ``other``: the rest of
    each rollout (trajectory ids, carrying the state to the next step); ``write_batch``: from a
    rollout's end to handing the batch over (copying it out, post-processing, the replay buffer
    or shared memory); ``wait``: waiting for the trainer to take the batch or ask for the next;
    ``weight_sync``: loading new weights; ``profiler``: rollouts run under torch's profiler
    (slower than the others, and not split).

    Examples:
        >>> from reap_profiling import WorkerTimings
        >>> WorkerTimings(worker="1", wall=1.0, frames=10, rollouts=1, wait=1.0).shares()["wait"]
        1.0
    """

    worker: str
    wall: float
    frames: int
    rollouts: int
    env_step: float = 0.0
    policy: float = 0.0
    other: float = 0.0
    write_batch: float = 0.0
    wait: float = 0.0
    weight_sync: float = 0.0
    profiler: float = 0.0

    @property
    def frames_per_s(self) -> float:
        """Frames over wall time."""
        return self.frames / self.wall if self.wall > 0 else 0.0

    def seconds(self) -> dict[str, float]:
        """Seconds by phase (the keys of :data:`PHASES`)."""
        return {name: getattr(self, name) for name in PHASES}

    def shares(self) -> dict[str, float]:
        """Fraction of the wall time by phase; they add up to 1."""
        wall = self.wall
        return {name: (s / wall if wall > 0 else 0.0) for name, s in self.seconds().items()}

    def _row(self) -> list[str]:
        return [self.worker, f"{self.frames:,}", f"{self.frames_per_s:,.0f}", f"{self.wall:.2f}",
                *(f"{100 * share:.1f}%" for share in self.shares().values())]

    def __str__(self) -> str:
        return str(CollectorTimings((self,)))


@dataclass(frozen=True)
class CollectorTimings:
    """The timing summary of a collector: one :class:`WorkerTimings` per worker.

    ``str()`` gives a table with a row per worker: frames, frames/s, wall seconds and the
    share of wall time in each phase. Index it (``timings[0]``) or iterate over the workers.

    Examples:
        >>> from reap_profiling import CollectorTimings, WorkerTimings
        >>> t = CollectorTimings((WorkerTimings(worker="0", wall=1.0, frames=4, rollouts=1, wait=1.0),))
        >>> len(t), t[0].worker, t.frames
        (1, '0', 4)
    """

    workers: tuple[WorkerTimings, ...]

    @property
    def frames(self) -> int:
        """Frames collected by all workers."""
        return sum(w.frames for w in self.workers)

    def __len__(self) -> int:
        return len(self.workers)

    def __getitem__(self, index: int) -> WorkerTimings:
        return self.workers[index]

    def __iter__(self):
        return iter(self.workers)

    def __str__(self) -> str:
        rows = [["worker", "frames", "frames/s", "wall s", *PHASES.values()]]
        rows += [w._row() for w in self.workers]
        if len(rows) == 1:
            return "no timings recorded (no rollout ran since enable_profile)"
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows)


class PhaseClock:
    """Seconds per phase of one worker; ``enter(phase)`` closes the current phase.

    ``None`` is "not counting": before the first rollout and after iteration ends.
    """

    __slots__ = ("seconds", "phase", "since")

    def __init__(self):
        self.seconds = dict.fromkeys(CLOCK_PHASES, 0.0)
        self.phase: str | None = None
        self.since = 0.0

    def enter(self, phase: str | None, now: float | None = None) -> float:
        now = time.perf_counter() if now is None else now
        if self.phase is not None:
            self.seconds[self.phase] += now - self.since
        self.phase, self.since = phase, now
        return now

    @property
    def running(self) -> bool:
        return self.phase is not None

    def totals(self) -> dict[str, float]:
        """Seconds per phase, the open phase counted up to now."""
        totals = dict(self.seconds)
        if self.phase is not None:
            totals[self.phase] += time.perf_counter() - self.since
        return totals


def split_rollouts(worker: str, totals: dict[str, float], frames: int, rollouts: int,
                   sampled: tuple[float, float, float]) -> WorkerTimings:
    """A :class:`WorkerTimings` from the clock's totals and the sampled rollouts' (rollout, env,
    policy) seconds, which split the untraced rollouts' time."""
    rollout = totals["rollout"]
    sampled_rollout, sampled_env, sampled_policy = sampled
    if sampled_rollout > 0:
        env = rollout * min(sampled_env / sampled_rollout, 1.0)
        policy = min(rollout * sampled_policy / sampled_rollout, rollout - env)
    else:
        env = policy = 0.0
    values = {"env_step": env, "policy": policy, "other": rollout - env - policy,
              **{k: totals[k] for k in CLOCK_PHASES if k != "rollout"}}
    wall = sum(totals.values())
    return WorkerTimings(worker=worker, wall=wall, frames=frames, rollouts=rollouts, **values)


__all__ = ["CLOCK_PHASES", "PHASES", "CollectorTimings", "PhaseClock", "WorkerTimings", "split_rollouts"]
