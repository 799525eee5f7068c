"""What the scheduler hands a probe at its decision points.

With tracing off the scheduler holds no probe and pays one `is None` branch per
decision point. Records are snapshots of values taken at decision time: ids,
counts and freshly built lists, never live engine objects that change later.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from stepscope.engine.block_pool import KVCacheBlock
    from stepscope.engine.kv_cache_manager import AllocationRefusal
    from stepscope.engine.scheduler import AdmissionStop, RunningPassEnd


class AllocationPass(enum.StrEnum):
    RUNNING = "running"
    WAITING = "waiting"


AllocationCall: TypeAlias = tuple[
    str, AllocationPass, int, int, bool, int, int, int, "list[KVCacheBlock] | AllocationRefusal"
]
"""One `allocate_slots` call, as a plain tuple because it is recorded per request per step.

Fields: request_id, pass, num_new_tokens, num_new_computed_tokens,
full_sequence_check, watermark_blocks, num_free_blocks_before,
num_free_blocks_after, result (the new blocks, whose ids never change, or the
refusal).
"""


@dataclass(frozen=True, slots=True)
class ScheduleStart:
    """The state `schedule()` starts from."""

    token_budget: int
    input_budget: int
    long_prefill_token_threshold: int
    num_running: int
    num_waiting: int
    num_free_blocks: int


@dataclass(frozen=True, slots=True)
class Preemption:
    """A running request evicted so that `needed_by` could get blocks."""

    request_id: str
    needed_by: str
    policy: str
    num_computed_tokens_discarded: int
    num_blocks_freed: int
    num_tokens_refunded: int
    num_preemptions: int
    num_free_blocks_before: int
    num_free_blocks_after: int


@dataclass(frozen=True, slots=True)
class ScheduleEnd:
    """Why both passes stopped, and the admissions' prefix-cache lookups."""

    running_pass_end: RunningPassEnd
    admission_stop: AdmissionStop
    blocked_request_id: str | None
    prefix_cache_queries: int
    prefix_cache_hits: int


Decision: TypeAlias = "AllocationCall | Preemption"


class Probe(Protocol):
    """Receives the scheduler's decisions for the step being scheduled."""

    decisions: list[Decision]
    """Allocation calls and preemptions in call order; the scheduler appends to it."""

    def on_schedule_start(self, record: ScheduleStart) -> None: ...

    def on_schedule_end(self, record: ScheduleEnd) -> None: ...
