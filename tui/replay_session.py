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

A session made `at_step=S` replays from S, not from step 0: from the trace's nearest
checkpoint at or before S, run silently to it, and recorded from there
(`StepWindow(S)`), compared over that window, its cursor on S. Its first few steps are
recorded and compared first (`HEAD_STEPS`), so S shows while the rest replays. A trace
with no checkpoints at all is replayed from step 0 (`notice` says why), its cursor on S.
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
from stepscope.replay.checkpoints import checkpoint_steps
from stepscope.replay.exact import RecordedReplay, record_replay, replay_differences
from stepscope.replay.from_step import (
    WHOLE,
    StepWindow,
    check_window,
    gaps_within,
    recorded_stretches,
)
from stepscope.replay.step_differences import StepDifferences
from stepscope.schema import StepDetail, Trace, open_trace, read_step
from stepscope.schema.step_condition import StepCondition, condition_rows

from .queries import query
from .trace_source import TraceSource

PROGRESS_EVERY = 1024
"""Steps between two progress reports of a recording or a condition's search."""

CONDITION_CHUNK = 4096
"""Replayed steps a condition is evaluated over at a time."""

RECENT_STEPS = 64
"""Steps a run hands back, the one it stopped at last."""

HEAD_STEPS = 64
"""Steps of a replay from a step recorded and compared first, so that step shows at once."""

BreakPredicate = StepCondition
"""A SQL condition a replay breaks on, over the replayed step's `STEP_COLUMNS`."""


def workload_from_trace(source: TraceSource, knobs: dict[str, Any] | None = None) -> Workload:
    """The workload a trace was recorded from, each request's recorded outputs as its tape.

    `knobs` overrides config knobs, for a what-if replay.
    """
    return source.read(lambda trace: inputs.workload_from_trace(trace, knobs))


def no_checkpoints_reason(trace: Trace) -> str:
    """Why a trace has no checkpoints, in a few words."""
    if trace.schema_version < 6:
        return "it was recorded before checkpoints existed"
    return "recorded with --checkpoint-every 0, redacted, or too short"


