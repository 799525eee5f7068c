"""Scheduler classes for vLLM's `--scheduler-cls` that record into a stepscope trace.

    STEPSCOPE_TRACE=/traces/ vllm serve MODEL \\
        --scheduler-cls stepscope.tracer.vllm.RecordingAsyncScheduler

Pick the class that matches the engine: `RecordingAsyncScheduler` for a stock server
(async scheduling is on by default), `RecordingScheduler` with `--no-async-scheduling`.
A custom class replaces vLLM's default whatever `async_scheduling` says, so the
wrong one silently turns async scheduling off (or breaks it).

Without `STEPSCOPE_TRACE` (or the config key) nothing is wrapped: the classes are
vLLM's own with a constructor that checks one setting.
"""

from __future__ import annotations

import logging
from typing import Any

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

from .start import start_from_settings

logger = logging.getLogger("stepscope.tracer.vllm")


class _RecordsIfAsked:
    """Starts a recording after vLLM's constructor, and closes it at shutdown."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stepscope_recording = start_from_settings(self)

    def shutdown(self) -> None:
        try:
            super().shutdown()  # type: ignore[misc]
        finally:
            if self.stepscope_recording is not None:
                self.stepscope_recording.close()


class RecordingScheduler(_RecordsIfAsked, Scheduler):  # type: ignore[misc]
    """vLLM's synchronous `Scheduler`, recorded when `STEPSCOPE_TRACE` is set."""


class RecordingAsyncScheduler(_RecordsIfAsked, AsyncScheduler):  # type: ignore[misc]
    """vLLM's `AsyncScheduler` (a stock server's), recorded when `STEPSCOPE_TRACE` is set.

    Where the platform turns `async_scheduling` off (vLLM's CPU platform does),
    EngineCore drives it with the synchronous `step()`: each step's placeholders
    are resolved by its own update before the next `schedule()`, so it decides as
    `Scheduler` does, and the trace records a synchronous engine.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.stepscope_recording is not None and not self.scheduler_config.async_scheduling:
            logger.warning(
                "stepscope: async_scheduling is off in this engine, so vLLM runs this "
                "AsyncScheduler in its synchronous step loop; the trace records a "
                "synchronous engine"
            )
