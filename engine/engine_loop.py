"""The step loop around the engine: arrivals, aborts, then one engine step.

For step s = 0, 1, …: add the requests arriving at s (a prompt that is empty or
at least `max_model_len` long is rejected, as vLLM's input processor does), finish
the grammar compilations scripted for s (`grammar_ready_step`), abort
those whose `abort_step` is s, then step the engine (aborts marked
`abort_before_update` land inside it, after the model ran); a step with nothing to
schedule or ship is idle. The loop ends once every request has arrived and the
engine has nothing left, or at `max_steps`.

Under async scheduling a step's output is processed one step later (the batch
queue), so its record comes out then; records still come out in step order, and
a step's finishes belong to the step whose output caused them. `batch_queue_calls`
gives the same steps as vLLM's `step_with_batch_queue` calls instead (what this
call scheduled, and which earlier batch it processed); a request's `finish_step`
is the step of the update that finished it, as vLLM reports it.

`StepLoop` steps any `EngineCore`; `EngineLoop` is it around the engine's own
scheduler, and `stepscope.tracer.vllm.drive.scripted_core` around vLLM's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Generic

from .arrivals import WorkloadArrivals
from .checkpoint import SchedulerCheckpoint
from .core import EngineCore, EngineStep, SchedulerT, make_engine_core
from .gc_heap import frozen_heap
from .model_runner import ModelRunner
from .request import FinishReason, Request
from .restore import restore_core
from .scheduler import Scheduler
from .workload import RequestSpec, Workload

if TYPE_CHECKING:
    from .probe import Probe

REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of the loop; `engine_step` is None when the step was idle.

    The engine's queues are in their after-update state while the record is
    being handled (the loop is a generator), which is when reports read them.
    """

    step: int
    arrived: tuple[str, ...]
    rejected: tuple[str, ...]
    aborted: tuple[str, ...]
    engine_step: EngineStep | None
    update_step: int | None = None
    """The step whose update processed this step's output (this step, when synchronous)."""
    aborted_before_update: tuple[str, ...] = ()
    """Aborted after this step's `schedule()`, before its update (while the model ran)."""


@dataclass(frozen=True, slots=True)
class RequestFinish:
    """How a request ended; `finish_step` is None for a rejected one."""

    finish_step: int | None
    finish_reason: FinishReason | str | None
    output_token_ids: tuple[int, ...]
    num_preemptions: int
    stop_reason: int | str | None = None
    error: str | None = None


def check_prompt_len(num_prompt_tokens: int, max_model_len: int) -> str | None:
    """vLLM's input-processor check; a message when the prompt cannot be served."""
    if 0 < num_prompt_tokens < max_model_len:
        return None
    return (
        f"prompt length {num_prompt_tokens} not in [1, max_model_len-1={max_model_len - 1}]"
        " (input processor rejects it)"
    )


