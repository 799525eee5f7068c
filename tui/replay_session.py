"""Replay a trace live: the scheduler re-runs from the trace's inputs beside the recording.

The workload comes back out of the trace as `stepscope replay` takes it (the config,
every request as it arrived, its aborts, and its recorded outputs in step order as
its tape), runs through `EngineLoop` with `TapeModelRunner` one step at a time, and
each replayed step's decision is compared with the recorded one as exact replay
compares them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.engine import EngineLoop, StepRecord, TapeModelRunner, Workload, step_counts
from stepscope.replay import inputs
from stepscope.replay.step_decision import StepDecision, differences, live_decision
from stepscope.schema.step_condition import STEP_COLUMNS, StepCondition

from .recorded_decisions import step_decisions
from .trace_source import TraceSource

_CHUNK = 512
"""Recorded steps fetched at a time."""


def workload_from_trace(source: TraceSource, knobs: dict[str, Any] | None = None) -> Workload:
    """The workload a trace was recorded from, each request's recorded outputs as its tape.

    `knobs` overrides config knobs, for a what-if replay.
    """
    with source.lock:
        return inputs.workload_from_trace(source.trace, knobs)


@dataclass(frozen=True)
class ReplayedStep:
    """A replayed step beside the recorded one."""

    replayed: StepDecision
    recorded: StepDecision | None
    differences: tuple[str, ...]
    """What differs in the decision (`missing_step`: the recording has no such step)."""
    predicate_columns: dict[str, Any]

    @property
    def step(self) -> int:
        return self.replayed.step

    @property
    def diverged(self) -> bool:
        return bool(self.differences)


BreakPredicate = StepCondition
"""A SQL condition a live replay breaks on (`StepCondition`, over `predicate_columns`)."""


def predicate_columns(record: StepRecord) -> dict[str, Any]:
    """The columns a break predicate can use, for one replayed step."""
    columns = dict(STEP_COLUMNS, step=record.step, arrived_ids=list(record.arrived))
    engine_step = record.engine_step
    if engine_step is None:
        return columns
    output, end = engine_step.scheduler_output, engine_step.schedule_end
    counts = step_counts(engine_step)
    columns.update(
        idle=False,
        num_scheduled_tokens=counts.num_scheduled_tokens,
        num_scheduled_reqs=counts.num_scheduled_reqs,
        num_preemptions=counts.num_preempted_reqs,
        num_finished=counts.num_finished,
        num_free_blocks_after_schedule=counts.num_free_blocks_after_schedule,
        running_pass_end=None if end is None else str(end.running_pass_end),
        admission_stop=None if end is None else str(end.admission_stop),
        scheduled_ids=list(output.num_scheduled_tokens),
        preempted_ids=sorted(output.preempted_req_ids),
        finished_ids=[o.request_id for o in engine_step.outputs if o.finish_reason is not None],
    )
    return columns


class ReplaySession:
    """The engine re-running a trace's inputs, one step at a time, beside the recording.

    One caller at a time (a lock guards the engine); `stop()` asks a long run to end.
    """

    def __init__(self, path: str | Path, knobs: dict[str, Any] | None = None) -> None:
        self.source = TraceSource(path)
        self.workload = workload_from_trace(self.source, knobs)
        runner = TapeModelRunner.for_workload(self.workload)
        # No finishes kept: the trace has every ending, and a long replay would hold them all.
        loop = EngineLoop(self.workload, runner, keep_finishes=False)
        self._steps: Generator[StepRecord] = loop.run()
        self._recorded: dict[int, StepDecision] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.finished = False
        self.last: ReplayedStep | None = None
        self.num_divergent = 0

    @property
    def num_recorded_steps(self) -> int:
        return self.source.info.num_steps

    def close(self) -> None:
        with self._lock:
            self._steps.close()  # the loop ends now: its frozen heap goes back to the collector
        self.source.close()

    def stop(self) -> None:
        self._stop.set()

    def step(self) -> ReplayedStep | None:
        """Replay one step; None once the replay has ended."""
        with self._lock:
            return self._advance()

    def run(
        self,
        until: Callable[[ReplayedStep], bool],
        on_progress: Callable[[ReplayedStep], None] | None = None,
        progress_every: int = 1024,
    ) -> tuple[list[ReplayedStep], str]:
        """Replay until `until` holds for a step, the replay ends, or `stop()`; returns the
        last few steps and why it stopped ('condition', 'end' or 'stopped')."""
        self._stop.clear()
        recent: list[ReplayedStep] = []
        with self._lock:
            while True:
                if self._stop.is_set():
                    return recent, "stopped"
                replayed = self._advance()
                if replayed is None:
                    return recent, "end"
                recent = [*recent[-63:], replayed]
                if until(replayed):
                    return recent, "condition"
                if on_progress is not None and (replayed.step + 1) % progress_every == 0:
                    on_progress(replayed)

    def _advance(self) -> ReplayedStep | None:
        if self.finished:
            return None
        record = next(self._steps, None)
        if record is None:
            self.finished = True
            return None
        replayed = live_decision(record)
        recorded = self._recorded_step(record.step)
        result = ReplayedStep(
            replayed=replayed,
            recorded=recorded,
            differences=differences(recorded, replayed),
            predicate_columns=predicate_columns(record),
        )
        self.num_divergent += bool(result.differences)
        self.last = result
        return result

    def _recorded_step(self, step: int) -> StepDecision | None:
        if step not in self._recorded:
            if step >= self.num_recorded_steps:
                return None
            self._recorded = step_decisions(self.source, step, step + _CHUNK - 1)
        return self._recorded.get(step)
