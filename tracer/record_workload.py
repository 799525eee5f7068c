"""Record a workload run into a trace file."""

from __future__ import annotations

import datetime
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from stepscope.engine import EngineLoop, InputError, ModelRunner, Scheduler, StepRecord, Workload
from stepscope.engine.checkpoint import SchedulerCheckpoint
from stepscope.engine.oracle_lines import ENGINE_NAME

from stepscope import __version__

from .checkpointer import DEFAULT_CHECKPOINT_EVERY, Checkpointer
from .recorder import TraceRecorder
from .redact import Redactor
from .segments import SegmentSettings


class StepSink(Protocol):
    """Something else that follows the run step by step (progress, OpenTelemetry)."""

    def on_step(self, record: StepRecord, scheduler: Scheduler) -> None: ...


@dataclass(frozen=True)
class RecordSummary:
    path: Path
    num_steps: int
    complete: bool


def trace_meta(workload: Workload, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The `_meta` facts every recording starts with."""
    return {
        "tool_version": __version__,
        "engine": ENGINE_NAME,
        "emulates_vllm": workload.config.vllm_version,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python_version": platform.python_version(),
        "workload": workload.source,
        "description": workload.description,
        "max_steps": str(workload.max_steps),
        "model": "tape",
        "device": "cpu",
        **(extra or {}),
    }


def resume_recording(
    loop: EngineLoop, recorder: TraceRecorder, checkpoint: SchedulerCheckpoint
) -> None:
    """Start `loop` at `checkpoint`, its unfinished requests recorded as arrived before it."""
    loop.resume(checkpoint)
    recorder.record_resumed(checkpoint)


def record_workload(
    workload: Workload,
    model_runner: ModelRunner,
    path: Path,
    *,
    meta: Mapping[str, str] | None = None,
    redactor: Redactor | None = None,
    sinks: Sequence[StepSink] = (),
    flush_every_steps: int = 256,
    scheduler_cls: type[Scheduler] | None = None,
    checkpoint_every: int | None = DEFAULT_CHECKPOINT_EVERY,
    start: SchedulerCheckpoint | None = None,
    to_step: int | None = None,
    segments: SegmentSettings | None = None,
) -> RecordSummary:
    """Run the workload with a recorder attached; the trace is marked complete at the end.

    A checkpoint is taken every `checkpoint_every` steps (None or 0: none; a redacted
    trace takes none: its block hashes are of the tokens it does not hold).
    With `start` the run resumes at that checkpoint's step (the model runner taken up there
    already);
    with `to_step` it stops after that step, and the trace says it is incomplete. If the
    run stops early (an exception, Ctrl-C), every step recorded so far is kept and the
    trace says it is incomplete. With `segments` the trace is a recording folder of
    segments, each opening with a checkpoint.
    """
    if path.exists():
        raise InputError(f"{path}: already exists (remove it or choose another -o)")
    recorder = TraceRecorder(
        path,
        workload,
        trace_meta(workload, meta),
        redactor=redactor,
        flush_every_steps=flush_every_steps,
        segments=segments,
    )
    loop = EngineLoop(
        workload,
        model_runner,
        probe=recorder,
        scheduler_cls=scheduler_cls,
        keep_output_tokens=False,
        keep_finishes=False,
    )
    Checkpointer.attach(
        loop,
        recorder,
        checkpoint_every,
        None if segments is None else segments.every,
        redacted=redactor is not None,
    )
    complete = False
    steps = loop.run()
    try:
        if start is not None:
            resume_recording(loop, recorder, start)
        scheduler = loop.core.scheduler
        for record in steps:
            if to_step is not None and record.step > to_step:
                break
            recorder.record_step(record, scheduler)
            for sink in sinks:
                sink.on_step(record, scheduler)
        else:
            complete = True
    finally:
        steps.close()
        recorder.close(complete=complete)
    return RecordSummary(path, recorder.num_steps, complete)
