"""vLLM's V1 scheduler (0.33.0, or 0.32.x's rules) for the single-node subset, in named phases.

There is no prefill phase and no decode phase. Each request has a token list
(prompt + outputs so far) and `num_computed_tokens`; every step `schedule()` gives
each request a number of its not-yet-computed tokens, reserves KV blocks for them
and advances `num_computed_tokens` at once. The running list is served first, in
list order; then, only if nobody was preempted this step, waiting requests are
admitted from the head of the queue until one does not fit.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .block_hash import make_block_hasher
from .block_pool import KVCacheBlock
from .config import EngineConfig, SchedulingPolicy
from .kv_cache_manager import AllocationRefusal, KVCacheManager
from .lora import active_loras, exceeds_max_loras
from .outputs import DraftTokenIds, EngineCoreOutput, ModelRunnerOutput
from .probe import (
    AdmissionCall,
    Preemption,
    RefusedRunningCall,
    ScheduleEnd,
    ScheduleStart,
    WaitingSkip,
)
from .request import Request, RequestStatus
from .request_queue import create_request_queue
from .scheduler_output import (
    NO_SPEC_DECODE_TOKENS,
    CachedRequestData,
    NewRequestData,
    SchedulerOutput,
)
from .spec_decode import num_rejected, pad_spec_decode, roll_back_rejected, schedule_drafts
from .step_plan import REFUSAL_STOP, AdmissionStop, RunningPassEnd, StepPlan
from .stop import check_stop

if TYPE_CHECKING:
    from .probe import Probe

SKIP_GRAMMAR_NOT_READY = "grammar_not_ready"
"""Skipped: structured output whose grammar is still compiling."""
SKIP_STALE_OUTPUT = "stale_output"
"""Skipped: preempted while a step's output for it was in flight (async scheduling)."""
SKIP_MAX_LORAS = "max_loras"
"""Skipped: its adapter would be one more than `max_loras` running at once."""


