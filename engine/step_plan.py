"""What one `schedule()` call has decided so far, and why each of its passes stopped.

vLLM keeps these as locals of `schedule()`; here they are one object that the
named phases share, and that a what-if scheduler can read or change.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from .kv_cache_block import KVCacheBlock
from .kv_cache_manager import RefusalCheck
from .request import Request


class RunningPassEnd(enum.StrEnum):
    """Why the running pass stopped walking the running list."""

    ALL_VISITED = "all_visited"
    BUDGET = "budget"
    SELF_PREEMPTED = "self_preempted"
    """The request could not get blocks even after preempting everyone behind it."""


class AdmissionStop(enum.StrEnum):
    """Why the waiting pass admitted no more requests."""

    NO_WAITING = "no_waiting"
    BUDGET = "budget"
    MAX_NUM_SEQS = "max_num_seqs"
    KV_FULL = "kv_full"
    """The head's tokens for this step do not fit in the free blocks."""
    KV_FULL_SEQUENCE = "kv_full_sequence"
    """The head's whole current sequence does not fit (`scheduler_reserve_full_isl`)."""
    PREEMPTED_THIS_STEP = "preempted_this_step"
    CHUNKING_OFF = "chunking_off"
    """Chunked prefill is off and the head's prompt exceeds the budget left."""
    PREFILL_HELD = "prefill_held"
    """The head has prompt left and this step holds prefill (`prefill_schedule_interval`)."""


REFUSAL_STOP = {
    RefusalCheck.FULL_SEQUENCE: AdmissionStop.KV_FULL_SEQUENCE,
    RefusalCheck.SLOTS: AdmissionStop.KV_FULL,
}
"""The admission stop an `allocate_slots` refusal of the waiting head means."""


@dataclass(slots=True)
class StepPlan:
    """What the current `schedule()` call has decided so far."""

    token_budget: int
    input_budget: int
    long_prefill_token_threshold: int
    draft_slots: int = 0
    """Input slots each scheduled request takes beyond its tokens (the drafter's)."""
    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)
    scheduled_running: list[Request] = field(default_factory=list)
    scheduled_new: list[Request] = field(default_factory=list)
    scheduled_resumed: list[Request] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)
    new_blocks: dict[str, Sequence[KVCacheBlock]] = field(default_factory=dict)
    running_pass_end: RunningPassEnd = RunningPassEnd.ALL_VISITED
    admission_stop: AdmissionStop = AdmissionStop.NO_WAITING
    blocked_request_id: str | None = None
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    scheduled_spec_decode_tokens: dict[str, tuple[int, ...]] = field(default_factory=dict)
    prefill_scheduled: bool = False
    """A running request scheduled this step is still prefilling (no draft padding then)."""
    prefill_admitted: bool = False
    """An admission this step had prompt left to compute (the prefill cadence's stamp)."""
    defer_prefills: bool = False
    """This step holds prefill: running chunks are skipped, admissions with prompt left wait."""

    def take(self, request: Request, num_new_tokens: int, blocks: Sequence[KVCacheBlock]) -> None:
        request_id = request.request_id
        self.new_blocks[request_id] = blocks
        self.num_scheduled_tokens[request_id] = num_new_tokens
        self.token_budget -= num_new_tokens
        self.input_budget -= num_new_tokens + self.draft_slots

    def refund(self, request: Request) -> tuple[int, Sequence[KVCacheBlock]]:
        """Undo this step's scheduling of a preempted request; returns its tokens and blocks."""
        self.scheduled_running.remove(request)
        num_tokens = self.num_scheduled_tokens.pop(request.request_id)
        self.token_budget += num_tokens
        self.input_budget += num_tokens + self.draft_slots
        self.scheduled_spec_decode_tokens.pop(request.request_id, None)
        return num_tokens, self.new_blocks.pop(request.request_id)
