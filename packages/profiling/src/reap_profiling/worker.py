"""Profiling inside a collector that runs its own rollouts (in-process, or in a worker).

Nothing here touches the step loop's code: the lifecycle hooks say when a rollout starts and
ends, and wrappers are set as instance attributes for exactly the rollouts that need them —
the env's ``_step_into``/``_reset_into`` and the collector's policy runner — then removed, so
every other rollout runs the unchanged loop. Traced rollouts label env steps, resets and policy
calls with ``torch.profiler.record_function``; one rollout in ``timing_sample_every`` times them.
Three per-batch methods (``iterator``, ``rollout``, ``update_policy_weights_``) are wrapped while
profiling is on, to tell the phases between rollouts apart. Whatever was there before (the
class's method, or a wrapper of the user's own) is put back when profiling stops.

``torch.autograd.profiler.profile`` (the Kineto profiler that ``torch.profiler.profile`` drives)
is used directly: ``torch.profiler.profile`` imports ``torch._inductor`` when it starts, which
costs seconds in every worker process.
"""

from __future__ import annotations

import time
import weakref
from pathlib import Path

from torch.autograd import profiler as autograd_profiler
from torch.profiler import record_function

from reap_profiling.config import ProfileConfig
from reap_profiling.timings import PhaseClock, WorkerTimings, split_rollouts

_MISSING = object()
#: ``record_function`` labels in the traces.
ENV_STEP, ENV_RESET, POLICY, ROLLOUT = "reap::env_step", "reap::env_reset", "reap::policy", "reap::rollout"


class Patches:
    """Instance attributes replaced by wrappers; :meth:`restore` puts back exactly what was there."""

    def __init__(self):
        self._saved: list[tuple[weakref.ref, str, object]] = []

    def wrap(self, obj, name: str, make) -> None:
        """Set ``obj.<name>`` to ``make(original)``; ``original`` is called as ``obj.<name>`` was."""
        previous = obj.__dict__.get(name, _MISSING)
        if previous is _MISSING:  # the class's method: call it on a weak reference (no cycle)
            function, ref = getattr(type(obj), name), weakref.ref(obj)

            def original(*args, **kwargs):
                return function(ref(), *args, **kwargs)
        else:
            original = previous
        obj.__dict__[name] = make(original)
        self._saved.append((weakref.ref(obj), name, previous))

    def restore(self) -> None:
        for ref, name, previous in reversed(self._saved):
            obj = ref()
            if obj is None:
                continue
            if previous is _MISSING:
                obj.__dict__.pop(name, None)
            else:
                obj.__dict__[name] = previous
        self._saved.clear()


class _RunnerProxy:
    """Stands in for the collector's policy runner with ``runner(t)`` and ``random_action`` wrapped."""

    def __init__(self, runner, wrap):
        self._runner = runner
        self._call = wrap(runner)
        self.random_action = wrap(runner.random_action)

    def __call__(self, t):
        self._call(t)

    def __getattr__(self, name):
        return getattr(self._runner, name)


def _timed(cell: list):
    def wrap(fn):
        clock = time.perf_counter

        def timed(*args):
            start = clock()
            result = fn(*args)
            cell[0] += clock() - start
            return result

        return timed

    return wrap


def _labelled(label: str):
    def wrap(fn):
        def labelled(*args):
            with record_function(label):
                return fn(*args)

        return labelled

    return wrap


