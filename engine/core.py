"""One engine step: schedule, run the model, update from its output (vLLM's `EngineCore`).

Synchronous scheduling is `EngineCore.step`: each step's output is processed
before the next step is scheduled. Async scheduling is `step_with_batch_queue`
with a queue of two batches: a step is scheduled (and its model run started)
before the previous step's output is processed, which is what lets the GPU run
one step while the CPU schedules the next.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .async_scheduler import AsyncScheduler
from .config import EngineConfig
from .model_runner import ModelRunner
from .outputs import EngineCoreOutput, ModelRunnerOutput
from .request import Request, RequestStatus
from .scheduler import AdmissionStop, RunningPassEnd, Scheduler
from .scheduler_output import SchedulerOutput

if TYPE_CHECKING:
    from .probe import Probe


BATCH_QUEUE_SIZE = 2
"""vLLM's `max_concurrent_batches` under async scheduling without pipeline parallelism."""


@dataclass(frozen=True, slots=True)
class EngineStep:
    """Everything one non-idle step decided and produced."""

    scheduler_output: SchedulerOutput
    model_runner_output: ModelRunnerOutput
    outputs: tuple[EngineCoreOutput, ...]
    num_free_blocks_after_schedule: int
    running_pass_end: RunningPassEnd
    admission_stop: AdmissionStop
    schedule_ns: int
    """Wall time of `schedule()` (timings are observed, never used in a decision)."""
    model_ns: int
    update_ns: int


@dataclass(frozen=True, slots=True)
class ScheduledBatch:
    """A scheduled step whose model has run and whose output is not processed yet."""

    scheduler_output: SchedulerOutput
    model_runner_output: ModelRunnerOutput
    num_free_blocks_after_schedule: int
    running_pass_end: RunningPassEnd
    admission_stop: AdmissionStop
    schedule_ns: int
    model_ns: int

    def processed(self, outputs: list[EngineCoreOutput], update_ns: int) -> EngineStep:
        return EngineStep(
            scheduler_output=self.scheduler_output,
            model_runner_output=self.model_runner_output,
            outputs=tuple(outputs),
            num_free_blocks_after_schedule=self.num_free_blocks_after_schedule,
            running_pass_end=self.running_pass_end,
            admission_stop=self.admission_stop,
            schedule_ns=self.schedule_ns,
            model_ns=self.model_ns,
            update_ns=update_ns,
        )


@dataclass(frozen=True, slots=True)
class BatchQueueStep:
    """One call of `step_with_batch_queue`: what it scheduled and what it processed."""

    scheduled: ScheduledBatch | None
    processed_batch: ScheduledBatch | None
    processed: EngineStep | None


def default_scheduler_cls(config: EngineConfig) -> type[Scheduler]:
    """What vLLM's `get_scheduler_cls()` picks when no class is given."""
    return AsyncScheduler if config.async_scheduling else Scheduler


class EngineCore:
    """A scheduler and a model runner, stepped together."""

    def __init__(
        self,
        config: EngineConfig,
        model_runner: ModelRunner,
        probe: Probe | None = None,
        scheduler_cls: type[Scheduler] | None = None,
    ) -> None:
        self.config = config
        self.scheduler = (scheduler_cls or default_scheduler_cls(config))(config, probe)
        self.model_runner = model_runner
        self.batch_queue: deque[ScheduledBatch] = deque()

    def add_request(self, request: Request) -> None:
        self.scheduler.add_request(request)

    def abort_request(self, request_id: str) -> list[Request]:
        """Abort one request now; returns it if it was unfinished."""
        return self.scheduler.finish_requests(request_id, RequestStatus.FINISHED_ABORTED)

    def has_work(self) -> bool:
        """Anything to schedule or ship, or a batch whose output is still to process."""
        return self.scheduler.has_requests() or bool(self.batch_queue)

    def step(self, before_update: Callable[[], object] | None = None) -> EngineStep | None:
        """Run one step; None (idle) when there is nothing to schedule or ship.

        `before_update` runs once the model has run, before the update: where
        vLLM applies the aborts that arrived meanwhile (`_process_aborts_queue`).
        """
        if not self.scheduler.has_requests():
            return None
        batch = self._schedule()
        return self._update(batch, before_update)

    def step_with_batch_queue(
        self, before_update: Callable[[], object] | None = None
    ) -> BatchQueueStep:
        """Schedule a batch unless the queue is full; process the oldest once it is full.

        As vLLM's: a batch is scheduled whenever there is anything to schedule, and
        the call returns right after it while the queue has room and either tokens
        were scheduled or more can be; otherwise the oldest batch's output is
        processed.
        """
        scheduled = None
        if self.scheduler.has_requests():
            scheduled = self._schedule()
            self.batch_queue.appendleft(scheduled)
            executed = scheduled.scheduler_output.total_num_scheduled_tokens > 0
            if len(self.batch_queue) < BATCH_QUEUE_SIZE and (
                executed or self.scheduler.has_requests()
            ):
                return BatchQueueStep(scheduled, None, None)
        elif not self.batch_queue:
            return BatchQueueStep(None, None, None)
        oldest = self.batch_queue.pop()
        return BatchQueueStep(scheduled, oldest, self._update(oldest, before_update))

    def _schedule(self) -> ScheduledBatch:
        """`schedule()`, then the model run for it."""
        scheduler = self.scheduler
        clock = time.perf_counter_ns
        started = clock()
        scheduler_output = scheduler.schedule()
        scheduled = clock()
        num_free_blocks = scheduler.kv_cache_manager.get_num_free_blocks()
        plan = scheduler.last_plan
        assert plan is not None
        model_runner_output = self.model_runner.execute_model(scheduler_output)
        executed = clock()
        return ScheduledBatch(
            scheduler_output=scheduler_output,
            model_runner_output=model_runner_output,
            num_free_blocks_after_schedule=num_free_blocks,
            running_pass_end=plan.running_pass_end,
            admission_stop=plan.admission_stop,
            schedule_ns=scheduled - started,
            model_ns=executed - scheduled,
        )

    def _update(
        self, batch: ScheduledBatch, before_update: Callable[[], object] | None
    ) -> EngineStep:
        if before_update is not None:
            before_update()
        started = time.perf_counter_ns()
        outputs = self.scheduler.update_from_output(
            batch.scheduler_output, batch.model_runner_output
        )
        return batch.processed(outputs, time.perf_counter_ns() - started)
