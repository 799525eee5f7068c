"""Replay a trace in the TUI: recorded like any run, compared as exact replay compares, stepped.

The workload comes back out of the trace as `stepscope replay` takes it (the config,
every request as it arrived, its aborts, and what the model sampled). `record()` runs
it through the engine into a trace of its own (`replay.exact.record_replay`) and
compares the two traces step by step with exact replay's comparison
(`replay_differences`, `stepscope diff`'s per-step field mask), so the TUI and the CLI
agree by construction. Stepping, running to the next divergence and breaking on a SQL
condition then move a cursor over the two traces: a step's sides are read from each
trace's own rows (`read_step`), and a condition is evaluated over the replay's
(`condition_rows`).
"""

from __future__ import annotations

import bisect
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.engine import StepRecord, Workload
from stepscope.replay import inputs
from stepscope.replay.exact import record_replay, replay_differences
from stepscope.replay.step_differences import StepDifferences
from stepscope.schema import StepDetail, Trace, open_trace, read_step
from stepscope.schema.step_condition import StepCondition, condition_rows

from .trace_source import TraceSource

PROGRESS_EVERY = 1024
"""Steps between two progress reports of a recording or a condition's search."""

CONDITION_CHUNK = 4096
"""Replayed steps a condition is evaluated over at a time."""

RECENT_STEPS = 64
"""Steps a run hands back, the one it stopped at last."""

BreakPredicate = StepCondition
"""A SQL condition a replay breaks on, over the replayed step's `STEP_COLUMNS`."""


def workload_from_trace(source: TraceSource, knobs: dict[str, Any] | None = None) -> Workload:
    """The workload a trace was recorded from, each request's recorded outputs as its tape.

    `knobs` overrides config knobs, for a what-if replay.
    """
    with source.lock:
        return inputs.workload_from_trace(source.trace, knobs)


@dataclass(frozen=True)
class ReplayedStep:
    """One step of the replay, and what differs there from the recording."""

    step: int
    columns: dict[str, Any] | None
    """The replayed step as a break condition reads it (`STEP_COLUMNS`); None when the
    replay has no such step."""
    differences: tuple[str, ...]
    """What differs (`replay.exact.EXACT_FIELDS`; `missing_step`: one side lacks the step)."""

    @property
    def diverged(self) -> bool:
        return bool(self.differences)


class _Progress:
    """A recording's step sink that reports every `PROGRESS_EVERY` steps."""

    def __init__(self, report: Callable[[int], None]) -> None:
        self.report = report

    def on_step(self, record: StepRecord, scheduler: object) -> None:
        if (record.step + 1) % PROGRESS_EVERY == 0:
            self.report(record.step)