class RolloutProfile:
    """Traces and timings of one collector that runs rollouts (see the module docstring)."""

    def __init__(self, collector, config: ProfileConfig):
        self.config = config
        self.clock = PhaseClock()
        self.active = True
        self.frames = 0
        self.rollouts = 0
        self.trace_path: Path | None = None
        self.trace_done = False
        self._untraced = 0
        self._sampled = [0.0, 0.0, 0.0]  # rollout, env, policy seconds of the sampled rollouts
        self._cells: tuple[list, list] | None = None
        self._rollout_started = 0.0
        self._tracing = False
        self._profiler = None
        self._range = None
        self._in_iterator = 0
        self._steps = Patches()  # for one rollout
        self._calls = Patches()  # while profiling is on
        self._calls.wrap(collector, "iterator", self._wrap_iterator)
        self._calls.wrap(collector, "rollout", self._wrap_rollout)
        self._calls.wrap(collector, "update_policy_weights_", self._wrap_weights)

    # ---- phases between rollouts -------------------------------------------------------------
    def _wrap_iterator(self, original):
        def iterator():
            self._in_iterator += 1
            try:
                for item in original():
                    if self.active and self.clock.running:
                        self.clock.enter("wait")  # the trainer holds the batch
                    yield item
            finally:
                self._in_iterator -= 1
                if self.active:
                    self.clock.enter(None)

        return iterator

    def _wrap_rollout(self, original):
        def rollout(*args, **kwargs):
            batch = original(*args, **kwargs)
            if self.active and not self._in_iterator and self.clock.running:
                self.clock.enter("wait")
            return batch

        return rollout

    def _wrap_weights(self, original):
        def update_policy_weights_(*args, **kwargs):
            if not (self.active and self.clock.running):
                return original(*args, **kwargs)
            previous = self.clock.phase
            self.clock.enter("weight_sync")
            try:
                return original(*args, **kwargs)
            finally:
                self.clock.enter(previous)

        return update_policy_weights_

    def worker_phase(self, phase: str) -> None:
        """A remote worker's loop says it waits or loads weights (``reap_worker_phase``)."""
        if self.active and self.clock.running:
            self.clock.enter(phase)

    # ---- rollouts ------------------------------------------------------------------------------
    def _patch_steps(self, collector, env_step, env_reset, policy) -> None:
        env = collector.env
        self._steps.wrap(env, "_step_into", env_step)
        self._steps.wrap(env, "_reset_into", env_reset)
        self._steps.wrap(collector, "_runner", lambda runner: _RunnerProxy(runner, policy))

    def rollout_start(self, collector) -> None:
        config, k = self.config, self.rollouts
        if config.traced and not self.trace_done and k in config.recorded_rollouts:
            self.clock.enter("profiler")
            if self._profiler is None:
                self._start_profiler()
            self._patch_steps(collector, _labelled(ENV_STEP), _labelled(ENV_RESET), _labelled(POLICY))
            self._range = record_function(f"{ROLLOUT} {k}")
            self._range.__enter__()
            self._tracing = True
            return
        if self._untraced % config.timing_sample_every == 0:
            self._cells = ([0.0], [0.0])
            env = _timed(self._cells[0])
            self._patch_steps(collector, env, env, _timed(self._cells[1]))
        self._untraced += 1
        self._rollout_started = self.clock.enter("rollout")

    def rollout_end(self, collector, frames: int) -> None:
        if self._tracing:
            self._range.__exit__(None, None, None)
            self._range = None
            self._steps.restore()
            self._tracing = False
            if self.rollouts == self.config.recorded_rollouts[-1]:
                self._finish_trace()
            self.clock.enter("write_batch")
        else:
            now = self.clock.enter("write_batch")
            if self._cells is not None:
                self._steps.restore()
                sampled = self._sampled
                sampled[0] += now - self._rollout_started
                sampled[1] += self._cells[0][0]
                sampled[2] += self._cells[1][0]
                self._cells = None
        self.rollouts += 1
        self.frames += frames

    # ---- the trace -----------------------------------------------------------------------------
    def _start_profiler(self) -> None:
        config = self.config.with_available_activities()
        profiler = autograd_profiler.profile(
            use_cpu="cpu" in config.activities,
            use_device="cuda" if "cuda" in config.activities else None,
            record_shapes=config.record_shapes,
            profile_memory=config.profile_memory,
            with_stack=config.with_stack,
            with_flops=config.with_flops,
            use_kineto=True,
        )
        profiler.__enter__()
        self._profiler = profiler

    def _finish_trace(self) -> None:
        profiler, self._profiler = self._profiler, None
        self.trace_done = True
        if profiler is None:
            return
        profiler.__exit__(None, None, None)
        if self.config.on_trace_ready is not None:
            self.config.on_trace_ready(profiler)
            return
        path = self.config.trace_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(path))
        self.trace_path = path

    # ---- end -----------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop: write the trace recorded so far, put every wrapped attribute back."""
        if not self.active:
            return
        try:
            if self._range is not None:
                self._range.__exit__(None, None, None)
                self._range = None
            self._steps.restore()
            self._calls.restore()
            if self._profiler is not None:
                self._finish_trace()
        finally:
            self.clock.enter(None)
            self.active = False

    def report(self) -> WorkerTimings:
        return split_rollouts(self.config.worker_label, self.clock.totals(), self.frames,
                              self.rollouts, tuple(self._sampled))


__all__ = ["ENV_RESET", "ENV_STEP", "POLICY", "ROLLOUT", "Patches", "RolloutProfile"]
