"""One engine step: schedule, run the model, update from its output (vLLM's `EngineCore.step`)."""

from __future__ import annotations

from dataclasses import dataclass

from .config import EngineConfig
from .model_runner import ModelRunner
from .outputs import EngineCoreOutput, ModelRunnerOutput
from .request import Request, RequestStatus
from .scheduler import AdmissionStop, RunningPassEnd, Scheduler
from .scheduler_output import SchedulerOutput


@dataclass(frozen=True, slots=True)
class EngineStep:
    """Everything one non-idle step decided and produced."""

    scheduler_output: SchedulerOutput
    model_runner_output: ModelRunnerOutput
    outputs: tuple[EngineCoreOutput, ...]
    num_free_blocks_after_schedule: int
    running_pass_end: RunningPassEnd
    admission_stop: AdmissionStop


class EngineCore:
    """A scheduler and a model runner, stepped together."""

    def __init__(self, config: EngineConfig, model_runner: ModelRunner) -> None:
        self.config = config
        self.scheduler = Scheduler(config)
        self.model_runner = model_runner

    def add_request(self, request: Request) -> None:
        self.scheduler.add_request(request)

    def abort_request(self, request_id: str) -> list[Request]:
        """Abort one request now; returns it if it was unfinished."""
        return self.scheduler.finish_requests(request_id, RequestStatus.FINISHED_ABORTED)

    def step(self) -> EngineStep | None:
        """Run one step; None (idle) when there is nothing to schedule or ship."""
        scheduler = self.scheduler
        if not scheduler.has_requests():
            return None
        scheduler_output = scheduler.schedule()
        num_free_blocks = scheduler.kv_cache_manager.get_num_free_blocks()
        plan = scheduler.last_plan
        assert plan is not None
        model_runner_output = self.model_runner.execute_model(scheduler_output)
        outputs = scheduler.update_from_output(scheduler_output, model_runner_output)
        return EngineStep(
            scheduler_output=scheduler_output,
            model_runner_output=model_runner_output,
            outputs=tuple(outputs),
            num_free_blocks_after_schedule=num_free_blocks,
            running_pass_end=plan.running_pass_end,
            admission_stop=plan.admission_stop,
        )
