"""Exact replay: re-run the scheduler from a trace alone, record it, and diff it with the trace.

The trace gives the config, the arrivals with their arrival times, the aborts, and
what the model sampled, so no model is needed and the device the trace was recorded
on does not matter. The replay is recorded like any run (into a temporary directory
unless an output is given) and compared with the trace by `stepscope diff`'s per-step
comparison, sampled tokens included; the first step that differs is reported with
both sides read from the two traces' rows.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from stepscope.engine import EngineLoop, InputError, Scheduler, Workload
from stepscope.engine.checkpoint import checkpoint_differences
from stepscope.engine.restore import check_hashes_computable
from stepscope.schema import StepDetail, StepGap, Trace, open_trace, read_step
from stepscope.schema.recording_layout import writer_pid
from stepscope.tracer.record_workload import StepSink, resume_recording, trace_meta
from stepscope.tracer.recorder import TraceRecorder

from .checkpoints import checkpoint_steps, nearest_checkpoint, read_checkpoint
from .from_step import (
    WHOLE,
    Start,
    StepWindow,
    check_window,
    from_checkpoint_on,
    gaps_within,
    recorded_stretches,
    resume_runner,
    run_silently,
    start_at,
    window_bounds,
    within_trace,
)
from .inputs import workload_from_trace
from .step_differences import (
    DECISION_FIELDS,
    MISSING_STEP,
    SAMPLED,
    StepDifferences,
    fingerprints,
    step_differences,
)
from .trace_runner import replay_model_runner, whatif_model_runner

EXTRA_STEP = "extra_step"
"""What differs at a step the replay took and the (complete) recording lacks."""

EXACT_FIELDS = (*DECISION_FIELDS, SAMPLED)
"""What exact replay compares at each step: every decision, and what the model sampled."""

FLUSH_EVERY_STEPS = 1 << 16
"""A replay that is not kept cuts its batches by rows (`FLUSH_ROWS`, about a DuckDB row
group) or time, hardly ever by steps: the writer spends less per row on full row groups
(`benchmarks/RESULTS.md`, replay_speed); a kept one flushes as any recording does, so a
stopped replay keeps its steps."""


@dataclass(frozen=True)
class Divergence:
    """The first step where the replay did not decide as the recording did."""

    step: int
    fields: tuple[str, ...]
    """The fields that differ (`EXACT_FIELDS`); `missing_step` / `extra_step` when one
    side has no such step."""
    recorded: StepDetail
    """The step as the trace holds it (`read_step`; not `in_trace` when it has no such step)."""
    replayed: StepDetail
    """The step as the replay's own trace holds it."""


@dataclass(frozen=True)
class ExactReplay:
    trace: Path
    num_recorded_steps: int
    num_compared_steps: int
    """Steps both sides took alike before the divergence (all compared steps without one)."""
    trace_complete: bool
    divergence: Divergence | None
    output: Path | None
    window: StepWindow = WHOLE
    checkpoint_step: int | None = None
    """The checkpoint a windowed replay started from (None: step 0)."""
    state_differences: tuple[str, ...] = ()
    """After a divergence of a replay started from a checkpoint: where that checkpoint
    differs from the state the recording reaches there from the one before it (or step 0).
    Empty: the checkpoint holds that state, so a decision departed."""
    last_step: int | None = None
    """The trace's last step (None: it ends at `num_recorded_steps - 1`)."""
    gaps: tuple[StepGap, ...] = ()
    """The steps of the window the trace does not hold: each stretch after one was replayed
    from the checkpoint that resumed the recording."""
    dropped_from: int | None = None
    """The first of the steps a recording lost at its end (`Trace.dropped_from`)."""
    being_recorded: bool = False
    """A process recorded into the folder when it was read: it is not complete yet."""


@dataclass(frozen=True)
class RecordedReplay:
    complete: bool
    """It ran to its end (or its window's)."""
    start: Start | None
    """Where a windowed replay started (None: at step 0)."""


