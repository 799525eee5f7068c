"""The running pass: each running request, in list order, gets its next tokens and blocks.

When the blocks do not fit, a victim is preempted (FCFS: the tail of the running
list; PRIORITY: the largest priority value, then the latest arrival) and its blocks
freed, until the request fits or preempts itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from .config import SchedulingPolicy
from .kv_cache_block import KVCacheBlock
from .kv_cache_manager import AllocationRefusal
from .probe import Preemption, RefusedRunningCall
from .request import Request, RequestStatus
from .scheduler_state import SchedulerState
from .spec_decode import schedule_drafts
from .step_plan import RunningPassEnd, StepPlan

Refund = tuple[int, Sequence[KVCacheBlock]]
"""A victim's tokens and new blocks already scheduled this step, given back."""


class RunningPass(SchedulerState):
    """`schedule()`'s first pass, and preemption."""

    def _schedule_running(self, plan: StepPlan) -> RunningPassEnd:
        """Give each running request its next tokens, preempting when blocks run out."""
        running = self.running
        allocate = self.kv_cache_manager.allocate_running_slots
        num_lookahead_tokens = self.num_lookahead_tokens
        decisions = None if self.probe is None else self.probe.decisions
        draft_slots = plan.draft_slots
        drafting = self.num_spec_tokens > 0
        tracks_prefill = self.prefill_cadence is not None
        defer_prefills = plan.defer_prefills
        reserves_prefill_lookahead = self.num_prefill_lookahead > 1
        req_index = 0
        while req_index < len(running):
            if plan.token_budget <= 0 or plan.input_budget <= draft_slots:
                return RunningPassEnd.BUDGET
            request = running[req_index]
            if defer_prefills and request.is_prefill_chunk:
                req_index += 1
                continue
            num_new_tokens = self._num_new_tokens_running(request, plan)
            if reserves_prefill_lookahead:
                num_new_tokens = self._reserve_prefill_lookahead(
                    request, request.num_computed_tokens, num_new_tokens
                )
            if num_new_tokens <= 0:
                req_index += 1
                continue
            new_blocks = allocate(request, num_new_tokens, num_lookahead_tokens)
            if isinstance(new_blocks, AllocationRefusal):
                granted, req_index = self._allocate_with_preemption(
                    request, num_new_tokens, new_blocks, plan, req_index
                )
                if granted is None:
                    if self._self_preemption_continues():
                        # It was the lowest-priority request and preempted itself; the
                        # list shrank, so req_index already points at the next one.
                        continue
                    return RunningPassEnd.SELF_PREEMPTED
                new_blocks = granted
            elif decisions is not None:
                decisions.append(request.running_grant)
            plan.scheduled_running.append(request)
            plan.take(request, num_new_tokens, new_blocks)
            req_index += 1
            if drafting:
                schedule_drafts(request, num_new_tokens, plan)
            elif tracks_prefill:
                plan.prefill_scheduled |= request.is_prefill_chunk
        return RunningPassEnd.ALL_VISITED

    def _self_preemption_continues(self) -> bool:
        """Whether the running pass goes on after a request preempted itself (priority, 0.33)."""
        return self.policy is SchedulingPolicy.PRIORITY and self.rules.self_preemption_continues

    def _num_new_tokens_running(self, request: Request, plan: StepPlan) -> int:
        """Its tokens not computed yet, capped by the chunk threshold, the budgets and
        `max_model_len`; 0 when the output in flight already reaches `max_tokens`."""
        num_output_placeholders = request.num_output_placeholders
        if num_output_placeholders and _max_tokens_in_flight(request):
            return 0
        num_computed_tokens = request.num_computed_tokens
        num_new_tokens = (
            request.num_tokens
            + len(request.spec_token_ids)
            + num_output_placeholders
            - num_computed_tokens
        )
        threshold = plan.long_prefill_token_threshold
        if 0 < threshold < num_new_tokens:
            num_new_tokens = threshold
        if num_new_tokens > plan.token_budget:
            num_new_tokens = plan.token_budget
        input_room = plan.input_budget - plan.draft_slots
        if num_new_tokens > input_room:
            num_new_tokens = input_room
        # Keep positions plus the token to be sampled within max_model_len (under async
        # scheduling this reaches 0 when the in-flight token takes the last position).
        room = self.max_model_len - num_computed_tokens - 1
        return room if num_new_tokens > room else num_new_tokens

    def _allocate_with_preemption(
        self,
        request: Request,
        num_new_tokens: int,
        refusal: AllocationRefusal,
        plan: StepPlan,
        req_index: int,
    ) -> tuple[Sequence[KVCacheBlock] | None, int]:
        """After `refusal`, preempt victims until it fits; None if `request` preempted itself."""
        probe = self.probe
        while True:
            if probe is not None:
                probe.decisions.append(
                    RefusedRunningCall(request.request_id, num_new_tokens, refusal)
                )
            victim, req_index, refunded = self._pop_victim(plan, req_index)
            self._preempt(victim, request, refunded)
            plan.preempted.append(victim)
            if victim is request:
                return None, req_index
            result = self.kv_cache_manager.allocate_running_slots(
                request, num_new_tokens, self.num_lookahead_tokens
            )
            if not isinstance(result, AllocationRefusal):
                if probe is not None:
                    probe.decisions.append(request.running_grant)
                return result, req_index
            refusal = result

    def _preempt(self, victim: Request, needed_by: Request, refunded: Refund | None) -> None:
        if self.probe is None:
            self._preempt_request(victim)
            return
        kv_cache_manager = self.kv_cache_manager
        num_free_blocks = kv_cache_manager.get_num_free_blocks()
        num_computed_tokens = victim.num_computed_tokens
        num_blocks = len(kv_cache_manager.get_blocks(victim.request_id))
        self._preempt_request(victim)
        num_refunded, refunded_blocks = refunded or (0, ())
        self.probe.decisions.append(
            Preemption(
                request_id=victim.request_id,
                needed_by=needed_by.request_id,
                policy=self.policy.value,
                num_computed_tokens_discarded=num_computed_tokens,
                num_blocks_freed=num_blocks,
                num_tokens_refunded=num_refunded,
                refunded_block_ids=tuple(block.block_id for block in refunded_blocks),
                num_preemptions=victim.num_preemptions,
                num_free_blocks_before=num_free_blocks,
                num_free_blocks_after=kv_cache_manager.get_num_free_blocks(),
            )
        )

    def _pop_victim(self, plan: StepPlan, req_index: int) -> tuple[Request, int, Refund | None]:
        """Remove the victim from `running`; returns it, the shifted cursor and any refund.

        FCFS takes the tail. PRIORITY takes the largest (priority, arrival_time),
        the first in running order among ties; a victim already scheduled this
        step is refunded, and one before the cursor shifts the cursor back.
        """
        if self.policy is not SchedulingPolicy.PRIORITY:
            return self.running.pop(), req_index, None
        victim = max(self.running, key=lambda r: (r.priority, r.arrival_time))
        victim_index = self.running.index(victim)
        del self.running[victim_index]
        if victim_index < req_index:
            req_index -= 1
        refunded = None
        if victim.request_id in plan.num_scheduled_tokens:
            refunded = plan.refund(victim)
        return victim, req_index, refunded

    def _preempt_request(self, request: Request) -> None:
        """Free the request's blocks and put it back in the waiting queue to recompute."""
        assert request.status == RequestStatus.RUNNING, "only running requests are preempted"
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        if request.spec_token_ids:
            request.spec_token_ids = []
        # Output still in flight for it is stale: delivered when it comes back, but it
        # no longer moves the (reset) counters.
        request.num_stale_output_tokens = request.num_in_flight_tokens
        request.num_output_placeholders = 0
        request.num_preemptions += 1
        self.waiting.prepend_request(request)
        self.preempted_req_ids.add(request.request_id)


def _max_tokens_in_flight(request: Request) -> bool:
    """Async: the output in flight certainly reaches `max_tokens`, so another step is waste.

    vLLM's `num_computed_tokens + 2 - num_output_placeholders >= prompt + max_tokens`:
    the placeholders are in the computed count, less the one just sampled.
    """
    return (
        request.num_output_placeholders > 0
        and request.num_computed_tokens + 2 - request.num_output_placeholders
        >= request.num_prompt_tokens + request.max_tokens
    )
