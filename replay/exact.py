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
from stepscope.engine import EngineLoop, Scheduler, Workload
from stepscope.schema import StepDetail, Trace, open_trace, read_step
from stepscope.tracer.record_workload import StepSink, trace_meta
from stepscope.tracer.recorder import TraceRecorder

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


def replay_exact(
    trace_path: Path,
    output: Path | None = None,
    scheduler_cls: type[Scheduler] | None = None,
    *,
    sinks: Sequence[StepSink] = (),
) -> ExactReplay:
    """Replay `trace_path`; with `output`, the replay's trace is kept there."""
    with (
        tempfile.TemporaryDirectory(prefix="stepscope-replay-") as scratch,
        open_trace(trace_path) as trace,
    ):
        target = output or Path(scratch) / "replay.duckdb"
        record_replay(
            trace, target, scheduler_cls=scheduler_cls, sinks=sinks, keep=output is not None
        )
        with open_trace(target) as replay:
            compared, divergence = _compare(trace, replay)
        num_recorded, complete = trace.num_steps, trace.complete
    return ExactReplay(trace_path, num_recorded, compared, complete, divergence, output)


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
) -> bool:
    """Run the trace's inputs (under `knobs`, for a what-if) through the engine, recorded
    into `target`: kept, as any recording is; else in larger batches, not compacted.

    `workload` is `workload_from_trace(trace, knobs)` when the caller has read it. A
    trace that is incomplete is replayed as far as it goes; a set `stop` ends the replay
    after the step it is seen at. Returns whether the replay ran to its end.
    """
    if workload is None:
        workload = workload_from_trace(trace, knobs)
    last = None if trace.complete else trace.num_steps
    meta = _replay_meta(workload, trace)
    recorder = (
        TraceRecorder(target, workload, meta)
        if keep
        else TraceRecorder(
            target, workload, meta, flush_every_steps=FLUSH_EVERY_STEPS, compact=False
        )
    )
    loop = EngineLoop(
        workload,
        whatif_model_runner(workload, trace, knobs)
        if knobs
        else replay_model_runner(workload, trace),
        probe=recorder,
        scheduler_cls=scheduler_cls,
        keep_finishes=False,  # the trace has every ending; a long replay would hold them all
    )
    complete = False
    steps = loop.run()
    try:
        for record in steps:
            if last is not None and record.step >= last:
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
    return complete


def replay_differences(trace: Trace, replay: Trace) -> StepDifferences:
    """Every step where the replay did not decide (or sample) as the trace did: `stepscope
    diff`'s comparison over `EXACT_FIELDS`. A replay stopped short is compared as far as
    it went."""
    return _differences(*fingerprints(trace, replay), replay_complete=replay.complete)


def _differences(
    recorded: pa.Table, replayed: pa.Table, *, replay_complete: bool
) -> StepDifferences:
    if not replay_complete:
        recorded = recorded.slice(0, replayed.num_rows)
    return step_differences(recorded, replayed, EXACT_FIELDS)


def _compare(trace: Trace, replay: Trace) -> tuple[int, Divergence | None]:
    """How many steps the replay took alike before the first that differs, and that one."""
    recorded, replayed = fingerprints(trace, replay)
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


def _replay_meta(workload: Workload, trace: Trace) -> dict[str, str]:
    meta = trace_meta(workload)
    meta.update(
        replay_of=str(trace.path),
        model=f"replay of {trace.meta.get('model', 'unknown')}",
        device="none (replay)",
    )
    return meta
