"""A recorder whose rows are built off the engine thread, and which drops steps rather
than make the engine wait.

A live vLLM engine thread spends its time in `schedule()` and
`update_from_output()`; turning a step into rows is as much work again. Here the
engine thread only hands the step's frozen records (or what the builder makes them
from), and the queue counts it read at that moment, to a builder thread that owns the
`TraceRecorder`; the builder runs while the engine thread waits on the model. Calls
reach the recorder in the order they were made, so the trace is the one the recorder
would write inline. They are handed over `HAND_OVER_STEPS` steps at a time (or sooner,
once the first of them has waited `HAND_OVER_WAIT_NS`), so the engine thread wakes the
builder (a system call) once for a few steps, not once a call, and vLLM's objects for those
steps are let go a few steps after vLLM would have let them go; the builder lets the
GIL go between the steps it builds, so the engine never waits on more than one. (A
builder polling a queue instead, waking no one, cost a server recording on a CPU model far
more of its output throughput: its wake-ups took the GIL from the engine thread;
`benchmarks/RESULTS.md` has the figures.)

When the builder falls `BACKLOG_STEPS` steps behind (a slow disk, a starved core),
the engine thread stops handing steps over: the steps from there are dropped and
counted, the recording's segment ends where the builder's rows end, and once the
builder has caught up the engine's checkpointer takes a checkpoint (`wants_checkpoint`,
`resume_at`) from which recording resumes, in a new segment. A replay resumes there.
A driven run (`lossless`: no client waits on it) waits for the builder instead. A server's
recorder (`low_priority`) runs its builder and its writer at the lowest CPU priority
(`thread_priority.py`).
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

from stepscope.engine import StepRecord
from stepscope.engine.checkpoint import SchedulerCheckpoint
from stepscope.engine.probe import Decision, QueueState, ScheduleEnd, ScheduleStart
from stepscope.engine.workload import RequestSpec

from .held_signals import signals_held
from .recorder import SEGMENT_FLUSH_INTERVAL_S, TraceRecorder
from .thread_priority import lower_priority

logger = logging.getLogger("stepscope.tracer")

BACKLOG_STEPS = 512
"""Steps the builder may fall behind before the engine thread drops steps instead of
handing them over."""
MAX_QUEUED_CALLS = 65_536
"""Calls of any kind queued at most: past it the builder is stuck (a disk that hangs), and
the recording stops rather than hold the engine's arrivals without bound."""
MAX_HELD_CALLS = 256
"""Calls held back on the engine thread at most before they are handed over (between steps,
arrivals would otherwise wait for the next step)."""
HAND_OVER_STEPS = 4
"""Steps held back on the engine thread before they are handed over together: a few, not
many. Held steps keep vLLM's objects for them alive (outputs, sampled lists, block ids);
in a server, which keeps the garbage collector on, every young object kept alive past its
step counts toward the collector's next run, and those runs fall on the engine thread."""
HAND_OVER_WAIT_NS = 100_000_000
"""...or sooner, at the first step once the held steps have waited this long (slow steps,
a quiet engine), so the trace's readers are not kept waiting."""


class RecorderStalled(RuntimeError):
    """The builder has not taken a call for so long that the recording gives up."""


@dataclass(frozen=True)
class QueueCounts:
    """A `QueueState` read once, on the engine thread, when its step was handed over (the
    builder thread makes this of the counts)."""

    num_running: int
    num_waiting: int
    num_free_blocks: int

    def get_request_counts(self) -> tuple[int, int]:
        return self.num_running, self.num_waiting

    def get_num_free_blocks(self) -> int:
        return self.num_free_blocks


_Call = Callable[[], object]
_STOP = None
_Batch = list[_Call]


