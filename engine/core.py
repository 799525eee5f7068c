"""One engine step: schedule, run the model, update from its output (vLLM's `EngineCore.step`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .config import EngineConfig
from .errors import ConfigError
from .model_runner import ModelRunner
from .outputs import EngineCoreOutput, ModelRunnerOutput
from .request import Request, RequestStatus
from .scheduler import AdmissionStop, RunningPassEnd, Scheduler
from .scheduler_output import SchedulerOutput

if TYPE_CHECKING:
    from stepscope.tracer.probe import Probe


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


class EngineCore:
    """A scheduler and a model runner, stepped together."""

    def __init__(
        self,
        config: EngineConfig,
        model_runner: ModelRunner,
        probe: Probe | None = None,
        scheduler_cls: type[Scheduler] = Scheduler,
    ) -> None:
        if config.async_scheduling:
            raise ConfigError("async_scheduling", "not modelled by this engine yet")
        self.config = config
        self.scheduler = scheduler_cls(config, probe)
        self.model_runner = model_runner

    def add_request(self, request: Request) -> None:
        self.scheduler.add_request(request)

    def abort_request(self, request_id: str) -> list[Request]:
        """Abort one request now; returns it if it was unfinished."""
        return self.scheduler.finish_requests(request_id, RequestStatus.FINISHED_ABORTED)

    def step(self, before_update: Callable[[], object] | None = None) -> EngineStep | None:
        """Run one step; None (idle) when there is nothing to schedule or ship.

        `before_update` runs once the model has run, before the update: where
        vLLM applies the aborts that arrived meanwhile (`_process_aborts_queue`).
        """
        scheduler = self.scheduler
        if not scheduler.has_requests():
            return None
        clock = time.perf_counter_ns
        started = clock()
        scheduler_output = scheduler.schedule()
        scheduled = clock()
        num_free_blocks = scheduler.kv_cache_manager.get_num_free_blocks()
        plan = scheduler.last_plan
        assert plan is not None
        model_runner_output = self.model_runner.execute_model(scheduler_output)
        executed = clock()
        if before_update is not None:
            before_update()
        outputs = scheduler.update_from_output(scheduler_output, model_runner_output)
        updated = clock()
        return EngineStep(
            scheduler_output=scheduler_output,
            model_runner_output=model_runner_output,
            outputs=tuple(outputs),
            num_free_blocks_after_schedule=num_free_blocks,
            running_pass_end=plan.running_pass_end,
            admission_stop=plan.admission_stop,
            schedule_ns=scheduled - started,
            model_ns=executed - scheduled,
            update_ns=updated - executed,
        )
