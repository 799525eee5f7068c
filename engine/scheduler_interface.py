"""What `EngineCore` calls on a scheduler: the part of vLLM's `SchedulerInterface` it uses.

The engine's `Scheduler` implements it, and so does an adapter around vLLM's own
scheduler (`stepscope.tracer.vllm.drive.scripted_core`), so one step loop drives both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from .outputs import EngineCoreOutput, ModelRunnerOutput
from .request import Request, RequestStatus
from .scheduler_output import SchedulerOutput

if TYPE_CHECKING:
    from .probe import ScheduleEnd


class SchedulerInterface(Protocol):
    """A scheduler as `EngineCore` steps it."""

    def add_request(self, request: Request) -> None: ...

    def finish_requests(
        self, request_ids: str, finished_status: RequestStatus
    ) -> list[Request]: ...

    def has_requests(self) -> bool:
        """Anything to schedule, or finished ids still to ship."""
        ...

    def schedule_and_explain(self) -> tuple[SchedulerOutput, ScheduleEnd | None]:
        """`schedule()`, and why its passes stopped (None where the scheduler cannot say)."""
        ...

    def update_from_output(
        self, scheduler_output: SchedulerOutput, model_runner_output: ModelRunnerOutput
    ) -> Sequence[EngineCoreOutput]: ...

    def get_num_free_blocks(self) -> int: ...