class ReplaySession:
    """A trace, its replay once `record()` has run, their comparison, and a step cursor.

    One caller at a time (a lock guards it); `stop()` asks a recording or a run to end.
    The replay's trace lives in a temporary directory until `close()`.
    """

    def __init__(self, path: str | Path, knobs: dict[str, Any] | None = None) -> None:
        self.source = TraceSource(path)
        self.knobs = dict(knobs or {})
        try:
            self.workload = workload_from_trace(self.source, self.knobs)
            self.num_recorded_steps = self.source.info.num_steps
        except BaseException:
            self.source.close()
            raise
        self._scratch = tempfile.TemporaryDirectory(prefix="stepscope-tui-replay-")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.replay: Trace | None = None
        self.differences = StepDifferences([], [])
        self.complete = False
        """Whether the replay ran to its end (not cut at an incomplete trace's end, or stopped)."""
        self.stopped = False
        """Whether `stop()` ended the recording before its end."""
        self.num_replayed_steps = 0
        self.num_steps = 0
        """Steps either side has: the cursor's range."""
        self.cursor = -1
        self._closed = False

    @property
    def num_divergent(self) -> int:
        """Divergent steps in the whole replay."""
        return len(self.differences.steps)

    def num_divergent_through(self, step: int) -> int:
        """Divergent steps up to `step`, that one included."""
        return bisect.bisect_right(self.differences.steps, step)

    @property
    def finished(self) -> bool:
        """Whether the cursor is on the last step (or nothing was replayed)."""
        return self.replay is not None and self.cursor >= self.num_steps - 1

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.replay is not None:
                self.replay.close()
            self.source.close()
            self._scratch.cleanup()

    def stop(self) -> None:
        self._stop.set()

    def record(self, on_progress: Callable[[int], None] | None = None) -> None:
        """Replay the trace into a trace of its own and compare the two (once; not once
        closed)."""
        with self._lock, self.source.lock:
            if self.replay is not None or self._closed:
                return
            target = Path(self._scratch.name) / "replay.duckdb"
            sinks = [] if on_progress is None else [_Progress(on_progress)]
            trace = self.source.trace
            self.complete = record_replay(
                trace,
                target,
                knobs=self.knobs,
                workload=self.workload,
                sinks=sinks,
                keep=False,
                stop=self._stop,
            )
            self.stopped = self._stop.is_set() and not self.complete
            self.replay = open_trace(target)
            self.differences = replay_differences(trace, self.replay)
            self.num_replayed_steps = self.replay.num_steps
            recorded = trace.num_steps if self.complete else 0
            self.num_steps = max(recorded, self.num_replayed_steps)

    def step(self) -> ReplayedStep | None:
        """Move to the next step; None once on the last."""
        with self._lock:
            if self.finished or self.replay is None:
                return None
            self.cursor += 1
            return self._between(self.cursor, self.cursor)[-1]

    def run(
        self,
        condition: StepCondition | None,
        on_progress: Callable[[int], None] | None = None,
    ) -> tuple[list[ReplayedStep], str]:
        """Move to the next step `condition` holds at (None: the next divergent step), the
        last step, or where `stop()` found the search; returns the last few steps up to it
        and why it stopped ('condition', 'end' or 'stopped')."""
        self._stop.clear()
        with self._lock:
            if self.finished or self.replay is None:
                return [], "end"
            start = self.cursor + 1
            if condition is None:
                found, stopped = self._next_divergence(start), "condition"
            else:
                found, stopped = self._search(condition, start, on_progress)
            if found is None:
                found, stopped = self.num_steps - 1, "end"
            self.cursor = found
            return self._between(max(start, found - RECENT_STEPS + 1), found), stopped

    def sides(self, step: int) -> tuple[StepDetail, StepDetail]:
        """Step `step` as the recording and as the replay hold it."""
        with self._lock, self.source.lock:
            assert self.replay is not None
            return read_step(self.source.trace, step), read_step(self.replay, step)

    def _next_divergence(self, start: int) -> int | None:
        steps = self.differences.steps
        index = bisect.bisect_left(steps, start)
        return steps[index] if index < len(steps) else None

    def _search(
        self, condition: StepCondition, start: int, on_progress: Callable[[int], None] | None
    ) -> tuple[int | None, str]:
        """The first replayed step from `start` on that `condition` holds at."""
        assert self.replay is not None
        for first in range(start, self.num_replayed_steps, CONDITION_CHUNK):
            if self._stop.is_set():
                return first - 1, "stopped"
            last = first + CONDITION_CHUNK - 1
            found = condition.first_step(condition_rows(self.replay, first, last))
            if found is not None:
                return found, "condition"
            if on_progress is not None:
                on_progress(min(last, self.num_replayed_steps - 1))
        return None, "end"

    def _between(self, first: int, last: int) -> list[ReplayedStep]:
        """Steps `first`..`last` of the replay beside the comparison."""
        assert self.replay is not None
        rows = condition_rows(self.replay, first, last).to_pylist()
        by_step = {row["step"]: row for row in rows}
        return [
            ReplayedStep(step, by_step.get(step), self.differences.at(step))
            for step in range(first, last + 1)
        ]
