"""The waiting pass: admit from the head of the waiting queue until one does not fit.

Nothing is skipped past for lack of room. A request that cannot be scheduled yet
(its grammar still compiling, its stale output in flight, or its adapter over
`max_loras`) is passed over, and the skipped ones go back at the head, in their
order, after the pass.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from .kv_cache_block import KVCacheBlock
from .kv_cache_manager import AllocationRefusal
from .lora import active_loras, exceeds_max_loras
from .probe import AdmissionCall, WaitingSkip, WaitingSkipReason
from .request import Request, RequestStatus
from .scheduler_state import SchedulerState
from .spec_decode import pad_spec_decode
from .step_plan import REFUSAL_STOP, AdmissionStop, StepPlan


class WaitingPass(SchedulerState):
    """`schedule()`'s second pass: admissions (new requests and preempted ones resuming)."""

    def _schedule_waiting(self, plan: StepPlan) -> AdmissionStop:
        """Admit from the head of the queue until one does not fit; put the skipped back."""
        skipped: deque[Request] = deque()
        try:
            return self._admit_waiting(plan, skipped, self._scheduled_loras(plan))
        finally:
            if skipped:
                self.waiting.prepend_requests(skipped)

    def _scheduled_loras(self, plan: StepPlan) -> set[int] | None:
        """The adapters the `max_loras` gate counts (None: LoRA off).

        vLLM 0.33 counts every running request's adapter, scheduled this step or
        not; 0.32 only those of the running requests scheduled this step.
        """
        if self.config.max_loras is None:
            return None
        if self.rules.lora_gate_counts_unscheduled_running:
            return active_loras(request.lora_request for request in self.running)
        return active_loras(request.lora_request for request in plan.scheduled_running)

    def _admit_waiting(
        self, plan: StepPlan, skipped: deque[Request], scheduled_loras: set[int] | None
    ) -> AdmissionStop:
        waiting = self.waiting
        max_num_running_reqs = self.config.max_num_running_reqs
        while plan.token_budget > 0:
            if not waiting:
                return AdmissionStop.NO_WAITING
            if plan.input_budget <= plan.draft_slots:
                return AdmissionStop.BUDGET
            if len(self.running) >= max_num_running_reqs:
                return AdmissionStop.MAX_NUM_SEQS
            request = waiting.peek_request()
            reason = self._skip_reason(request, scheduled_loras)
            if reason is not None:
                self._skip(request, reason, skipped)
                continue
            stop = self._try_admit(request, plan)
            if isinstance(stop, WaitingSkipReason):
                self._skip(request, stop, skipped)
                continue
            if stop is not None:
                return stop
            if scheduled_loras is not None and request.lora_request is not None:
                scheduled_loras.add(request.lora_request.lora_int_id)
        return AdmissionStop.BUDGET

    def _skip(self, request: Request, reason: WaitingSkipReason, skipped: deque[Request]) -> None:
        """Pass the head over for this step; it stays deferred until admitted."""
        skipped.appendleft(self.waiting.pop_request())
        self.deferred_waiting.add(request.request_id)
        if self.probe is not None:
            self.probe.decisions.append(WaitingSkip(request.request_id, reason))

    def _skip_reason(
        self, request: Request, scheduled_loras: set[int] | None
    ) -> WaitingSkipReason | None:
        """Why the waiting head is passed over this step, checked in vLLM's order; None: try it."""
        if request.status == RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR:
            if not _grammar_ready(request):
                return WaitingSkipReason.GRAMMAR_NOT_READY
            request.status = RequestStatus.WAITING
        if request.num_stale_output_tokens:
            return WaitingSkipReason.STALE_OUTPUT
        if scheduled_loras is not None:
            assert self.config.max_loras is not None
            if exceeds_max_loras(request.lora_request, scheduled_loras, self.config.max_loras):
                return WaitingSkipReason.MAX_LORAS
        return None

    def _try_admit(
        self, request: Request, plan: StepPlan
    ) -> AdmissionStop | WaitingSkipReason | None:
        """Admit the head of the queue, or say why it stops admission or is passed over."""
        hit_blocks, num_computed_tokens = self.kv_cache_manager.get_computed_blocks(request)
        if plan.defer_prefills and num_computed_tokens < request.num_tokens - 1:
            plan.blocked_request_id = request.request_id
            return AdmissionStop.PREFILL_HELD
        request_token_budget = min(plan.token_budget, plan.input_budget - plan.draft_slots)
        num_new_tokens = request.num_tokens - num_computed_tokens
        pad_spec_decode_to = 0
        if num_new_tokens == 1 and self.num_spec_tokens:
            padded = pad_spec_decode(
                num_computed_tokens,
                self.num_spec_tokens,
                self.max_model_len,
                request_token_budget,
                plan,
            )
            if padded is None:
                plan.blocked_request_id = request.request_id
                return AdmissionStop.BUDGET
            num_new_tokens = pad_spec_decode_to = padded
        threshold = plan.long_prefill_token_threshold
        if 0 < threshold < num_new_tokens:
            num_new_tokens = threshold
        if not self.config.enable_chunked_prefill and num_new_tokens > request_token_budget:
            plan.blocked_request_id = request.request_id
            return AdmissionStop.CHUNKING_OFF
        num_new_tokens = min(num_new_tokens, request_token_budget)
        if self.num_prefill_lookahead > 1:
            num_new_tokens = self._reserve_prefill_lookahead(
                request, num_computed_tokens, num_new_tokens
            )
            if num_new_tokens == 0:
                return WaitingSkipReason.CANNOT_SCHEDULE
        result = self._allocate_for_admission(
            request, num_new_tokens, hit_blocks, num_computed_tokens
        )
        if isinstance(result, AllocationRefusal):
            plan.blocked_request_id = request.request_id
            return REFUSAL_STOP[result.check]
        if self.probe is not None:
            plan.prefix_cache_queries += (
                request.num_tokens if self.config.enable_prefix_caching else 0
            )
            plan.prefix_cache_hits += num_computed_tokens
        self._admit(request, num_new_tokens, num_computed_tokens, plan)
        plan.prefill_admitted |= num_computed_tokens < request.num_tokens - 1
        if pad_spec_decode_to > 1 and num_new_tokens == pad_spec_decode_to:
            plan.scheduled_spec_decode_tokens[request.request_id] = (-1,) * self.num_spec_tokens
        return None

    def _allocate_for_admission(
        self, request: Request, num_new_tokens: int, hit_blocks: Any, num_hit_tokens: int
    ) -> Sequence[KVCacheBlock] | AllocationRefusal:
        """`allocate_slots` for the waiting head, adopting its prefix hit (one list of
        blocks, or one per KV cache group)."""
        kv_cache_manager = self.kv_cache_manager
        num_free_blocks = kv_cache_manager.get_num_free_blocks()
        full_sequence_must_fit = self.config.scheduler_reserve_full_isl
        result = kv_cache_manager.allocate_slots(
            request,
            num_new_tokens,
            num_new_computed_tokens=num_hit_tokens,
            new_computed_blocks=hit_blocks,
            num_lookahead_tokens=self.num_lookahead_tokens,
            full_sequence_must_fit=full_sequence_must_fit,
            has_scheduled_reqs=bool(self.running),
        )
        if self.probe is not None:
            self.probe.decisions.append(
                AdmissionCall(
                    request_id=request.request_id,
                    num_new_tokens=num_new_tokens,
                    num_new_computed_tokens=num_hit_tokens,
                    full_sequence_check=full_sequence_must_fit,
                    watermark_blocks=kv_cache_manager.watermark_blocks if self.running else 0,
                    num_free_blocks_before=num_free_blocks,
                    num_free_blocks_after=kv_cache_manager.get_num_free_blocks(),
                    block_ids=_block_ids_granted(result),
                    refusal=result if isinstance(result, AllocationRefusal) else None,
                )
            )
        return result

    def _admit(
        self, request: Request, num_new_tokens: int, num_computed_tokens: int, plan: StepPlan
    ) -> None:
        self.waiting.pop_request()
        if self.deferred_waiting:
            self.deferred_waiting.discard(request.request_id)
        self.running.append(request)
        if request.status == RequestStatus.WAITING:
            plan.scheduled_new.append(request)
        else:
            plan.scheduled_resumed.append(request)
        plan.take(request, num_new_tokens, self.kv_cache_manager.get_blocks(request.request_id))
        request.status = RequestStatus.RUNNING
        request.num_computed_tokens = num_computed_tokens


def _grammar_ready(request: Request) -> bool:
    structured_output_request = request.structured_output_request
    return structured_output_request is not None and structured_output_request.is_grammar_ready


def _block_ids_granted(result: Sequence[KVCacheBlock] | AllocationRefusal) -> tuple[int, ...]:
    """The ids of the blocks an admission's call handed out (none when refused)."""
    if isinstance(result, AllocationRefusal):
        return ()
    return tuple(block.block_id for block in result)
