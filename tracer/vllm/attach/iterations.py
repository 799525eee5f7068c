"""The recording's view of vLLM's engine iterations: batches, iterations, queues."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stepscope.engine import EngineStep


@dataclass
class Batch:
    """One `schedule()` call's output, waiting for its update."""

    scheduler_output: Any
    """vLLM's object, kept so its identity matches the update it comes back in."""
    output: Any
    num_free_blocks_after_schedule: int
    end: Any
    schedule_ns: int
    scheduled_at: int
    num_held_blocks_by_group: tuple[int, ...] | None
    """Each KV cache group's held blocks after `schedule()` (None: one group)."""
    engine_step: EngineStep | None = None
    update_step: int | None = None


@dataclass
class Iteration:
    step: int
    arrived: list[str]
    rejected: list[str]
    aborted: list[str]
    aborted_before_update: list[str] = field(default_factory=list)
    batch: Batch | None = None
    has_update: bool = False
    scheduling: bool = False
    """Its `schedule()` call has begun and not returned (it never will, if the run stops)."""

    @property
    def complete(self) -> bool:
        if self.scheduling:
            return False
        return self.batch is None or self.batch.engine_step is not None


class QueueState:
    """The recorder's view of vLLM's queues and free blocks."""

    def __init__(self, scheduler: Any) -> None:
        self._scheduler = scheduler
        self._block_pool = scheduler.kv_cache_manager.block_pool

    def get_request_counts(self) -> tuple[int, int]:
        counts: tuple[int, int] = self._scheduler.get_request_counts()
        return counts

    def get_num_free_blocks(self) -> int:
        return int(self._block_pool.get_num_free_blocks())