class BackgroundRecorder:
    """The `TraceRecorder` calls a live engine makes, run in order on a builder thread.

    A failure in the builder is raised on the engine thread's next call, so the
    caller's own failure handling stops the recording; the steps built before it
    are kept.
    """

    def __init__(
        self, recorder: TraceRecorder, *, lossless: bool = False, low_priority: bool = False
    ) -> None:
        self.recorder = recorder
        self.lossless = lossless
        self.backlog_steps = BACKLOG_STEPS
        """Steps the builder may fall behind before steps are dropped (or, lossless, waited for)."""
        """Wait for the builder instead of dropping steps: for a driven run (a planned
        workload through a scheduler with no clients), where a gap would only lose data."""
        self.decisions: list[Decision] = []
        """The current `schedule()` call's decisions, appended to on the engine thread."""
        self.num_dropped_steps = 0
        """Steps not recorded because the builder had fallen behind."""
        self._calls: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        """Batches of calls for the builder, `HAND_OVER_STEPS` steps' at a time."""
        self._held: _Batch = []
        """Calls made since the last hand-over (the engine thread's)."""
        self._steps_held = 0
        """Steps among them."""
        self._hand_over_by = 0
        """When the held steps are handed over, however few (`time.monotonic_ns`)."""
        self._calls_handed_over = 0
        """Calls queued for the builder (written by the engine thread only)."""
        self._calls_taken = 0
        """Of those, calls the builder has taken (written by the builder only)."""
        self._caught_up = threading.Event()
        self._error: BaseException | None = None
        self._reported = False
        """The engine thread (or the log, at close) has been told of `_error`."""
        self._start: ScheduleStart | None = None
        self._steps_handed_over = 0
        """Steps queued for the builder (written by the engine thread only)."""
        self._steps_built = 0
        """Of those, steps the builder has recorded (written by the builder only)."""
        self.dropping = False
        """In a gap: schedule calls and checkpoints are dropped until `resume_at`."""
        self._drop_before: float = 0
        """Steps before this one are dropped (infinity while in a gap)."""
        self._thread = threading.Thread(target=self._run, name="stepscope-row-builder", daemon=True)
        self._thread.start()
        if low_priority:  # a server's: its engine comes first, the rows can wait
            for thread in (self._thread, recorder.writer.thread):
                lower_priority(thread)

    def on_schedule_start(self, record: ScheduleStart) -> None:
        self._start = record

    def on_schedule_end(self, record: ScheduleEnd) -> None:
        start = self._start
        assert start is not None, "on_schedule_start was not called"
        self.schedule_call_of(lambda: (start, record))

    def schedule_call_of(self, make: Callable[[], tuple[ScheduleStart, ScheduleEnd]]) -> None:
        """A `schedule()` call, with the decisions made since the last, whose start and end
        the builder thread makes with `make`; `make` runs even while steps are dropped (it
        may carry work of the builder's own that every call needs)."""
        decisions, self.decisions = self.decisions, []
        if self.dropping:
            self._submit(make)
        else:
            self._submit(lambda: self._schedule_call(*make(), decisions))

    def register_request(self, spec: RequestSpec) -> None:
        self._submit(lambda: self.recorder.register_request(spec))

    def grammar_pending(self, request_id: str) -> None:
        self._submit(lambda: self.recorder.grammar_pending(request_id))

    def grammar_ready(self, request_id: str, step: int) -> None:
        self._submit(lambda: self.recorder.grammar_ready(request_id, step))

    def defer(self, call: Callable[[], None]) -> None:
        """Run `call` on the builder thread, after every call handed over before it."""
        self._submit(call)

    def record_step(self, record: StepRecord, scheduler: QueueState) -> None:
        self.record_step_of(record.step, lambda: record, scheduler)

    def record_step_of(
        self, step: int, make_record: Callable[[], StepRecord], scheduler: QueueState
    ) -> None:
        """Record `step`, whose record the builder thread makes with `make_record`; every
        `HAND_OVER_STEPS` steps (or once they have waited), hands over every call held."""
        behind = step < self._drop_before or (
            self._steps_handed_over - self._steps_built >= self.backlog_steps
        )
        if not (behind and self._dropped(step)):
            # Queue the step, with the queue counts and the wall clock it ended at.
            if self._error is not None:
                self._raise_if_failed()
            counts = (*scheduler.get_request_counts(), scheduler.get_num_free_blocks())
            ended_at_ns = time.time_ns()
            self._steps_handed_over += 1
            held = self._held
            held.append(partial(self._build_step, make_record, counts, ended_at_ns))
            if len(held) >= MAX_HELD_CALLS:
                self._hand_over()
        self._steps_held += 1
        if self._steps_held >= HAND_OVER_STEPS or time.monotonic_ns() >= self._hand_over_by:
            self._hand_over()

    def _dropped(self, step: int) -> bool:
        """The builder is behind: a step in a gap is dropped, one the builder is too far behind
        for starts a gap (or, lossless, waits for the builder and is recorded)."""
        if step < self._drop_before:
            self.num_dropped_steps += 1
            return True
        if not self.lossless:
            self._start_gap(step)
            return True
        self.wait()
        return False

    def record_checkpoint(
        self,
        checkpoint: SchedulerCheckpoint | Callable[[], SchedulerCheckpoint],
        take_ns: int,
        *,
        opens_segment: bool = False,
    ) -> None:
        """A checkpoint, or a function the builder thread makes it with (from a snapshot
        the engine thread took)."""
        if self.dropping:
            return

        def record() -> None:
            made = checkpoint if isinstance(checkpoint, SchedulerCheckpoint) else checkpoint()
            self.recorder.record_checkpoint(made, take_ns, opens_segment=opens_segment)

        self._submit(record)

    def open_segment_at(self, step: int) -> None:
        """A new segment at `step` with no checkpoint (a redacted recording's)."""
        self._submit(lambda: self.recorder.open_segment_at(step))

    @property
    def wants_checkpoint(self) -> bool:
        """In a gap, with the builder caught up: the next step's checkpoint resumes recording."""
        return self.dropping and self._steps_handed_over == self._steps_built

    def resume_at(self, step: int) -> None:
        """Recording resumes at `step`, whose checkpoint (opening a segment) is being taken:
        calls from here on belong to it or later steps; steps before it are still dropped."""
        self.dropping = False
        self._drop_before = step
        logger.warning(
            "stepscope: the recorder caught up; recording resumes at step %d "
            "(%d steps dropped so far)",
            step,
            self.num_dropped_steps,
        )

    def mark(self, *, complete: bool, meta: Mapping[str, str] | None = None) -> None:
        self._submit(lambda: self.recorder.mark(complete=complete, meta=meta))
        self._hand_over()

    def close(self, *, complete: bool, final_meta: Mapping[str, str] | None = None) -> None:
        """Build what is queued, then close the trace (marked incomplete after a failure).

        A builder failure the engine thread has not been told of yet is logged here, not
        raised: a closing engine must not fail for its recording. Ctrl-C or a stop
        signal waits until the file is closed.
        """
        if isinstance(self._error, RecorderStalled):
            logger.error("stepscope: %s; the recording stops here", self._error)
            return  # the builder is stuck: joining it would stop the engine too
        with signals_held():
            if self._thread.is_alive():
                self._hand_over()
                self._calls.put(_STOP)
                self._thread.join()
            if self._error is not None and not self._reported:
                self._reported = True
                logger.error("stepscope: building the trace's rows failed: %s", self._error)
            final = {**(final_meta or {}), "dropped_steps": str(self.num_dropped_steps)}
            self.recorder.close(complete=complete and self._error is None, final_meta=final)

    def _start_gap(self, step: int) -> None:
        """The builder is `BACKLOG_STEPS` behind: drop steps from `step` on."""
        self.dropping = True
        self._drop_before = math.inf
        self.num_dropped_steps += 1
        self._submit(lambda: self.recorder.gap_starts(step))
        logger.warning(
            "stepscope: the recorder fell %d steps behind; dropping steps from step %d "
            "until it catches up (the engine is not slowed)",
            self.backlog_steps,
            step,
        )

    def _schedule_call(
        self, start: ScheduleStart, end: ScheduleEnd, decisions: list[Decision]
    ) -> None:
        self.recorder.on_schedule_start(start)
        self.recorder.decisions = decisions
        self.recorder.on_schedule_end(end)

    def _build_step(
        self, make_record: Callable[[], StepRecord], counts: tuple[int, int, int], ended_at_ns: int
    ) -> None:
        try:
            self.recorder.record_step(make_record(), QueueCounts(*counts), ended_at_ns)
        finally:
            self._steps_built += 1
        time.sleep(0)  # the GIL to the engine thread, if it waits for it

    def _submit(self, call: _Call) -> None:
        """Queue `call` for the builder; it is handed over with the step's (or sooner, when
        many are held)."""
        if self._error is not None:
            self._raise_if_failed()
        held = self._held
        held.append(call)
        if len(held) >= MAX_HELD_CALLS:
            self._hand_over()

    def _hand_over(self) -> None:
        """Hand the calls held so far to the builder, waking it once."""
        held = self._held
        self._steps_held = 0
        self._hand_over_by = time.monotonic_ns() + HAND_OVER_WAIT_NS
        if not held:
            return
        if self._calls_handed_over - self._calls_taken >= MAX_QUEUED_CALLS:
            self._error = RecorderStalled(
                f"the recorder's builder took none of {MAX_QUEUED_CALLS} queued calls"
            )
            self._raise_if_failed()
        self._held = []
        self._calls_handed_over += len(held)
        self._calls.put(held)

    def wait(self) -> None:
        """Block until the builder has done what is queued (for tests and benchmarks)."""
        self._caught_up.clear()
        self._held.append(self._caught_up.set)
        self._hand_over()
        self._caught_up.wait()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        """Raise the builder's failure on the engine thread (once; its caller reports it)."""
        if self._error is not None and not self._reported:
            self._reported = True
            raise self._error

    def _run(self) -> None:
        while True:
            try:
                calls = self._calls.get(timeout=SEGMENT_FLUSH_INTERVAL_S)
            except queue.Empty:
                # A quiet engine: the open segment's steps are flushed once they have waited.
                if not self._build([self.recorder.flush_if_stale]):
                    return
                continue
            if calls is _STOP:
                return
            built = self._build(calls)
            self._calls_taken += len(calls)
            if not built:
                return

    def _build(self, calls: _Batch) -> bool:
        """Run `calls`; on a failure, keep it for the engine thread and take every call
        from here on without building (returns False once the recording is over)."""
        try:
            for call in calls:
                call()
        except BaseException as error:
            self._error = error
            self._discard_rest()
            return False
        return True

    def _discard_rest(self) -> None:
        """After a failure, take calls without building, so the engine thread never waits."""
        self._caught_up.set()
        while True:
            calls = self._calls.get()
            if calls is _STOP:
                return
            self._calls_taken += len(calls)
            if self._caught_up.set in calls:
                self._caught_up.set()