class StepLoop(Generic[SchedulerT]):
    """Drives an `EngineCore` through a workload, one `StepRecord` per step."""

    def __init__(
        self,
        workload: Workload,
        core: EngineCore[SchedulerT],
        *,
        keep_output_tokens: bool = True,
        keep_finishes: bool = True,
    ) -> None:
        self.workload = workload
        self.core = core
        self.keep_output_tokens = keep_output_tokens
        """Whether `finishes` keeps each request's output tokens (the oracle's final line
        needs them; a recording or a table does not, and a long run would hold them all)."""
        self.keep_finishes = keep_finishes
        """Whether `finishes` keeps anything (a recording has each ending in its trace, and
        a long run would hold one per request)."""
        self.unfinished: dict[str, Request] = {}
        """Arrived requests that have not finished; a finished one's ending is in `finishes`
        (only that is kept, so a long run holds no finished request's tokens or blocks)."""
        self.finishes: dict[str, RequestFinish] = {}
        self.request_index = {spec.request_id: i for i, spec in enumerate(workload.requests)}
        self.num_steps = 0
        """Steps taken so far, idle ones included."""
        self.arrivals = WorkloadArrivals(workload)
        self.start_step = 0
        """The first step to take: 0, or the step of the checkpoint it was resumed from."""
        self.batch_steps: deque[int] = deque()
        """Async scheduling: the step of each batch in the engine's queue, oldest first."""
        self.on_step_start: Callable[[int], object] | None = None
        """Called at the start of each step, before its arrivals (where checkpoints are taken)."""

    def resume(self, checkpoint: SchedulerCheckpoint) -> None:
        """Start at the checkpoint's step, in its state, instead of at step 0 (a fresh loop)."""
        assert self.num_steps == 0 and not self.unfinished, "resume a loop before it runs"
        self.unfinished = restore_core(self.core, checkpoint, self.specs_by_id())
        self.start_step = self.num_steps = checkpoint.step
        self.arrivals.skip_before(checkpoint.step)
        if checkpoint.pending_batch is not None:
            self.batch_steps.append(checkpoint.pending_batch.step)

    def specs_by_id(self) -> dict[str, RequestSpec]:
        return {spec.request_id: spec for spec in self.workload.requests}

    @property
    def complete(self) -> bool:
        """Every request has arrived and the engine has nothing left."""
        return self.all_arrived() and not self.core.has_work()

    def all_arrived(self) -> bool:
        return self.arrivals.all_arrived()

    def run(self) -> Generator[StepRecord]:
        """The steps, with the heap as it is at the first step frozen (`gc_heap`) until
        they end or the generator is closed."""
        if self.workload.config.async_scheduling:
            return _with_frozen_heap(self._run_with_batch_queue())
        return _with_frozen_heap(self._run())

    def _run(self) -> Iterator[StepRecord]:
        on_step_start = self.on_step_start
        for step in range(self.start_step, self.workload.max_steps):
            if on_step_start is not None:
                on_step_start(step)
            arrived, rejected = self._add_arrivals(step)
            self._finish_grammars(step)
            aborted = self._apply_aborts(step, self.arrivals.aborts)
            if not self.core.scheduler.has_requests():
                if self.all_arrived():
                    return
                self._idle_step(step)
                yield StepRecord(step, arrived, rejected, aborted, None)
                continue
            aborted_late: list[str] = []
            engine_step = self.core.step(partial(self._abort_late, step, aborted_late))
            assert engine_step is not None
            self.num_steps = step + 1
            self._record_finishes(step, engine_step)
            yield StepRecord(
                step, arrived, rejected, aborted, engine_step, step, tuple(aborted_late)
            )
            if self.all_arrived() and not self.core.scheduler.has_requests():
                return

    def _run_with_batch_queue(self) -> Iterator[StepRecord]:
        waiting_records: deque[_PendingRecord] = deque()
        for call in self.batch_queue_calls():
            waiting_records.append(_PendingRecord(call))
            if call.processed is not None:
                pending = next(
                    (r for r in waiting_records if r.call.scheduled is call.processed), None
                )
                if pending is not None:  # else a batch restored with the loop: no record
                    pending.update_step = call.step
            yield from _complete_records(waiting_records)

    def batch_queue_calls(self) -> Iterator[BatchQueueCall]:
        """The steps under async scheduling as vLLM takes them: one `step_with_batch_queue`
        call each (or an idle step), yielded right after the call."""
        batch_steps = self.batch_steps
        on_step_start = self.on_step_start
        for step in range(self.start_step, self.workload.max_steps):
            if on_step_start is not None:
                on_step_start(step)
            arrived, rejected = self._add_arrivals(step)
            self._finish_grammars(step)
            aborted = self._apply_aborts(step, self.arrivals.aborts)
            if not self.core.has_work():
                if self.all_arrived():
                    return
                self._idle_step(step)
                yield BatchQueueCall(step, arrived, rejected, aborted)
                continue
            aborted_late: list[str] = []
            result = self.core.step_with_batch_queue(partial(self._abort_late, step, aborted_late))
            self.num_steps = step + 1
            if result.scheduled is not None:
                batch_steps.append(step)
            update_step = None
            if result.processed is not None:
                update_step = batch_steps.popleft()
                self._record_finishes(step, result.processed)
            yield BatchQueueCall(
                step,
                arrived,
                rejected,
                aborted,
                result.scheduled,
                result.processed,
                update_step,
                tuple(aborted_late),
            )
            if self.all_arrived() and not self.core.has_work():
                return

    def _idle_step(self, step: int) -> None:
        """A step with nothing to schedule or ship while arrivals are still to come."""
        self.num_steps = step + 1

    def _add_arrivals(self, step: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        arrived: list[str] = []
        rejected: list[str] = []
        for spec in self.arrivals.due(step):
            if self._reject(spec):
                rejected.append(spec.request_id)
                continue
            request = self.core.preprocess_add_request(spec)
            self.core.add_request(request)
            self.unfinished[spec.request_id] = request
            arrived.append(spec.request_id)
        return tuple(arrived), tuple(rejected)

    def _finish_grammars(self, step: int) -> None:
        """Grammars that finish compiling now, before this step's `schedule()` looks at them."""
        for request_id in self.arrivals.grammars_ready.get(step, ()):
            request = self.unfinished.get(request_id)
            if request is not None:
                self.core.finish_grammar_compilation(request)

    def _reject(self, spec: RequestSpec) -> bool:
        """Whether the input processor turns `spec` away (then it is finished as rejected)."""
        error = check_prompt_len(len(spec.prompt_token_ids), self.workload.config.max_model_len)
        if error is None:
            return False
        if self.keep_finishes:
            self.finishes[spec.request_id] = RequestFinish(None, REJECTED, (), 0, error=error)
        return True

    def _abort_late(self, step: int, aborted: list[str]) -> None:
        """The aborts that land while the model runs, before the update."""
        aborted.extend(self._apply_aborts(step, self.arrivals.aborts_before_update))

    def _apply_aborts(self, step: int, aborts: dict[int, list[str]]) -> tuple[str, ...]:
        aborted: list[str] = []
        for request_id in aborts.get(step, ()):
            if request_id not in self.unfinished:
                continue
            for request in self.core.abort_request(request_id):
                aborted.append(request.request_id)
                del self.unfinished[request.request_id]
                if self.keep_finishes:
                    self.finishes[request.request_id] = self._finish_of(
                        request, step, FinishReason.ABORT
                    )
        return tuple(aborted)

    def _finish_of(
        self, request: Request, step: int | None, reason: FinishReason | None
    ) -> RequestFinish:
        return RequestFinish(
            finish_step=step,
            finish_reason=reason,
            output_token_ids=tuple(request.output_token_ids) if self.keep_output_tokens else (),
            num_preemptions=request.num_preemptions,
            stop_reason=request.stop_reason,
        )

    def _record_finishes(self, step: int, engine_step: EngineStep) -> None:
        for output in engine_step.outputs:
            if output.finish_reason is not None:
                request = self.unfinished.pop(output.request_id)
                if self.keep_finishes:
                    self.finishes[output.request_id] = self._finish_of(
                        request, step, output.finish_reason
                    )

    def final(self) -> dict[str, RequestFinish]:
        """Every workload request's ending, in workload order (unfinished: reason None)."""
        assert self.keep_finishes, "this loop was told to keep no finishes"
        final = {}
        for spec in self.workload.requests:
            finish = self.finishes.get(spec.request_id)
            if finish is None:
                request = self.unfinished.get(spec.request_id)
                finish = (
                    self._finish_of(request, None, None)
                    if request is not None
                    else RequestFinish(None, None, (), 0)
                )
            final[spec.request_id] = finish
        return final


@dataclass(frozen=True, slots=True)
class BatchQueueCall:
    """One step under async scheduling: a `step_with_batch_queue` call, or an idle step.

    `scheduled` is the batch this call's `schedule()` made (None: the scheduler had no
    requests, so the call only drained the queue); `processed` the batch whose output
    this call's update processed, scheduled at `update_step`. Both None: an idle step.
    The engine's queues are in their after-update state while the call is handled.
    """

    step: int
    arrived: tuple[str, ...]
    rejected: tuple[str, ...]
    aborted: tuple[str, ...]
    scheduled: EngineStep | None = None
    processed: EngineStep | None = None
    update_step: int | None = None
    aborted_before_update: tuple[str, ...] = ()
    """Aborted after this call's `schedule()`, before its update."""

    @property
    def idle(self) -> bool:
        return self.scheduled is None and self.processed is None


@dataclass(slots=True)
class _PendingRecord:
    """A step whose record waits for its batch's output (async scheduling)."""

    call: BatchQueueCall
    update_step: int | None = None
    """Set once the batch's output has been processed."""

    @property
    def complete(self) -> bool:
        return self.call.scheduled is None or self.update_step is not None

    def record(self) -> StepRecord:
        call = self.call
        return StepRecord(
            call.step,
            call.arrived,
            call.rejected,
            call.aborted,
            call.scheduled,
            self.update_step,
            call.aborted_before_update,
        )


def _complete_records(records: deque[_PendingRecord]) -> Iterator[StepRecord]:
    """The oldest records whose output has been processed, in step order."""
    while records and records[0].complete:
        yield records.popleft().record()


def _with_frozen_heap(records: Iterator[StepRecord]) -> Generator[StepRecord]:
    with frozen_heap():
        yield from records


class EngineLoop(StepLoop[Scheduler]):
    """The engine's own scheduler (or `scheduler_cls`) stepped through a workload."""

    def __init__(
        self,
        workload: Workload,
        model_runner: ModelRunner,
        probe: Probe | None = None,
        scheduler_cls: type[Scheduler] | None = None,
        *,
        keep_output_tokens: bool = True,
        keep_finishes: bool = True,
    ) -> None:
        core = make_engine_core(workload.config, model_runner, probe, scheduler_cls)
        super().__init__(
            workload, core, keep_output_tokens=keep_output_tokens, keep_finishes=keep_finishes
        )