class Scheduler:
    """Decides, step by step, which tokens of which requests run, exactly as vLLM does.

    Where vLLM versions differ, `config.vllm_version` picks the rules (`VllmRules`).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that overrides vLLM's `schedule()` is stepped through that override.

        The engine calls `schedule_and_explain()`; without this, a what-if scheduler
        written against vLLM's interface would silently never run its `schedule()`.
        """
        super().__init_subclass__(**kwargs)
        if "schedule" in cls.__dict__ and "schedule_and_explain" not in cls.__dict__:
            cls.schedule_and_explain = _schedule_unexplained  # type: ignore[method-assign,assignment]

    def __init__(self, config: EngineConfig, probe: Probe | None = None) -> None:
        self.config = config
        self.probe = probe
        self.policy = config.policy
        self.rules = config.vllm_rules
        self.max_model_len = config.max_model_len
        self.block_size = config.block_size
        self.kv_cache_manager = KVCacheManager(
            num_blocks=config.num_blocks,
            block_size=config.block_size,
            max_model_len=config.max_model_len,
            enable_caching=config.enable_prefix_caching,
            watermark_blocks=config.watermark_blocks,
        )
        self.block_hasher = (
            make_block_hasher(config.block_size) if config.enable_prefix_caching else None
        )
        self.requests: dict[str, Request] = {}
        self.waiting = create_request_queue(config.policy)
        self.running: list[Request] = []
        self.finished_req_ids: set[str] = set()
        self.preempted_req_ids: set[str] = set()
        self.prev_step_scheduled_req_ids: set[str] = set()
        self.num_spec_tokens = config.num_speculative_tokens
        self.num_lookahead_tokens = config.num_lookahead_tokens
        self.draft_slots = config.max_num_new_slots_for_drafting
        """Input slots each scheduled request takes for drafting (vLLM's `draft_slots`)."""

    # ----- requests in and out ------------------------------------------------

    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"duplicate request id {request.request_id!r}")
        self.waiting.add_request(request)
        self.requests[request.request_id] = request

    def finish_requests(
        self, request_ids: str | Iterable[str], finished_status: RequestStatus
    ) -> list[Request]:
        """Finish requests from outside (aborts); unknown or finished ids are ignored.

        Requests are freed in the order given. vLLM turns a list of ids into a set,
        so its order (and the free order of blocks) depends on the hash seed; one
        id per call, as vLLM's engine does for aborts, matches it exactly.
        """
        assert RequestStatus.is_finished(finished_status)
        ids = (request_ids,) if isinstance(request_ids, str) else dict.fromkeys(request_ids)
        finished = [
            request
            for request in map(self.requests.get, ids)
            if request is not None and not request.is_finished()
        ]
        running = {r for r in finished if r.status == RequestStatus.RUNNING}
        if running:
            self.running = [r for r in self.running if r not in running]
        waiting = [r for r in finished if r.status != RequestStatus.RUNNING]
        if waiting:
            self.waiting.remove_requests(waiting)
        for request in finished:
            request.status = finished_status
            self._free_request(request)
        return finished

    def _free_request(self, request: Request) -> None:
        self.finished_req_ids.add(request.request_id)
        self.kv_cache_manager.free(request)
        del self.requests[request.request_id]

    def get_request_counts(self) -> tuple[int, int]:
        """(running, waiting)."""
        return len(self.running), len(self.waiting)

    def get_num_free_blocks(self) -> int:
        return self.kv_cache_manager.get_num_free_blocks()

    def has_unfinished_requests(self) -> bool:
        return bool(self.running) or bool(self.waiting)

    def has_finished_requests(self) -> bool:
        return bool(self.finished_req_ids)

    def has_requests(self) -> bool:
        """Anything to schedule, or finished ids still to ship."""
        return self.has_unfinished_requests() or self.has_finished_requests()

    # ----- schedule() ---------------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        """vLLM's call: this step's output (`schedule_and_explain` also says why it stopped)."""
        return self._schedule()[0]

    def schedule_and_explain(self) -> tuple[SchedulerOutput, ScheduleEnd | None]:
        """`schedule()`, and why its passes stopped (the probe gets the same record)."""
        return self._schedule()

    def _schedule(self) -> tuple[SchedulerOutput, ScheduleEnd]:
        plan = StepPlan(
            token_budget=self.config.token_budget,
            input_budget=self.config.max_num_batched_tokens,
            long_prefill_token_threshold=self._long_prefill_token_threshold(),
            draft_slots=self.draft_slots,
        )
        if self.probe is not None:
            self.probe.on_schedule_start(self._schedule_start(plan))
        plan.running_pass_end = self._schedule_running(plan)
        if self._may_admit(plan):
            plan.admission_stop = self._schedule_waiting(plan)
        else:
            plan.admission_stop = AdmissionStop.PREEMPTED_THIS_STEP
        output = self._make_output(plan)
        self._update_after_schedule(output)
        end = ScheduleEnd(
            plan.running_pass_end,
            plan.admission_stop,
            plan.blocked_request_id,
            plan.prefix_cache_queries,
            plan.prefix_cache_hits,
        )
        if self.probe is not None:
            self.probe.on_schedule_end(end)
        return output, end

    def _schedule_start(self, plan: StepPlan) -> ScheduleStart:
        return ScheduleStart(
            token_budget=plan.token_budget,
            input_budget=plan.input_budget,
            long_prefill_token_threshold=plan.long_prefill_token_threshold,
            num_running=len(self.running),
            num_waiting=len(self.waiting),
            num_free_blocks=self.kv_cache_manager.get_num_free_blocks(),
        )

    def _may_admit(self, plan: StepPlan) -> bool:
        """The anti-thrash rule: a step that preempted anybody admits nobody."""
        return not plan.preempted

    def _long_prefill_token_threshold(self) -> int:
        """The per-request chunk cap for this step; off when only one request exists."""
        num_requests = len(self.running) + len(self.waiting)
        threshold = self.config.long_prefill_token_threshold
        if num_requests <= 1 or threshold == 0:
            return 0
        if self.config.long_prefill_token_threshold_adaptive:
            threshold = max(threshold, self.config.max_num_batched_tokens // num_requests)
        return threshold

    # ----- the running pass ---------------------------------------------------

    def _schedule_running(self, plan: StepPlan) -> RunningPassEnd:
        """Give each running request its next tokens, preempting when blocks run out."""
        req_index = 0
        draft_slots = plan.draft_slots
        drafting = self.num_spec_tokens > 0
        while req_index < len(self.running):
            if plan.token_budget <= 0 or plan.input_budget <= draft_slots:
                return RunningPassEnd.BUDGET
            request = self.running[req_index]
            if _max_tokens_in_flight(request):
                req_index += 1
                continue
            num_new_tokens = self._num_new_tokens_running(request, plan)
            if num_new_tokens == 0:
                req_index += 1
                continue
            new_blocks, req_index = self._allocate_with_preemption(
                request, num_new_tokens, plan, req_index
            )
            if new_blocks is None:
                if self._self_preemption_continues():
                    # It was the lowest-priority request and preempted itself; the
                    # list shrank, so req_index already points at the next one.
                    continue
                return RunningPassEnd.SELF_PREEMPTED
            plan.scheduled_running.append(request)
            plan.take(request, num_new_tokens, new_blocks)
            req_index += 1
            if drafting:
                schedule_drafts(request, num_new_tokens, plan)
        return RunningPassEnd.ALL_VISITED

    def _self_preemption_continues(self) -> bool:
        """Whether the running pass goes on after a request preempted itself (priority, 0.33)."""
        return self.policy is SchedulingPolicy.PRIORITY and self.rules.self_preemption_continues

    def _num_new_tokens_running(self, request: Request, plan: StepPlan) -> int:
        num_new_tokens = (
            request.num_tokens
            + len(request.spec_token_ids)
            + request.num_output_placeholders
            - request.num_computed_tokens
        )
        threshold = plan.long_prefill_token_threshold
        if 0 < threshold < num_new_tokens:
            num_new_tokens = threshold
        num_new_tokens = min(
            num_new_tokens, plan.token_budget, plan.input_budget - plan.draft_slots
        )
        # Keep positions plus the token to be sampled within max_model_len (under async
        # scheduling this reaches 0 when the in-flight token takes the last position).
        return min(num_new_tokens, self.max_model_len - request.num_computed_tokens - 1)

    def _allocate_with_preemption(
        self, request: Request, num_new_tokens: int, plan: StepPlan, req_index: int
    ) -> tuple[list[KVCacheBlock] | None, int]:
        """Allocate, preempting victims until it fits; None if `request` preempted itself."""
        probe = self.probe
        while True:
            result = self.kv_cache_manager.allocate_slots(
                request, num_new_tokens, num_lookahead_tokens=self.num_lookahead_tokens
            )
            if not isinstance(result, AllocationRefusal):
                if probe is not None:
                    probe.decisions.append(request.running_grant)
                return result, req_index
            if probe is not None:
                probe.decisions.append(
                    RefusedRunningCall(request.request_id, num_new_tokens, result)
                )
            victim, req_index, refunded = self._pop_victim(plan, req_index)
            self._preempt(victim, request, refunded)
            plan.preempted.append(victim)
            if victim is request:
                return None, req_index

    def _preempt(
        self,
        victim: Request,
        needed_by: Request,
        refunded: tuple[int, list[KVCacheBlock]] | None,
    ) -> None:
        if self.probe is None:
            self._preempt_request(victim)
            return
        kv_cache_manager = self.kv_cache_manager
        num_free_blocks = kv_cache_manager.get_num_free_blocks()
        num_computed_tokens = victim.num_computed_tokens
        num_blocks = len(kv_cache_manager.get_blocks(victim.request_id))
        self._preempt_request(victim)
        num_refunded, refunded_blocks = refunded or (0, [])
        self.probe.decisions.append(
            Preemption(
                request_id=victim.request_id,
                needed_by=needed_by.request_id,
                policy=self.policy.value,
                num_computed_tokens_discarded=num_computed_tokens,
                num_blocks_freed=num_blocks,
                num_tokens_refunded=num_refunded,
                refunded_block_ids=_block_ids(refunded_blocks),
                num_preemptions=victim.num_preemptions,
                num_free_blocks_before=num_free_blocks,
                num_free_blocks_after=kv_cache_manager.get_num_free_blocks(),
            )
        )

    def _pop_victim(
        self, plan: StepPlan, req_index: int
    ) -> tuple[Request, int, tuple[int, list[KVCacheBlock]] | None]:
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

    # ----- the waiting pass ---------------------------------------------------

    def _schedule_waiting(self, plan: StepPlan) -> AdmissionStop:
        """Admit from the head of the queue until one does not fit.

        Nothing is skipped past for lack of room. A request that cannot be
        scheduled yet (its grammar still compiling, its stale output in flight, or
        its adapter over `max_loras`) is passed over, and the skipped ones are put
        back at the head, in their order, after the pass.
        """
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
            return active_loras(self.running)
        return active_loras(plan.scheduled_running)

    def _admit_waiting(
        self, plan: StepPlan, skipped: deque[Request], scheduled_loras: set[int] | None
    ) -> AdmissionStop:
        while plan.token_budget > 0:
            if not self.waiting:
                return AdmissionStop.NO_WAITING
            if plan.input_budget <= plan.draft_slots:
                return AdmissionStop.BUDGET
            if len(self.running) >= self.config.max_num_running_reqs:
                return AdmissionStop.MAX_NUM_SEQS
            request = self.waiting.peek_request()
            reason = self._skip_reason(request, scheduled_loras)
            if reason is not None:
                skipped.appendleft(self.waiting.pop_request())
                if self.probe is not None:
                    self.probe.decisions.append(WaitingSkip(request.request_id, reason))
                continue
            stop = self._try_admit(request, plan)
            if stop is not None:
                return stop
            if scheduled_loras is not None and request.lora_request is not None:
                scheduled_loras.add(request.lora_request.lora_int_id)
        return AdmissionStop.BUDGET

    def _skip_reason(self, request: Request, scheduled_loras: set[int] | None) -> str | None:
        """Why the waiting head is passed over this step, checked in vLLM's order; None: try it."""
        if request.status == RequestStatus.WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR:
            if not _grammar_ready(request):
                return SKIP_GRAMMAR_NOT_READY
            request.status = RequestStatus.WAITING
        if request.num_stale_output_tokens:
            return SKIP_STALE_OUTPUT
        if scheduled_loras is not None:
            assert self.config.max_loras is not None
            if exceeds_max_loras(request, scheduled_loras, self.config.max_loras):
                return SKIP_MAX_LORAS
        return None

    def _try_admit(self, request: Request, plan: StepPlan) -> AdmissionStop | None:
        """Admit the head of the queue, or say why it cannot be admitted this step."""
        hit_blocks, num_computed_tokens = self.kv_cache_manager.get_computed_blocks(request)
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
        result = self._allocate_for_admission(request, num_new_tokens, hit_blocks)
        if isinstance(result, AllocationRefusal):
            plan.blocked_request_id = request.request_id
            return REFUSAL_STOP[result.check]
        if self.probe is not None:
            plan.prefix_cache_queries += (
                request.num_tokens if self.config.enable_prefix_caching else 0
            )
            plan.prefix_cache_hits += num_computed_tokens
        self._admit(request, num_new_tokens, num_computed_tokens, plan)
        if pad_spec_decode_to > 1 and num_new_tokens == pad_spec_decode_to:
            plan.scheduled_spec_decode_tokens[request.request_id] = (-1,) * self.num_spec_tokens
        return None

    def _allocate_for_admission(
        self, request: Request, num_new_tokens: int, hit_blocks: list[KVCacheBlock]
    ) -> list[KVCacheBlock] | AllocationRefusal:
        kv_cache_manager = self.kv_cache_manager
        num_free_blocks = kv_cache_manager.get_num_free_blocks()
        num_hit_tokens = len(hit_blocks) * self.block_size
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
            refusal, block_ids = (
                (result, ())
                if isinstance(result, AllocationRefusal)
                else (None, _block_ids(result))
            )
            self.probe.decisions.append(
                AdmissionCall(
                    request_id=request.request_id,
                    num_new_tokens=num_new_tokens,
                    num_new_computed_tokens=num_hit_tokens,
                    full_sequence_check=full_sequence_must_fit,
                    watermark_blocks=kv_cache_manager.watermark_blocks if self.running else 0,
                    num_free_blocks_before=num_free_blocks,
                    num_free_blocks_after=kv_cache_manager.get_num_free_blocks(),
                    block_ids=block_ids,
                    refusal=refusal,
                )
            )
        return result

    def _admit(
        self, request: Request, num_new_tokens: int, num_computed_tokens: int, plan: StepPlan
    ) -> None:
        self.waiting.pop_request()
        self.running.append(request)
        if request.status == RequestStatus.WAITING:
            plan.scheduled_new.append(request)
        else:
            plan.scheduled_resumed.append(request)
        plan.take(request, num_new_tokens, self.kv_cache_manager.get_blocks(request.request_id))
        request.status = RequestStatus.RUNNING
        request.num_computed_tokens = num_computed_tokens

    # ----- the output ---------------------------------------------------------

    def _make_output(self, plan: StepPlan) -> SchedulerOutput:
        new_reqs = tuple(
            NewRequestData(
                req_id=request.request_id,
                prompt_token_ids=request.prompt_token_ids,
                sampling_params=request.sampling_params,
                block_ids=_block_ids(plan.new_blocks[request.request_id]),
                num_computed_tokens=request.num_computed_tokens,
            )
            for request in plan.scheduled_new
        )
        cached_reqs = self._make_cached_request_data(plan)
        self.prev_step_scheduled_req_ids = set(plan.num_scheduled_tokens)
        return SchedulerOutput(
            scheduled_new_reqs=new_reqs,
            scheduled_cached_reqs=cached_reqs,
            num_scheduled_tokens=plan.num_scheduled_tokens,
            total_num_scheduled_tokens=sum(plan.num_scheduled_tokens.values()),
            preempted_req_ids=frozenset(self.preempted_req_ids),
            finished_req_ids=frozenset(self.finished_req_ids),
            scheduled_spec_decode_tokens=plan.scheduled_spec_decode_tokens or NO_SPEC_DECODE_TOKENS,
        )

    def _make_cached_request_data(self, plan: StepPlan) -> CachedRequestData:
        if not plan.scheduled_running and not plan.scheduled_resumed:
            return CachedRequestData.empty()
        requests = list(itertools.chain(plan.scheduled_running, plan.scheduled_resumed))
        previous = self.prev_step_scheduled_req_ids
        return CachedRequestData(
            req_ids=tuple(r.request_id for r in requests),
            resumed_req_ids=frozenset(r.request_id for r in plan.scheduled_resumed),
            new_block_ids=tuple(
                _block_ids(plan.new_blocks[r.request_id]) or None for r in requests
            ),
            num_computed_tokens=tuple(r.num_computed_tokens for r in requests),
            num_output_tokens=tuple(r.num_output_tokens for r in requests),
            all_token_ids={
                r.request_id: tuple(r.all_token_ids)
                for r in requests
                if r.request_id not in previous
            },
        )

    def _update_after_schedule(self, output: SchedulerOutput) -> None:
        """Advance `num_computed_tokens` now, so the next step can schedule right away."""
        requests = self.requests
        for request_id, num_scheduled in output.num_scheduled_tokens.items():
            request = requests[request_id]
            request.num_computed_tokens += num_scheduled
            request.num_in_flight_tokens += num_scheduled
            request.is_prefill_chunk = request.num_computed_tokens < (
                request.num_tokens + request.num_output_placeholders
            )
        self.finished_req_ids = set()
        self.preempted_req_ids = set()

    # ----- update_from_output() -----------------------------------------------

    def update_from_output(
        self, scheduler_output: SchedulerOutput, model_runner_output: ModelRunnerOutput
    ) -> list[EngineCoreOutput]:
        """Append sampled tokens, run stop checks and free finished requests.

        Under async scheduling the output may be for a step scheduled before a
        preemption: its tokens are still appended (and may stop the preempted
        request) but leave the reset counters alone.
        """
        outputs = []
        stopped_running: list[Request] = []
        stopped_preempted: list[Request] = []
        sampled = model_runner_output.sampled_token_ids
        index_of = model_runner_output.req_id_to_index
        spec_tokens = scheduler_output.scheduled_spec_decode_tokens
        caches_drafted = self.num_spec_tokens > 0 and self.rules.caches_drafted_blocks_at_update
        for request_id, num_scheduled in scheduler_output.num_scheduled_tokens.items():
            request = self.requests.get(request_id)
            if request is None or request.is_finished():
                continue  # finished or aborted while the step was in flight
            is_stale = _drain_in_flight(request, num_scheduled)
            generated = sampled[index_of[request_id]] if sampled else ()
            if not generated:
                continue  # a partial prefill chunk samples nothing
            if spec_tokens and not is_stale:
                roll_back_rejected(request, num_rejected(request_id, len(generated), spec_tokens))
            status_before = request.status
            had_placeholders = request.num_output_placeholders > 0
            new_token_ids, is_stopped = self._update_request_with_output(
                request, generated, is_stale
            )
            if (
                not is_stale
                and status_before == RequestStatus.RUNNING
                and (had_placeholders or caches_drafted)
            ):
                # Blocks become cacheable as the tokens' output lands (async, or drafts).
                self.kv_cache_manager.cache_blocks(
                    request, request.num_computed_tokens - request.num_in_flight_tokens
                )
            finish_reason = None
            if is_stopped:
                finish_reason = request.get_finished_reason()
                self._free_request(request)
                running = status_before == RequestStatus.RUNNING
                (stopped_running if running else stopped_preempted).append(request)
            outputs.append(
                EngineCoreOutput(request_id, new_token_ids, finish_reason, request.stop_reason)
            )
        if stopped_running:
            self._remove_stopped(stopped_running)
        if stopped_preempted:
            self.waiting.remove_requests(stopped_preempted)
        return outputs

    def _update_request_with_output(
        self, request: Request, generated: Sequence[int], is_stale: bool = False
    ) -> tuple[tuple[int, ...], bool]:
        """Append tokens one by one, stopping at the first that ends the request."""
        new_token_ids = tuple(generated)
        is_stopped = False
        for num_new, token_id in enumerate(generated, 1):
            request.append_output_token_id(token_id)
            if check_stop(request, self.max_model_len):
                if not is_stale:
                    request.num_computed_tokens -= len(generated) - num_new
                new_token_ids = new_token_ids[:num_new]
                is_stopped = True
                break
        if not is_stale and request.num_output_placeholders > 0:
            # Every returned token resolves a placeholder, those trimmed at a stop too.
            request.num_output_placeholders -= len(generated)
        return new_token_ids, is_stopped

    def _remove_stopped(self, stopped: list[Request]) -> None:
        stopped_set = set(stopped)
        self.running = [r for r in self.running if r not in stopped_set]

    def update_draft_token_ids(self, draft_token_ids: DraftTokenIds) -> None:
        """The drafts proposed after a step become each request's next `spec_token_ids`.

        Drafts for a request still prefilling are dropped (it samples nothing to verify).
        """
        requests = self.requests
        for request_id, spec_token_ids in zip(
            draft_token_ids.req_ids, draft_token_ids.draft_token_ids, strict=True
        ):
            request = requests.get(request_id)
            if request is None or request.is_finished():
                continue
            if request.is_prefill_chunk:
                if request.spec_token_ids:
                    request.spec_token_ids = []
                continue
            request.spec_token_ids = list(spec_token_ids)


def _schedule_unexplained(scheduler: Scheduler) -> tuple[SchedulerOutput, ScheduleEnd | None]:
    """An overridden `schedule()`'s output; why its passes stopped is unknown, as for vLLM's."""
    return scheduler.schedule(), None


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


def _drain_in_flight(request: Request, num_scheduled: int) -> bool:
    """Retire a step's tokens from the in-flight count; True if that output is stale."""
    request.num_in_flight_tokens -= num_scheduled
    if request.num_stale_output_tokens > 0:
        request.num_stale_output_tokens -= num_scheduled
        assert request.num_stale_output_tokens >= 0
        return True
    return False


def _grammar_ready(request: Request) -> bool:
    structured_output_request = request.structured_output_request
    return structured_output_request is not None and structured_output_request.is_grammar_ready


def _block_ids(blocks: Sequence[KVCacheBlock]) -> tuple[int, ...]:
    return tuple(block.block_id for block in blocks)