@dataclass(frozen=True)
class ReplayStart:
    """Where a session's replay started, and how it got there."""

    step: int
    """The first replayed (recorded) step."""
    checkpoint: int | None
    """The trace's checkpoint it ran on from (None: from step 0)."""
    wanted: int
    """The step the session was asked to start at (its cursor's first step)."""

    def describe(self) -> str:
        """One line: where the replay started, e.g. 'replaying from step 900,000
        (checkpoint 900,000)'."""
        head = f"replaying from step {self.step:,}"
        if self.step == 0:
            return head
        if self.checkpoint is None:
            return f"{head} (no checkpoint before it: run silently from step 0)"
        if self.checkpoint == self.step:
            return f"{head} (checkpoint {self.checkpoint:,})"
        silent = self.step - self.checkpoint
        return f"{head} (checkpoint {self.checkpoint:,}, then {silent:,} steps run silently)"


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
    The replay's trace lives in a temporary directory until `close()`. With `at_step`,
    the replay starts there (see the module's docstring) and its cursor is on that step
    once recorded; without, it starts at step 0 and the cursor before it.
    """

    def __init__(
        self,
        path: str | Path,
        knobs: dict[str, Any] | None = None,
        *,
        at_step: int | None = None,
    ) -> None:
        self.source = TraceSource(path)
        self.knobs = dict(knobs or {})
        try:
            self.workload: Workload | None = (
                workload_from_trace(self.source, self.knobs) if not at_step else None
            )
            """The whole trace's workload, read once, for a replay from step 0 (one from
            a later step reads its own, from its checkpoint on)."""
            self.num_recorded_steps = self.source.info.num_steps
            self.num_requests = self._count_requests()
        except BaseException:
            self.source.close()
            raise
        self._scratch = tempfile.TemporaryDirectory(prefix="stepscope-tui-replay-")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.at_step = at_step
        self.window = WHOLE
        """The steps replayed and compared (set by `record()`)."""
        self.start: ReplayStart | None = None
        """Where the replay started (set by `record()`)."""
        self.notice: str | None = None
        """Why the replay did not start where it was asked to (a trace without checkpoints)."""
        self.replay: Trace | None = None
        self.differences = StepDifferences([], [])
        self.complete = False
        """Whether the replay ran to its end (not cut at an incomplete trace's end, or stopped)."""
        self.stopped = False
        """Whether `stop()` ended the recording before its end."""
        self.num_replayed_steps = 0
        self.num_steps = 0
        """Steps either side has, counted from step 0: the cursor's range ends there."""
        self.cursor = -1
        self._closed = False

    @property
    def first_step(self) -> int:
        """The first step the replay holds: the window's first."""
        return self.window.from_step

    @property
    def replay_end(self) -> int:
        """The step after the last one the replay holds."""
        return self.first_step + self.num_replayed_steps

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

    def record(
        self,
        on_progress: Callable[[int], None] | None = None,
        on_head: Callable[[ReplayedStep, tuple[StepDetail, StepDetail]], None] | None = None,
    ) -> None:
        """Replay the trace into a trace of its own and compare the two (once; not once
        closed). With `at_step` and `on_head`, the first `HEAD_STEPS` from it are
        recorded and compared first and `on_head` gets that step, its sides, while the
        rest is recorded."""
        with self._lock, self.source.lock:
            if self.replay is not None or self._closed:
                return
            trace = self.source.trace
            self.window = self._window(trace)
            start = self.at_step if self.at_step is not None else self.window.from_step
            head = StepWindow(self.window.from_step, start + HEAD_STEPS - 1)
            if on_head is not None and self.at_step is not None:
                self._record(trace, head, "head", None)
                self.cursor = min(self.at_step, self.num_steps - 1)
                if not self.complete or self.stopped:  # it ended within the head
                    return
                assert self.replay is not None
                shown = self._between(self.cursor, self.cursor)[-1]
                on_head(shown, (read_step(trace, shown.step), read_step(self.replay, shown.step)))
            self._record(trace, self.window, "replay", on_progress)
            if self.at_step is not None:
                self.cursor = min(self.at_step, self.num_steps - 1)

    def _window(self, trace: Trace) -> StepWindow:
        """The window to replay: from `at_step`, or from the trace's first step when the
        trace has no checkpoints at all; up to its first gap (`notice` says why either)."""
        window = WHOLE if not self.at_step else StepWindow(self.at_step)
        check_window(window, trace)
        if window.from_step and not checkpoint_steps(trace):
            self.notice = (
                f"{trace.path.name} has no checkpoints ({no_checkpoints_reason(trace)}): "
                "replaying from step 0"
            )
            window = WHOLE
        stretches = recorded_stretches(window, trace)
        if len(stretches) > 1:
            (gap, *_) = gaps_within(window, trace)
            self.notice = (
                f"{gap.describe()}: the replay stops before them "
                f"(replay from step {gap.last_step + 1} to go on)"
            )
        return stretches[0]

    def _count_requests(self) -> int:
        """The trace's requests (a count: the workload of a replay from a step holds some)."""
        counted = self.source.read(lambda trace: trace.execute(query("num_requests")).fetchall())
        return int(counted[0][0])

    def _workload(self) -> Workload:
        """The whole trace's workload (read now if the session has not yet)."""
        if self.workload is None:
            self.workload = workload_from_trace(self.source, self.knobs)
        return self.workload

    def _record(
        self,
        trace: Trace,
        window: StepWindow,
        name: str,
        on_progress: Callable[[int], None] | None,
    ) -> None:
        """Record the replay of `window` into the scratch file `name`, compare it, and make
        it the session's replay (the one before closed), unless a stop left it shorter."""
        target = Path(self._scratch.name) / f"{name}.duckdb"
        sinks = [] if on_progress is None else [_Progress(on_progress)]
        recorded: RecordedReplay = record_replay(
            trace,
            target,
            knobs=self.knobs,
            workload=self._workload() if window.whole else None,
            sinks=sinks,
            keep=False,
            stop=self._stop,
            window=window,
        )
        replay = open_trace(target)
        stopped = self._stop.is_set() and not recorded.complete
        if self.replay is not None and replay.num_steps < self.num_replayed_steps:
            replay.close()  # stopped before it passed the head: the head stays
            self.complete, self.stopped = False, True
            return
        if self.replay is not None:
            self.replay.close()
        self.replay = replay
        self.complete, self.stopped = recorded.complete, stopped
        checkpoint = recorded.start.checkpoint_step if recorded.start is not None else None
        self.start = ReplayStart(
            window.from_step, checkpoint or None, self.at_step or window.from_step
        )
        self.differences = replay_differences(trace, replay, window)
        self.num_replayed_steps = replay.num_steps
        recorded_steps = trace.last_step + 1 if recorded.complete else 0
        self.num_steps = max(recorded_steps, window.from_step + self.num_replayed_steps)
        if window.to_step is not None and recorded.complete:
            self.num_steps = min(self.num_steps, window.to_step + 1)

    def go_to(self, step: int) -> tuple[ReplayedStep, tuple[StepDetail, StepDetail]]:
        """Move the cursor to `step`, one the replay holds (`first_step`..`num_steps - 1`)."""
        with self._lock, self.source.lock:
            assert self.replay is not None
            assert self.first_step <= step < self.num_steps
            self.cursor = step
            shown = self._between(step, step)[-1]
            return shown, (self._recorded(step), read_step(self.replay, step))

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
            return self._recorded(step), read_step(self.replay, step)

    def _recorded(self, step: int) -> StepDetail:
        """Step `step` as the recording holds it."""
        return self.source.read(lambda trace: read_step(trace, step))

    def _next_divergence(self, start: int) -> int | None:
        steps = self.differences.steps
        index = bisect.bisect_left(steps, start)
        return steps[index] if index < len(steps) else None

    def _search(
        self, condition: StepCondition, start: int, on_progress: Callable[[int], None] | None
    ) -> tuple[int | None, str]:
        """The first replayed step from `start` on that `condition` holds at."""
        assert self.replay is not None
        for first in range(start, self.replay_end, CONDITION_CHUNK):
            if self._stop.is_set():
                return first - 1, "stopped"
            last = first + CONDITION_CHUNK - 1
            found = condition.first_step(condition_rows(self.replay, first, last))
            if found is not None:
                return found, "condition"
            if on_progress is not None:
                on_progress(min(last, self.replay_end - 1))
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