def replay_exact(
    trace_path: Path,
    output: Path | None = None,
    scheduler_cls: type[Scheduler] | None = None,
    *,
    sinks: Sequence[StepSink] = (),
    window: StepWindow = WHOLE,
) -> ExactReplay:
    """Replay `trace_path` over `window`; with `output`, the replay's trace is kept there.

    A trace with gaps (steps its recorder dropped) is replayed a stretch at a time, each
    from the checkpoint that resumed the recording, up to the first divergence."""
    with (
        tempfile.TemporaryDirectory(prefix="stepscope-replay-") as scratch,
        open_trace(trace_path) as trace,
    ):
        check_window(window, trace)
        stretches = recorded_stretches(window, trace)
        if output is not None and len(stretches) > 1:
            raise InputError(_one_output_refusal(trace, window))
        num_compared, divergence, start = 0, None, None
        for stretch in stretches:
            target = output or Path(scratch) / f"replay-{stretch.from_step}.duckdb"
            start = record_replay(
                trace, target, scheduler_cls=scheduler_cls, sinks=sinks, keep=output is not None,
                window=stretch,
            ).start  # fmt: skip
            with open_trace(target) as replay:
                compared, divergence = _compare(trace, replay, stretch)
            num_compared += compared
            if divergence is not None:
                break
        state_differences: tuple[str, ...] = ()
        checkpoint_step = start.checkpoint_step if start is not None else None
        if divergence is not None and checkpoint_step:
            state_differences = tuple(verify_checkpoint(trace, checkpoint_step))
        num_recorded, complete, last = trace.num_steps, trace.complete, trace.last_step
        gaps, dropped_from = gaps_within(window, trace), trace.dropped_from
        window = within_trace(window, trace)
    return ExactReplay(
        trace_path, num_recorded, num_compared, complete, divergence, output, window,
        checkpoint_step, state_differences, last, gaps, dropped_from,
        being_recorded=not complete and writer_pid(trace_path) is not None,
    )  # fmt: skip


def _one_output_refusal(trace: Trace, window: StepWindow) -> str:
    stretches = ", ".join(
        f"{s.from_step}..{trace.last_step if s.to_step is None else s.to_step}"
        for s in recorded_stretches(window, trace)
    )
    return (
        f"-o: {trace.path} has gaps (steps the recorder dropped), so its replay is a run "
        f"per recorded stretch ({stretches}); to keep one, give its steps with "
        "--from-step/--to-step"
    )


def record_replay(
    trace: Trace,
    target: Path,
    *,
    knobs: Mapping[str, Any] | None = None,
    workload: Workload | None = None,
    scheduler_cls: type[Scheduler] | None = None,
    sinks: Sequence[StepSink] = (),
    keep: bool,
    stop: threading.Event | None = None,
    window: StepWindow = WHOLE,
) -> RecordedReplay:
    """Run the trace's inputs (under `knobs`, for a what-if) through the engine over
    `window`, recorded into `target`: kept, as any recording is; else in larger batches,
    not compacted. A window that starts past step 0 starts from the trace's nearest
    checkpoint (`from_step.start_at`), and the replay's trace holds its steps only.

    `workload` is `workload_from_trace(trace, knobs)` when the caller has read it (a
    window past step 0 reads its own, from its checkpoint on). A
    trace that is incomplete is replayed as far as it goes; a set `stop` ends the replay
    after the step it is seen at.
    """
    last = None if trace.complete else trace.last_step + 1
    start = None
    window = within_trace(window, trace)
    if window.from_step > 0:
        start = start_at(trace, window.from_step, knobs, window_bounds(window)[1])
        workload, runner = start.workload, start.runner
    else:
        if workload is None:
            workload = workload_from_trace(trace, knobs)
        runner = (
            whatif_model_runner(workload, trace, knobs)
            if knobs
            else replay_model_runner(workload, trace)
        )
    meta = _replay_meta(workload, trace, window)
    recorder = (
        TraceRecorder(target, workload, meta)
        if keep
        else TraceRecorder(
            target, workload, meta, flush_every_steps=FLUSH_EVERY_STEPS, compact=False
        )
    )
    loop = EngineLoop(
        workload,
        runner,
        probe=recorder,
        scheduler_cls=scheduler_cls,
        keep_finishes=False,  # the trace has every ending; a long replay would hold them all
    )
    complete = False
    steps = loop.run()
    try:
        if start is not None:
            resume_recording(loop, recorder, start.state)
        for record in steps:
            if last is not None and record.step >= last:
                break
            if window.to_step is not None and record.step > window.to_step:
                complete = True
                break
            recorder.record_step(record, loop.core.scheduler)
            for sink in sinks:
                sink.on_step(record, loop.core.scheduler)
            if stop is not None and stop.is_set():
                break
        else:
            complete = True
    finally:
        steps.close()  # the loop ends now: its frozen heap goes back to the collector
        recorder.close(complete=complete)
    return RecordedReplay(complete, start)


