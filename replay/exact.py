"""Exact replay: re-run the scheduler from a trace alone and check every step against it.

The trace gives the config, the arrivals with their arrival times, the aborts, and
what the model sampled, so no model is needed and the device the trace was recorded
on does not matter. Every replayed step is compared with the recorded one as it goes;
the first that differs is reported with both sides and the decisions that led there.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from stepscope.engine import EngineLoop, Scheduler, StepRecord, Workload
from stepscope.engine.probe import Decision, ScheduleEnd, ScheduleStart
from stepscope.schema import Trace, open_trace
from stepscope.tracer.record_workload import StepSink, trace_meta
from stepscope.tracer.recorder import TraceRecorder

from .inputs import workload_from_trace
from .recorded_steps import LAST_STEP, RecordedStep
from .step_decision import (
    MISSING_STEP,
    RecordedDecisions,
    StepDecision,
    differences,
    input_differences,
    live_decision,
    recorded_decision,
)
from .step_match import StepMatcher
from .trace_runner import replay_model_runner


@dataclass(frozen=True)
class Divergence:
    """The first step where the replay did not decide as the recording did."""

    step: int
    fields: tuple[str, ...]
    """Decision fields that differ; `missing_step` / `extra_step` when one side ended."""
    recorded: StepDecision | None
    replayed: StepDecision | None
    replayed_decisions: tuple[Decision, ...]
    """The replay's allocation calls and preemptions in that step."""


@dataclass(frozen=True)
class ExactReplay:
    trace: Path
    num_recorded_steps: int
    num_compared_steps: int
    trace_complete: bool
    divergence: Divergence | None
    output: Path | None


class DecisionTap:
    """A probe that keeps the scheduler's decisions of the current step only."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []

    def on_schedule_start(self, record: ScheduleStart) -> None:
        self.decisions = []

    def on_schedule_end(self, record: ScheduleEnd) -> None:
        pass


def replay_exact(
    trace_path: Path,
    output: Path | None = None,
    scheduler_cls: type[Scheduler] | None = None,
    *,
    stop_at_divergence: bool = True,
    sinks: Sequence[StepSink] = (),
) -> ExactReplay:
    """Replay `trace_path`; with `output`, the replay is recorded there as a trace too."""
    with open_trace(trace_path) as trace:
        workload = workload_from_trace(trace)
        num_recorded = trace.num_steps
        # Ranges of about a million rows: each scan's fixed cost is paid less often than
        # with 256k (`benchmarks/RESULTS.md`, replay_speed).
        recorded = RecordedDecisions(trace, batch_rows=1 << 20)
        replay = _Replay(workload, recorded, output, scheduler_cls, trace, sinks)
        divergence, compared = replay.run(
            stop_at_divergence=stop_at_divergence, trace_complete=trace.complete
        )
    return ExactReplay(trace_path, num_recorded, compared, trace.complete, divergence, output)


class _Replay:
    """One replay run: the engine (probed only when recording) and the recorded steps beside it."""

    def __init__(
        self,
        workload: Workload,
        recorded: RecordedDecisions,
        output: Path | None,
        scheduler_cls: type[Scheduler] | None,
        trace: Trace,
        sinks: Sequence[StepSink] = (),
    ) -> None:
        self.recorded: Iterator[RecordedStep] = recorded.steps.between(0, LAST_STEP)
        self.ids = recorded.request_ids
        self.matcher = StepMatcher(self.ids, {req_id: index for index, req_id in self.ids.items()})
        self.sinks = sinks
        self.workload, self.trace, self.scheduler_cls = workload, trace, scheduler_cls
        self.recorder = (
            TraceRecorder(output, workload, _replay_meta(workload, trace))
            if output is not None
            else None
        )
        self.loop = self._loop(self.recorder)

    def _loop(self, probe: TraceRecorder | DecisionTap | None) -> EngineLoop:
        return EngineLoop(
            self.workload,
            replay_model_runner(self.workload, self.trace),
            probe=probe,
            scheduler_cls=self.scheduler_cls,
            keep_finishes=False,  # the trace has every ending; a long replay would hold them all
        )

    def _decisions_at(self, step: int) -> tuple[Decision, ...]:
        """The replay's decisions at `step`, from a second run with a probe (the first has none,
        so that a replay that agrees pays nothing for them; the engine is deterministic)."""
        tap = DecisionTap()
        for record in self._loop(tap).run():
            if record.step == step:
                return tuple(tap.decisions)
        return ()

    def run(
        self, *, stop_at_divergence: bool, trace_complete: bool
    ) -> tuple[Divergence | None, int]:
        divergence: Divergence | None = None
        compared = 0
        complete = False
        try:
            for record in self.loop.run():
                decisions = (
                    tuple(self.recorder.next_decisions) if self.recorder is not None else None
                )
                if self.recorder is not None:
                    self.recorder.record_step(record, self.loop.core.scheduler)
                for sink in self.sinks:
                    sink.on_step(record, self.loop.core.scheduler)
                if divergence is not None:
                    continue
                expected = next(self.recorded, None)
                if expected is None and not trace_complete:
                    break  # the recording stopped early: nothing more to compare
                if expected is not None and self.matcher.same_decision(expected, record):
                    compared += 1
                    continue
                divergence = self._compare(record, expected, decisions)
                compared += divergence is None
                if divergence is not None and stop_at_divergence:
                    break
            else:
                complete = True
        finally:
            if self.recorder is not None:
                self.recorder.close(complete=complete)
        if divergence is None and complete:
            missing = next(self.recorded, None)
            if missing is not None:
                decision = recorded_decision(missing, self.ids)
                divergence = Divergence(missing.step, (MISSING_STEP,), decision, None, ())
        return divergence, compared

    def _compare(
        self,
        record: StepRecord,
        expected: RecordedStep | None,
        decisions: tuple[Decision, ...] | None,
    ) -> Divergence | None:
        """The divergence at a step `same_decision` did not accept, field by field."""
        mine = live_decision(record)
        theirs = None if expected is None else recorded_decision(expected, self.ids)
        fields = ("extra_step",) if theirs is None else differences(theirs, mine)
        if theirs is not None:
            fields += input_differences(theirs, mine)
        if not fields:
            return None
        if decisions is None:
            decisions = self._decisions_at(record.step)
        return Divergence(record.step, fields, theirs, mine, decisions)


def _replay_meta(workload: Workload, trace: Trace) -> dict[str, str]:
    meta = trace_meta(workload)
    meta.update(
        replay_of=str(trace.path),
        model=f"replay of {trace.meta.get('model', 'unknown')}",
        device="none (replay)",
    )
    return meta
