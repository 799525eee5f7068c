"""vLLM's real scheduler and a scripted model in the engine's own step loop.

`StepLoop` and `EngineCore` are the code that steps the engine (arrivals,
rejections, aborts before the schedule and before the update, the batch queue
under async scheduling, idle steps, finishes); here they step vLLM's scheduler.
The adapters present vLLM's objects through the interface the loop uses, and
translate only where vLLM differs, each saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stepscope.engine import EngineCoreOutput, RequestStatus, TapeModelRunner, Workload
from stepscope.engine.core import EngineCore, EngineStep
from stepscope.engine.engine_loop import StepLoop
from stepscope.engine.outputs import DraftTokenIds
from stepscope.engine.tape_drafter import TapeDrafter
from stepscope.engine.workload import RequestSpec

from ..attach import convert
from ..attach.session import VllmRecording
from . import grammar
from .scripted_drafts import VllmDraftingTapeRunner
from .scripted_model import VllmTapeRunner
from .vllm_request import make_request


@dataclass(frozen=True)
class DriverRun:
    num_steps: int
    complete: bool
    num_padded_tokens: int


class VllmScheduler:
    """vLLM's scheduler as `EngineCore` calls it (`SchedulerInterface`).

    Every call goes through the scheduler instance, so a recording attached to
    it (which wraps the instance's methods) sees each one.
    """

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def add_request(self, request: Any) -> None:
        self.scheduler.add_request(request)

    def finish_requests(self, request_ids: str, finished_status: RequestStatus) -> list[Any]:
        """vLLM's call with vLLM's own status enum (the same names)."""
        from vllm.v1.request import RequestStatus as VllmRequestStatus

        finished: list[Any] = self.scheduler.finish_requests(
            request_ids, VllmRequestStatus[finished_status.name]
        )
        return finished

    def has_requests(self) -> bool:
        return bool(self.scheduler.has_requests())

    def schedule_and_explain(self) -> tuple[Any, None]:
        """vLLM's `schedule()` does not say why its passes stopped (a recording infers it)."""
        return self.scheduler.schedule(), None

    def update_from_output(
        self, scheduler_output: Any, model_runner_output: Any
    ) -> tuple[EngineCoreOutput, ...]:
        """vLLM returns its outputs per client; the loop reads the finishes among them."""
        outputs = self.scheduler.update_from_output(scheduler_output, model_runner_output)
        return convert.finished_outputs(outputs)

    def get_num_free_blocks(self) -> int:
        return int(self.scheduler.kv_cache_manager.block_pool.get_num_free_blocks())

    def update_draft_token_ids(self, draft_token_ids: DraftTokenIds) -> None:
        """vLLM's call with vLLM's `DraftTokenIds` (lists, which its scheduler keeps)."""
        from vllm.v1.outputs import DraftTokenIds as VllmDraftTokenIds

        self.scheduler.update_draft_token_ids(
            VllmDraftTokenIds(
                req_ids=list(draft_token_ids.req_ids),
                draft_token_ids=[list(tokens) for tokens in draft_token_ids.draft_token_ids],
            )
        )


class VllmEngineCore(EngineCore[VllmScheduler]):
    """`EngineCore` around vLLM's scheduler."""

    def preprocess_add_request(self, spec: RequestSpec) -> Any:
        """vLLM's `Request`, as its input processor and `preprocess_add_request` make it."""
        return make_request(spec, self.request_block_hasher)

    def finish_grammar_compilation(self, request: Any) -> None:
        """vLLM's background compilation done: the request's grammar is set."""
        grammar.finish_compilation(request)

    def _schedule(self) -> EngineStep:
        """As `EngineCore.step`: the grammar bitmask is asked for once the batch is scheduled."""
        batch = super()._schedule()
        self.scheduler.scheduler.get_grammar_bitmask(batch.scheduler_output)
        return batch


class VllmLoop(StepLoop[VllmScheduler]):
    """The step loop around vLLM's scheduler, telling a recording what the scheduler never sees."""

    def __init__(
        self, workload: Workload, core: VllmEngineCore, recording: VllmRecording | None
    ) -> None:
        # No one reads its finishes (a recording has them in its trace, a replay compares
        # steps), and a long run would hold one per request, output tokens and all.
        super().__init__(workload, core, keep_output_tokens=False, keep_finishes=False)
        self.recording = recording

    def _reject(self, spec: RequestSpec) -> bool:
        """vLLM's input processor turns the request away before the scheduler sees it."""
        rejected = super()._reject(spec)
        if rejected and self.recording is not None:
            self.recording.reject(spec)
        return rejected

    def _finish_grammars(self, step: int) -> None:
        """A grammar that finishes compiling makes no scheduler call, so the recording is
        told first: a checkpoint due at this step holds the state before it."""
        if self.recording is not None and self.arrivals.grammars_ready.get(step):
            self.recording.grammars_compiled()
        super()._finish_grammars(step)

    def _idle_step(self, step: int) -> None:
        """An idle step makes no scheduler call, so the recording is told of it."""
        super()._idle_step(step)
        if self.recording is not None:
            self.recording.idle_step()


def _tape_runner(workload: Workload, scheduler: Any, drafter: TapeDrafter | None) -> VllmTapeRunner:
    """The scripted model; with speculative decoding on, one that drafts and verifies.

    The drafter is the workload's draft scripts, as the engine's tape model has them,
    unless one is given (a replay's: the recording's verdicts).
    """
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    if workload.config.num_speculative_tokens == 0:
        return VllmTapeRunner(scheduler, tapes)
    drafter = drafter or TapeModelRunner.for_workload(workload).drafter
    assert drafter is not None
    return VllmDraftingTapeRunner(
        scheduler, tapes, drafter, async_scheduling=workload.config.async_scheduling
    )


def run_scripted(
    workload: Workload,
    scheduler: Any,
    block_hasher: Any,
    recording: VllmRecording | None = None,
    drafter: TapeDrafter | None = None,
) -> DriverRun:
    """Step vLLM's `scheduler` through the workload with its scripted outputs."""
    runner = _tape_runner(workload, scheduler, drafter)
    core = VllmEngineCore(VllmScheduler(scheduler), runner, block_hasher)
    loop = VllmLoop(workload, core, recording)
    for _ in loop.run():
        pass
    return DriverRun(loop.num_steps, loop.complete, runner.num_padded_tokens)