def replay_differences(trace: Trace, replay: Trace, window: StepWindow = WHOLE) -> StepDifferences:
    """Every step of `window` where the replay did not decide (or sample) as the trace did:
    `stepscope diff`'s comparison over `EXACT_FIELDS`. A replay stopped short is compared
    as far as it went."""
    recorded, replayed = fingerprints(trace, replay, window_bounds(window))
    return _differences(recorded, replayed, replay_complete=replay.complete)


def _differences(
    recorded: pa.Table, replayed: pa.Table, *, replay_complete: bool
) -> StepDifferences:
    if not replay_complete:
        recorded = recorded.slice(0, replayed.num_rows)
    return step_differences(recorded, replayed, EXACT_FIELDS)


def _compare(trace: Trace, replay: Trace, window: StepWindow) -> tuple[int, Divergence | None]:
    """How many steps of `window` the replay took alike before the first that differs, and
    that one."""
    recorded, replayed = fingerprints(trace, replay, window_bounds(window))
    differences = _differences(recorded, replayed, replay_complete=replay.complete)
    step, fields = differences.first()
    if step is None:
        return min(recorded.num_rows, replayed.num_rows), None
    num_alike = int(np.searchsorted(recorded["step"].to_numpy(), step))
    if fields == (MISSING_STEP,) and num_alike == recorded.num_rows:
        fields = (EXTRA_STEP,)
    return num_alike, Divergence(
        step, fields, recorded=read_step(trace, step), replayed=read_step(replay, step)
    )


def verify_checkpoint(trace: Trace, step: int) -> list[str]:
    """Where the trace's checkpoint at `step` differs from the state the recording reaches
    there, replayed from the checkpoint before it (or step 0): [] when it holds that state,
    or when the trace holds nothing before it to check it by (its first step, or the first
    after a gap, is later than any earlier checkpoint)."""
    earlier_step = nearest_checkpoint(checkpoint_steps(trace), step - 1)
    resumed = [trace.first_step, *(g.last_step + 1 for g in trace.gaps if g.last_step < step)]
    if max(resumed) > (earlier_step or 0):
        return []
    earlier = None if earlier_step is None else read_checkpoint(trace, earlier_step)
    workload = workload_from_trace(trace, since=earlier)
    check_hashes_computable(workload.config)
    runner = replay_model_runner(workload, trace, earlier_step or 0)
    if earlier is not None:
        workload = from_checkpoint_on(workload, earlier)
        resume_runner(runner, trace, workload, earlier)
    reached = run_silently(workload, runner, earlier, step)
    return checkpoint_differences(read_checkpoint(trace, step), reached)


def _replay_meta(workload: Workload, trace: Trace, window: StepWindow) -> dict[str, str]:
    meta = trace_meta(workload)
    meta.update(
        replay_of=str(trace.path),
        model=f"replay of {trace.meta.get('model', 'unknown')}",
        device="none (replay)",
    )
    if window.from_step:
        meta["replay_from_step"] = str(window.from_step)
    if window.to_step is not None:
        meta["replay_to_step"] = str(window.to_step)
    return meta
