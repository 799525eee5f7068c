"""Recording workloads into recording folders (segments) for tests: whole, with a gap, with
their oldest segments deleted, or still being written."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from stepscope.engine import EngineLoop, StepRecord, TapeModelRunner, Workload, load_workload
from stepscope.engine.checkpoint import SchedulerCheckpoint
from stepscope.engine.probe import Decision, QueueState, ScheduleEnd, ScheduleStart
from stepscope.schema.recording_layout import MANIFEST, scan
from stepscope.tracer.checkpointer import Checkpointer
from stepscope.tracer.record_workload import record_workload, trace_meta
from stepscope.tracer.recorder import TraceRecorder
from stepscope.tracer.segments import SegmentSettings, parse_retention, parse_segment_every


def settings(every: str = "50steps", retain: str = "2GB") -> SegmentSettings:
    return SegmentSettings(parse_segment_every(every, "test"), parse_retention(retain, "test"))


def _workload(workload: Workload | Path) -> Workload:
    return load_workload(workload) if isinstance(workload, Path) else workload


def record_folder(
    workload: Workload | Path,
    folder: Path,
    every: str = "50steps",
    checkpoint_every: int = 0,
    **kwargs: object,
) -> Path:
    """The workload recorded into the recording folder `folder`, closed."""
    loaded = _workload(workload)
    record_workload(
        loaded,
        TapeModelRunner.for_workload(loaded),
        folder,
        segments=settings(every),
        checkpoint_every=checkpoint_every,
        **kwargs,  # type: ignore[arg-type]
    )
    return folder


def record_learning_late(
    workload: Workload,
    unaware: Workload,
    path: Path,
    every: str,
    learn: Callable[[TraceRecorder, int], None] = lambda recorder, step: None,
) -> None:
    """`workload` run and recorded into `path` (a file, or a folder of `every`-step segments)
    by a recorder that knows only `unaware`, as a live engine's does: `learn` tells it, before
    each step is recorded, what the engine has learned by then."""
    segments = None if path.suffix else settings(every)
    recorder = TraceRecorder(path, unaware, trace_meta(unaware), segments=segments)
    loop = EngineLoop(workload, TapeModelRunner.for_workload(workload), probe=recorder)
    if segments is not None:
        Checkpointer.attach(loop, recorder, 0, segments.every)
    for step in loop.run():
        learn(recorder, step.step)
        recorder.record_step(step, loop.core.scheduler)
    recorder.close(complete=True)


def set_recording_format(folder: Path, recording_format: int) -> None:
    """Say in the folder's manifest that it is of `recording_format`."""
    manifest = folder / MANIFEST
    document = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**document, "recording_format": recording_format}))


def delete_oldest(folder: Path, num_segments: int) -> int:
    """Delete the recording's oldest segments, as retention does; its first step now."""
    segments = scan(folder)
    for segment in segments[:num_segments]:
        for path in segment.folders:
            shutil.rmtree(path)
    return segments[num_segments].first_step


class DroppingProbe:
    """The recorder behind what `BackgroundRecorder` does when its builder falls behind,
    inline and at a chosen step: from `gap_at` on, every step's calls are dropped (its
    `schedule()` call's and its record) until the checkpoint that opens the next segment,
    and the recorder is told where the gap starts."""

    def __init__(self, recorder: TraceRecorder, gap_at: int | None) -> None:
        self.recorder = recorder
        self.gap_at = gap_at
        self.dropping = False
        self.decisions: list[Decision] = []
        self.wants_checkpoint = False

    def on_schedule_start(self, record: ScheduleStart) -> None:
        if not self.dropping:
            self.recorder.on_schedule_start(record)

    def on_schedule_end(self, record: ScheduleEnd) -> None:
        decisions, self.decisions = self.decisions, []
        if not self.dropping:
            self.recorder.decisions = decisions
            self.recorder.on_schedule_end(record)

    def record_step(self, record: StepRecord, scheduler: QueueState) -> None:
        if record.step == self.gap_at:
            self.dropping = True
            self.recorder.gap_starts(record.step)
        if not self.dropping:
            self.recorder.record_step(record, scheduler)

    def record_checkpoint(
        self, checkpoint: SchedulerCheckpoint, take_ns: int, *, opens_segment: bool = False
    ) -> None:
        if opens_segment:
            self.dropping = False
        if not self.dropping:
            self.recorder.record_checkpoint(checkpoint, take_ns, opens_segment=opens_segment)

    def open_segment_at(self, step: int) -> None:
        self.dropping = False
        self.recorder.open_segment_at(step)

    def resume_at(self, step: int) -> None:
        raise AssertionError(f"resume_at({step}): the gap ends where the next segment opens")


@contextlib.contextmanager
def recording(
    workload: Workload | Path,
    folder: Path,
    every: str = "50steps",
    *,
    stop_after: int | None = None,
    gap_at: int | None = None,
    retain: str = "2GB",
) -> Iterator[TraceRecorder]:
    """The workload recorded into `folder` by a recorder left open: it stops after step
    `stop_after` (the open segment's parts flushed and written, the writer's lock held)
    until the block ends; with `gap_at`, the writer "falls behind" at that step and
    drops steps until the next segment opens."""
    loaded = _workload(workload)
    chosen = settings(every, retain)
    recorder = TraceRecorder(folder, loaded, trace_meta(loaded), segments=chosen)
    probe = DroppingProbe(recorder, gap_at)
    loop = EngineLoop(
        loaded,
        TapeModelRunner.for_workload(loaded),
        probe=probe,
        keep_output_tokens=False,
        keep_finishes=False,
    )
    Checkpointer.attach(loop, probe, 0, chosen.every)  # type: ignore[arg-type]
    steps = loop.run()
    complete = True
    try:
        for record in steps:
            probe.record_step(record, loop.core.scheduler)
            if stop_after is not None and record.step >= stop_after:
                complete = False
                break
        recorder.flush()
        recorder.writer.wait()
        yield recorder
    finally:
        steps.close()
        recorder.close(complete=complete)
