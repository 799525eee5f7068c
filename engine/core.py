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
from typing import TYPE_CHECKING, Generic, TypeVar

from .async_scheduler import AsyncScheduler
from .config import EngineConfig
from .model_runner import ModelRunner
from .outputs import DraftTokenIds, EngineCoreOutput, ModelRunnerOutput
from .request import BlockHasher, Request, RequestStatus
from .scheduler import Scheduler
from .scheduler_interface import SchedulerInterface
from .scheduler_output import SchedulerOutput
from .workload import RequestSpec

if TYPE_CHECKING:
    from .probe import Probe, ScheduleEnd


BATCH_QUEUE_SIZE = 2
"""vLLM's `max_concurrent_batches` under async scheduling without pipeline parallelism."""

SchedulerT = TypeVar("SchedulerT", bound=SchedulerInterface)


@dataclass(slots=True)
class EngineStep:
    """Everything one non-idle step decided and produced.

    Scheduled and run, it is a batch in the queue; `outputs` and `update_ns` are
    filled in when its output is processed (one step later under async scheduling).
    """

    scheduler_output: SchedulerOutput
    model_runner_output: ModelRunnerOutput
    num_free_blocks_after_schedule: int
    schedule_end: ScheduleEnd | None
    """Why the scheduler's passes stopped; None where it does not say (vLLM's)."""
    schedule_ns: int
    """Wall time of `schedule()` (timings are observed, never used in a decision)."""
    model_ns: int
    outputs: tuple[EngineCoreOutput, ...] = ()
    update_ns: int = 0
    num_held_blocks_by_group: tuple[int, ...] | None = None
    """Hybrid KV cache groups: the distinct blocks each group's requests hold right after
    `schedule()`, in group order (None: no `kv_cache_groups`; the pool's count says it)."""
    draft_token_ids: DraftTokenIds | None = None
    """What `update_draft_token_ids` got after this step's update (None: nothing)."""


@dataclass(frozen=True, slots=True)
class BatchQueueStep:
    """One call of `step_with_batch_queue`: what it scheduled and what it processed."""

    scheduled: EngineStep | None
    processed: EngineStep | None


def default_scheduler_cls(config: EngineConfig) -> type[Scheduler]:
    """What vLLM's `get_scheduler_cls()` picks when no class is given."""
    return AsyncScheduler if config.async_scheduling else Scheduler


class EngineCore(Generic[SchedulerT]):
    """A scheduler and a model runner, stepped together."""

    def __init__(
        self,
        scheduler: SchedulerT,
        model_runner: ModelRunner,
        request_block_hasher: BlockHasher | None,
    ) -> None:
        self.scheduler = scheduler
        self.model_runner = model_runner
        self.request_block_hasher = request_block_hasher
        self.batch_queue: deque[EngineStep] = deque()
        self._take_draft_token_ids: Callable[[], DraftTokenIds | None] | None = getattr(
            model_runner, "take_draft_token_ids", None
        )
        self._update_draft_token_ids: Callable[[DraftTokenIds], None] | None = getattr(
            scheduler, "update_draft_token_ids", None
        )
        self._get_num_held_blocks_by_group: Callable[[], tuple[int, ...]] | None = getattr(
            scheduler, "get_num_held_blocks_by_group", None
        )

    def preprocess_add_request(self, spec: RequestSpec) -> Request:
        """The scheduler's request for a workload request, its blocks hashed as they fill."""
        return spec.make_request(self.request_block_hasher)

    def add_request(self, request: Request) -> None:
        self.scheduler.add_request(request)

    def finish_grammar_compilation(self, request: Request) -> None:
        """The request's grammar has compiled: the next waiting pass promotes it to WAITING."""
        structured_output_request = request.structured_output_request
        if structured_output_request is not None:
            structured_output_request.is_grammar_ready = True

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
        self._update(batch, before_update)
        self._post_step(batch)
        return batch

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
                return BatchQueueStep(scheduled, None)
        elif not self.batch_queue:
            return BatchQueueStep(None, None)
        oldest = self.batch_queue.pop()
        self._update(oldest, before_update)
        return BatchQueueStep(scheduled, oldest)

    def _schedule(self) -> EngineStep:
        """`schedule()`, then the model run for it."""
        scheduler = self.scheduler
        clock = time.perf_counter_ns
        started = clock()
        scheduler_output, schedule_end = scheduler.schedule_and_explain()
        scheduled = clock()
        num_free_blocks = scheduler.get_num_free_blocks()
        count_held_blocks = self._get_num_held_blocks_by_group
        num_held_blocks = None if count_held_blocks is None else count_held_blocks()
        model_runner_output = self.model_runner.execute_model(scheduler_output)
        executed = clock()
        return EngineStep(
            scheduler_output,
            model_runner_output,
            num_free_blocks,
            schedule_end,
            scheduled - started,
            executed - scheduled,
            num_held_blocks_by_group=num_held_blocks,
        )

    def _update(self, batch: EngineStep, before_update: Callable[[], object] | None) -> None:
        """Process the batch's output; its step gets the outputs and the update's time."""
        if before_update is not None:
            before_update()
        started = time.perf_counter_ns()
        outputs = self.scheduler.update_from_output(
            batch.scheduler_output, batch.model_runner_output
        )
        batch.update_ns = time.perf_counter_ns() - started
        batch.outputs = tuple(outputs)

    def _post_step(self, batch: EngineStep) -> None:
        """vLLM's `post_step` (synchronous scheduling): the runner's drafts go to the scheduler.

        Under async scheduling the worker keeps its drafts and the scheduler ships -1
        placeholders, so `step_with_batch_queue` never calls this.
        """
        take, update = self._take_draft_token_ids, self._update_draft_token_ids
        if take is None or update is None:
            return
        if batch.scheduler_output.total_num_scheduled_tokens == 0:
            return
        draft_token_ids = take()
        if draft_token_ids is not None:
            update(draft_token_ids)
            batch.draft_token_ids = draft_token_ids


def make_engine_core(
    config: EngineConfig,
    model_runner: ModelRunner,
    probe: Probe | None = None,
    scheduler_cls: type[Scheduler] | None = None,
) -> EngineCore[Scheduler]:
    """The engine's scheduler for `config` (or `scheduler_cls`), stepped with `model_runner`."""
    scheduler = (scheduler_cls or default_scheduler_cls(config))(config, probe)
    return EngineCore(scheduler, model_runner, scheduler.block_hasher)
