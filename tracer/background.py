"""A recorder whose rows are built off the engine thread.

A live vLLM engine thread spends its time in `schedule()` and
`update_from_output()`; turning a step into rows is as much work again. Here the
engine thread only hands the step's frozen records, and the queue counts it read
at that moment, to a builder thread that owns the `TraceRecorder`; the builder
runs while the engine thread waits on the model. Calls reach the recorder in the
order they were made, so the trace is the one the recorder would write inline.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from stepscope.engine import StepRecord
from stepscope.engine.checkpoint import SchedulerCheckpoint
from stepscope.engine.probe import Decision, QueueState, ScheduleEnd, ScheduleStart
from stepscope.engine.workload import RequestSpec

from .held_signals import signals_held
from .recorder import TraceRecorder

logger = logging.getLogger("stepscope.tracer")

BACKLOG_CALLS = 4096
"""Calls the builder may fall behind before the engine thread waits for it."""


@dataclass(frozen=True)
class QueueCounts:
    """A `QueueState` read once, on the engine thread, when its step was handed over."""

    num_running: int
    num_waiting: int
    num_free_blocks: int

    @classmethod
    def read(cls, scheduler: QueueState) -> QueueCounts:
        num_running, num_waiting = scheduler.get_request_counts()
        return cls(num_running, num_waiting, scheduler.get_num_free_blocks())

    def get_request_counts(self) -> tuple[int, int]:
        return self.num_running, self.num_waiting

    def get_num_free_blocks(self) -> int:
        return self.num_free_blocks


_Call = Callable[[], None]
_STOP = None


class BackgroundRecorder:
    """The `TraceRecorder` calls a live engine makes, run in order on a builder thread.

    A failure in the builder is raised on the engine thread's next call, so the
    caller's own failure handling stops the recording; the steps built before it
    are kept.
    """

    def __init__(self, recorder: TraceRecorder) -> None:
        self.recorder = recorder
        self.decisions: list[Decision] = []
        """The current `schedule()` call's decisions, appended to on the engine thread."""
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._caught_up = threading.Event()
        self._error: BaseException | None = None
        self._reported = False
        """The engine thread (or the log, at close) has been told of `_error`."""
        self._start: ScheduleStart | None = None
        self._thread = threading.Thread(target=self._run, name="stepscope-row-builder", daemon=True)
        self._thread.start()

    def on_schedule_start(self, record: ScheduleStart) -> None:
        self._start = record

    def on_schedule_end(self, record: ScheduleEnd) -> None:
        start, decisions, self.decisions = self._start, self.decisions, []
        assert start is not None, "on_schedule_start was not called"
        self._submit(lambda: self._schedule_call(start, decisions, record))

    def register_request(self, spec: RequestSpec) -> None:
        self._submit(lambda: self.recorder.register_request(spec))

    def record_step(self, record: StepRecord, scheduler: QueueState) -> None:
        counts = QueueCounts.read(scheduler)
        ended_at_ns = time.time_ns()
        self._submit(lambda: self.recorder.record_step(record, counts, ended_at_ns))

    def record_checkpoint(
        self, checkpoint: Callable[[], SchedulerCheckpoint], take_ns: int
    ) -> None:
        """A checkpoint the builder thread makes (from a snapshot the engine thread took)."""
        self._submit(lambda: self.recorder.record_checkpoint(checkpoint(), take_ns))

    def mark(self, *, complete: bool, meta: Mapping[str, str] | None = None) -> None:
        self._submit(lambda: self.recorder.mark(complete=complete, meta=meta))

    def close(self, *, complete: bool, final_meta: Mapping[str, str] | None = None) -> None:
        """Build what is queued, then close the trace (marked incomplete after a failure).

        A builder failure the engine thread has not been told of yet is logged here, not
        raised: a closing engine must not fail for its recording. Ctrl-C or a stop
        signal waits until the file is closed.
        """
        with signals_held():
            if self._thread.is_alive():
                self._calls.put(_STOP)
                self._thread.join()
            if self._error is not None and not self._reported:
                self._reported = True
                logger.error("stepscope: building the trace's rows failed: %s", self._error)
            self.recorder.close(complete=complete and self._error is None, final_meta=final_meta)

    def _schedule_call(
        self, start: ScheduleStart, decisions: list[Decision], end: ScheduleEnd
    ) -> None:
        self.recorder.on_schedule_start(start)
        self.recorder.decisions = decisions
        self.recorder.on_schedule_end(end)

    def _submit(self, call: _Call) -> None:
        self._raise_if_failed()
        calls = self._calls
        calls.put(call)
        if calls.qsize() > BACKLOG_CALLS:
            self._wait_for_builder()

    def _wait_for_builder(self) -> None:
        """Back-pressure: the engine thread waits until the builder has done what is queued."""
        self._caught_up.clear()
        self._calls.put(self._caught_up.set)
        self._caught_up.wait()
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        """Raise the builder's failure on the engine thread (once; its caller reports it)."""
        if self._error is not None and not self._reported:
            self._reported = True
            raise self._error

    def _run(self) -> None:
        while (call := self._calls.get()) is not _STOP:
            try:
                call()
            except BaseException as error:
                self._error = error
                self._discard_rest()
                return

    def _discard_rest(self) -> None:
        """After a failure, take calls without building, so the engine thread never waits."""
        self._caught_up.set()
        while (call := self._calls.get()) is not _STOP:
            if call == self._caught_up.set:
                call()
