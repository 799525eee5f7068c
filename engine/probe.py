"""What the scheduler hands a probe at its decision points.

With tracing off the scheduler holds no probe and pays one `is None` branch per
decision point. Records are snapshots taken at decision time (ids, counts,
tuples), never references to engine objects that change later.

The common decision, a running request granted its slots, is recorded as just
its request id (a `RunningGrant` made once per request): its tokens and new
blocks are in the step's SchedulerOutput and the free-block count follows from
them, so the recorder rebuilds the full allocation row from there. Everything
rarer gets a full record.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from .kv_cache_manager import AllocationRefusal
from .request import RunningGrant
from .step_plan import AdmissionStop, RunningPassEnd


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
class RefusedRunningCall:
    """A running request's `allocate_slots` call that did not fit (a preemption follows)."""

    request_id: str
    num_new_tokens: int
    refusal: AllocationRefusal


@dataclass(frozen=True, slots=True)
class AdmissionCall:
    """A waiting request's `allocate_slots` call, granted or not."""

    request_id: str
    num_new_tokens: int
    num_new_computed_tokens: int
    full_sequence_check: bool
    watermark_blocks: int
    num_free_blocks_before: int
    num_free_blocks_after: int
    block_ids: tuple[int, ...]
    refusal: AllocationRefusal | None


@dataclass(frozen=True, slots=True)
class Preemption:
    """A running request evicted so that `needed_by` could get blocks.

    A victim already scheduled this step is refunded: its tokens go back to the
    budget and the grant of `refunded_block_ids` is dropped from the output.
    """

    request_id: str
    needed_by: str
    policy: str
    num_computed_tokens_discarded: int
    num_blocks_freed: int
    num_tokens_refunded: int
    refunded_block_ids: tuple[int, ...]
    num_preemptions: int
    num_free_blocks_before: int
    num_free_blocks_after: int


class WaitingSkipReason(enum.StrEnum):
    """Why the waiting pass passed a request over, in vLLM's words."""

    GRAMMAR_NOT_READY = "grammar_not_ready"
    """Its structured-output grammar is still compiling."""
    STALE_OUTPUT = "stale_output"
    """Preempted while a step's output for it was in flight (async scheduling): a resume
    now could resample a position that output will deliver."""
    MAX_LORAS = "max_loras"
    """Its adapter would be one more than `max_loras` running at once."""
    WAITING_FOR_REMOTE_KVS = "waiting_for_remote_kvs"
    """Its KV cache is still arriving through a KV connector (recorded vLLM only)."""
    WAITING_FOR_STREAMING_REQ = "waiting_for_streaming_req"
    """A streaming-input session waiting for its next chunk (recorded vLLM only)."""
    CANNOT_SCHEDULE = "cannot_schedule"
    """Requeued for a cause vLLM does not show: no tokens left after the prefill lookahead
    (multi-module MTP), or a KV connector or encoder transfer not yet settled (recorded
    vLLM only)."""


@dataclass(frozen=True, slots=True)
class WaitingSkip:
    """A waiting request passed over this step, put back at the head after the pass."""

    request_id: str
    reason: WaitingSkipReason


@dataclass(frozen=True, slots=True)
class ScheduleEnd:
    """Why both passes stopped, and the admissions' prefix-cache lookups."""

    running_pass_end: RunningPassEnd
    admission_stop: AdmissionStop
    blocked_request_id: str | None
    prefix_cache_queries: int
    prefix_cache_hits: int


Decision: TypeAlias = "RunningGrant | RefusedRunningCall | AdmissionCall | Preemption | WaitingSkip"
"""One allocation call, preemption or waiting-queue skip, in call order."""


@dataclass(frozen=True, slots=True)
class ScheduleCall:
    """Everything one `schedule()` call told the probe, kept until its step is recorded."""

    start: ScheduleStart
    decisions: list[Decision]
    end: ScheduleEnd


class QueueState(Protocol):
    """What the recorder reads from a scheduler after a step's update."""

    def get_request_counts(self) -> tuple[int, int]:
        """(running, waiting)."""
        ...

    def get_num_free_blocks(self) -> int: ...


class Probe(Protocol):
    """Receives the scheduler's decisions for the step being scheduled."""

    decisions: list[Decision]
    """Allocation calls and preemptions in call order; the scheduler appends to it."""

    def on_schedule_start(self, record: ScheduleStart) -> None: ...

    def on_schedule_end(self, record: ScheduleEnd) -> None: ...
