"""The interface every model runner (tape, trace, torch) implements."""

from __future__ import annotations

from typing import Protocol

from .outputs import ModelRunnerOutput
from .scheduler_output import SchedulerOutput


class ModelRunner(Protocol):
    """Runs one step's batch and returns the tokens sampled for it."""

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput: ...
