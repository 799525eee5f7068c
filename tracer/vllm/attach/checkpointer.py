"""A vLLM recording's checkpoints: taken at the start of an iteration when one is due,
complete once the queued batch's output has been processed (under async scheduling: its
sampled tokens are part of the state), and handed to the recorder with their step.

An iteration can start and never become a step: an abort from the frontend arriving
after the engine's last batch (vLLM's output processor aborts a request it stopped on a
stop string), then nothing more to schedule. Its checkpoint is dropped with it; a trace
holds checkpoints only at steps it holds."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from stepscope.engine import ModelRunnerOutput
from stepscope.engine.checkpoint import SchedulerCheckpoint
from stepscope.tracer.background import BackgroundRecorder

from .checkpoint import PendingSnapshot, VllmSnapshot, take_snapshot
from .checkpoint_interval import CheckpointInterval
from .iterations import Iteration


class VllmCheckpointer:
    """Takes a checkpoint at the start of each iteration its interval says is due.

    The engine thread's part is `take_snapshot`; the conversion and the rows are built
    off it (`BackgroundRecorder.record_checkpoint`).
    """

    def __init__(
        self, scheduler: Any, recorder: BackgroundRecorder, interval: CheckpointInterval
    ) -> None:
        self.scheduler = scheduler
        self.recorder = recorder
        self.interval = interval
        self.last_taken = time.monotonic()
        """When the last checkpoint was taken (at first: when recording began)."""
        self.considered_step = 0
        """The latest step whose start was considered (step 0 never has a checkpoint)."""
        self.awaiting: tuple[VllmSnapshot, int] | None = None
        """A snapshot, and its time, whose queued batch's output is still to come."""
        self.complete: deque[tuple[int, Callable[[], SchedulerCheckpoint], int]] = deque()
        """Checkpoints complete and waiting for their step, oldest first (step, build, time)."""

    def at_iteration_start(self, step: int, in_flight: Mapping[int, Iteration]) -> None:
        """The scheduler is about to be touched by `step` (its arrivals, aborts or calls)."""
        if step == self.considered_step:
            return
        self.considered_step = step
        now = time.monotonic()
        if not self.interval.due(step, now - self.last_taken) or len(in_flight) > 1:
            return  # more than one batch in flight is pipeline parallelism: outside the subset
        self.last_taken = now
        started = time.perf_counter_ns()
        pending = None
        for iteration in in_flight.values():
            assert iteration.batch is not None
            pending = PendingSnapshot.of(iteration.step, iteration.batch.output)
        snapshot = take_snapshot(self.scheduler, step, pending)
        take_ns = time.perf_counter_ns() - started
        if pending is None:
            self.complete.append((step, snapshot.checkpoint, take_ns))
        else:
            self.awaiting = (snapshot, take_ns)

    def on_batch_processed(self, step: int, runner_output: ModelRunnerOutput) -> None:
        """The output of the batch scheduled at `step` has been processed."""
        awaiting = self.awaiting
        if awaiting is None:
            return
        snapshot, take_ns = awaiting
        pending = snapshot.pending
        assert pending is not None
        if pending.step != step:
            return
        self.awaiting = None
        sampled = tuple(
            zip(runner_output.req_ids, map(tuple, runner_output.sampled_token_ids), strict=True)
        )
        batch = pending.batch(sampled)
        self.complete.append((snapshot.step, lambda: snapshot.checkpoint(batch), take_ns))

    def on_step_recorded(self, step: int) -> None:
        """`step` is about to be recorded: its checkpoint, if it has one, goes with it."""
        complete = self.complete
        while complete and complete[0][0] <= step:
            _, checkpoint, take_ns = complete.popleft()
            self.recorder.record_checkpoint(checkpoint, take_ns)
