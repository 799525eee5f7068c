"""The recording's view of vLLM's engine iterations: batches, iterations, queues."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stepscope.engine import SchedulerOutput
from stepscope.engine.outputs import DraftTokenIds, EngineCoreOutput
from stepscope.engine.probe import ScheduleEnd
from stepscope.engine.scheduler_output import GroupBlockIds


@dataclass(slots=True)
class Batch:
    """One `schedule()` call's output, waiting for its update.

    The engine thread fills in what vLLM handed it and the counts it read; the builder
    thread converts vLLM's objects (`step_builder.py`) and alone touches `output` and `end`.
    """

    scheduler_output: Any
    """vLLM's object, kept so its identity matches the update it comes back in."""
    spec_tokens: Mapping[str, Sequence[int]]
    """The drafts it scheduled, as `schedule()` returned them (`convert.scheduled_spec_tokens`;
    without speculative decoding, vLLM's own empty map)."""
    block_tables: Mapping[str, GroupBlockIds | None]
    """New and resumed requests' block ids as `schedule()` returned them
    (`convert.handed_block_tables`: the model runner extends vLLM's lists later)."""
    num_free_blocks_after_schedule: int
    schedule_ns: int
    scheduled_at: int
    num_held_blocks_by_group: tuple[int, ...] | None
    """Each KV cache group's held blocks after `schedule()` (None: one group)."""
    end: ScheduleEnd | None = None
    """Why its passes stopped (made by the builder thread)."""
    updated: bool = False
    """Its output has been processed (`update_from_output` returned)."""
    runner_output: Any = None
    """The model's output: vLLM's, or the recording's copy taken before the update trimmed it."""
    outputs: Any = None
    """What `update_from_output` returned (vLLM's), unless `engine_outputs` says it already."""
    engine_outputs: tuple[EngineCoreOutput, ...] | None = None
    model_ns: int = 0
    update_ns: int = 0
    draft_token_ids: DraftTokenIds | None = None
    update_step: int | None = None
    output: SchedulerOutput | None = None
    """The recording's copy of `scheduler_output` (the builder thread's)."""


@dataclass(slots=True)
class Iteration:
    """One engine iteration; the request ids it lists are empty tuples until it has some
    (most iterations have none, and the engine thread makes one every step)."""

    step: int
    arrived: Sequence[str] = ()
    rejected: Sequence[str] = ()
    aborted: Sequence[str] = ()
    aborted_before_update: tuple[str, ...] = ()
    batch: Batch | None = None
    has_update: bool = False
    scheduling: bool = False
    """Its `schedule()` call has begun and not returned (it never will, if the run stops)."""

    @property
    def complete(self) -> bool:
        if self.scheduling:
            return False
        return self.batch is None or self.batch.updated


class QueueState:
    """The recorder's view of vLLM's queues and free blocks: vLLM's own methods, read
    every step."""

    def __init__(self, scheduler: Any) -> None:
        self.get_request_counts: Callable[[], tuple[int, int]] = scheduler.get_request_counts
        self.get_num_free_blocks: Callable[[], int] = (
            scheduler.kv_cache_manager.block_pool.get_num_free_blocks
        )
