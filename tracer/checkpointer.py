"""Takes checkpoints into the trace at a step's start (`StepLoop.on_step_start`): every N
steps, and at the start of every segment of a segmented recording."""

from __future__ import annotations

import time
from typing import Any

from stepscope.engine.checkpoint import take_checkpoint
from stepscope.engine.engine_loop import StepLoop

from .background import BackgroundRecorder
from .recorder import TraceRecorder
from .segments import SegmentEvery

DEFAULT_CHECKPOINT_EVERY = 1000
"""Steps between checkpoints unless told otherwise: on the chat traffic of `benchmarks/` it
keeps their cost on the engine thread within the 1 % goal (`benchmarks/RESULTS.md`,
checkpoint_cost), while a replay from any step runs at most this many steps silently."""


class Checkpointer:
    """The loop's `on_step_start`: every `every` steps (not at step 0, whose state is
    empty), a snapshot of the engine's state to the recorder (whose writer thread builds
    its rows); `take_ns` is the snapshot's time, the engine thread's whole part. With
    `segments`, a segment opens at the first step one is due, and after a gap where the
    recorder asks to resume, with a checkpoint unless the recording is `redacted` (its
    block hashes are of tokens it does not hold)."""

    def __init__(
        self,
        loop: StepLoop[Any],
        recorder: TraceRecorder | BackgroundRecorder,
        every: int | None,
        segments: SegmentEvery | None = None,
        *,
        redacted: bool = False,
    ) -> None:
        self.loop = loop
        self.recorder = recorder
        self.every = None if redacted else every
        self.segments = segments
        self.redacted = redacted
        self.segment_start: tuple[int, float] | None = None
        """The step the open segment began at, and when (monotonic)."""

    def __call__(self, step: int) -> None:
        resumes = self.recorder.wants_checkpoint
        if resumes:
            self.recorder.resume_at(step)
        if resumes or (self.segments is not None and self._segment_due(step)):
            self.segment_start = (step, time.monotonic())
            if self.redacted:
                self.recorder.open_segment_at(step)
            else:
                self._take(step, opens_segment=True)
        elif self.every and step % self.every == 0 and step:
            self._take(step, opens_segment=False)

    def _segment_due(self, step: int) -> bool:
        assert self.segments is not None
        if self.segment_start is None:
            self.segment_start = (step, time.monotonic())
            return False
        first, started = self.segment_start
        return self.segments.due(step - first, time.monotonic() - started)

    def _take(self, step: int, *, opens_segment: bool) -> None:
        started = time.perf_counter_ns()
        loop = self.loop
        pending_step = loop.batch_steps[0] if loop.batch_steps else None
        checkpoint = take_checkpoint(loop.core, step, pending_step)
        took = time.perf_counter_ns() - started
        self.recorder.record_checkpoint(checkpoint, took, opens_segment=opens_segment)

    @staticmethod
    def attach(
        loop: StepLoop[Any],
        recorder: TraceRecorder | BackgroundRecorder,
        every: int | None,
        segments: SegmentEvery | None = None,
        *,
        redacted: bool = False,
    ) -> None:
        """Take checkpoints every `every` steps in `loop` (None or 0: none) and at segments'
        starts."""
        if every or segments is not None:
            loop.on_step_start = Checkpointer(loop, recorder, every, segments, redacted=redacted)
