"""A vLLM recording's checkpoints: taken at the start of an iteration when one is due,
complete once the queued batch's output has been processed (under async scheduling: its
sampled tokens are part of the state), and handed to the recorder with their step.

An iteration can start and never become a step: an abort from the frontend arriving
after the engine's last batch (vLLM's output processor aborts a request it stopped on a
stop string), then nothing more to schedule. Its checkpoint is dropped with it; a trace
holds checkpoints only at steps it holds.

A segmented recording opens each segment with a checkpoint, taken when the segment is
due, or when the recorder has caught up after dropping steps (it resumes there); where
no checkpoint can be taken (a redacted recording, KV cache groups the engine does not
model) the segment opens without one."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from stepscope.engine.checkpoint import SchedulerCheckpoint
from stepscope.tracer.background import BackgroundRecorder
from stepscope.tracer.segments import SegmentEvery

from .checkpoint import PendingSnapshot, VllmSnapshot, take_snapshot
from .checkpoint_interval import CheckpointInterval
from .convert import model_runner_output
from .iterations import Iteration

_EARLY_S = 1e-6
"""A due time is looked at this much early, so that rounding in `started + seconds` never
lets an iteration pass one that `_consider` would take."""


@dataclass(frozen=True)
class _Complete:
    """A checkpoint complete and waiting for its step."""

    step: int
    checkpoint: Callable[[], SchedulerCheckpoint]
    take_ns: int
    opens_segment: bool


class VllmCheckpointer:
    """Takes a checkpoint at the start of each iteration its interval says is due, or
    that opens a segment.

    The engine thread's part is `take_snapshot`; the conversion and the rows are built
    off it (`BackgroundRecorder.record_checkpoint`).
    """

    def __init__(
        self,
        scheduler: Any,
        recorder: BackgroundRecorder,
        interval: CheckpointInterval | None,
        segments: SegmentEvery | None = None,
        *,
        can_checkpoint: bool = True,
        keyed_by_group: bool = False,
        on_segment_open: Callable[[], None] = lambda: None,
    ) -> None:
        self.scheduler = scheduler
        self.keyed_by_group = keyed_by_group
        """Hybrid KV cache groups: cached blocks keep vLLM's group-keyed hashes."""
        self.on_segment_open = on_segment_open
        """Called on the engine thread when a segment opens (the session forgets old ids)."""
        self.recorder = recorder
        self.interval = interval if can_checkpoint else None
        self.segments = segments
        self.can_checkpoint = can_checkpoint
        self.last_taken = time.monotonic()
        """When the last checkpoint was taken (at first: when recording began)."""
        self.segment_start: tuple[int, float] | None = None
        """The step the open segment began at, and when (monotonic; None: the first segment,
        whose clock starts with the engine's first iteration after step 0)."""
        self.considered_step = 0
        """The latest step whose start was considered (step 0 never has a checkpoint)."""
        self._next_step: float = 0
        self._next_time = -math.inf
        """Before this step and this time (monotonic) nothing is due (`_plan_next_check`),
        unless the recorder is dropping steps: most iterations look no further."""
        self.awaiting: tuple[VllmSnapshot, int, bool] | None = None
        """A snapshot, its time and whether it opens a segment, whose queued batch's output
        is still to come."""
        self.complete: deque[_Complete] = deque()
        """Checkpoints complete and waiting for their step, oldest first."""

    def at_iteration_start(self, step: int, in_flight: Mapping[int, Iteration]) -> None:
        """The scheduler is about to be touched by `step` (its arrivals, aborts or calls)."""
        if step == self.considered_step:
            return
        self.considered_step = step
        now = time.monotonic()
        if step < self._next_step and now < self._next_time and not self.recorder.dropping:
            return
        try:
            self._consider(step, in_flight, now)
        finally:
            self._plan_next_check(step)

    def _consider(self, step: int, in_flight: Mapping[int, Iteration], now: float) -> None:
        if len(in_flight) > 1:
            return  # more than one batch in flight is pipeline parallelism: outside the subset
        opens = self._opens_segment(step, now)
        if opens and not self.can_checkpoint:
            self.recorder.open_segment_at(step)
            return
        if opens or (self.interval is not None and self.interval.due(step, now - self.last_taken)):
            self._take(step, in_flight, now, opens_segment=opens)

    def _plan_next_check(self, step: int) -> None:
        """The first step after `step`, and the time, at which a segment or a checkpoint can
        be due next (a little early for a time: `_consider` decides)."""
        next_step, next_time = math.inf, math.inf
        segments, interval = self.segments, self.interval
        if segments is not None and self.segment_start is not None:
            first, started = self.segment_start
            if segments.steps is not None:
                next_step = first + segments.steps
            elif segments.seconds is not None:
                next_time = started + segments.seconds - _EARLY_S
        if interval is not None:
            every_steps = interval.every_steps
            if every_steps is not None:
                next_step = min(next_step, (step // every_steps + 1) * every_steps)
            elif interval.every_s is not None:
                next_time = min(next_time, self.last_taken + interval.every_s - _EARLY_S)
        self._next_step, self._next_time = next_step, next_time

    def _opens_segment(self, step: int, now: float) -> bool:
        """Whether a segment opens at `step`: one is due, or recording resumes after a gap."""
        resumes = self.recorder.wants_checkpoint
        if self.segment_start is None:
            self.segment_start = (0, now)
        first, started = self.segment_start
        due = self.segments is not None and self.segments.due(step - first, now - started)
        if not (resumes or due):
            return False
        if resumes:
            self.recorder.resume_at(step)
        self.segment_start = (step, now)
        self.on_segment_open()
        return True

    def _take(
        self, step: int, in_flight: Mapping[int, Iteration], now: float, *, opens_segment: bool
    ) -> None:
        self.last_taken = now
        started = time.perf_counter_ns()
        pending = None
        for iteration in in_flight.values():
            batch = iteration.batch
            assert batch is not None
            pending = PendingSnapshot.of(
                iteration.step, batch.scheduler_output.num_scheduled_tokens, batch.spec_tokens
            )
        snapshot = take_snapshot(self.scheduler, step, pending, keyed_by_group=self.keyed_by_group)
        take_ns = time.perf_counter_ns() - started
        if pending is None:
            self.complete.append(_Complete(step, snapshot.checkpoint, take_ns, opens_segment))
        else:
            self.awaiting = (snapshot, take_ns, opens_segment)

    def on_batch_processed(self, step: int, runner_output: Any) -> None:
        """The output of the batch scheduled at `step` has been processed (`runner_output`:
        the model's output as it came, or the recording's copy of it)."""
        awaiting = self.awaiting
        if awaiting is None:
            return
        snapshot, take_ns, opens_segment = awaiting
        pending = snapshot.pending
        assert pending is not None
        if pending.step != step:
            return
        self.awaiting = None
        runner_output = model_runner_output(runner_output)
        sampled = tuple(
            zip(runner_output.req_ids, map(tuple, runner_output.sampled_token_ids), strict=True)
        )
        batch = pending.batch(sampled)
        build = lambda: snapshot.checkpoint(batch)  # noqa: E731
        self.complete.append(_Complete(snapshot.step, build, take_ns, opens_segment))

    def on_step_recorded(self, step: int) -> None:
        """`step` is about to be recorded: its checkpoint, if it has one, goes with it."""
        complete = self.complete
        while complete and complete[0].step <= step:
            taken = complete.popleft()
            self.recorder.record_checkpoint(
                taken.checkpoint, taken.take_ns, opens_segment=taken.opens_segment
            )
