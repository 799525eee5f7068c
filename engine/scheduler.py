"""vLLM's V1 scheduler (0.33.0, or 0.32.x's rules) for the single-node subset, in named phases.

There is no prefill phase and no decode phase. Each request has a token list
(prompt + outputs so far) and `num_computed_tokens`; every step `schedule()` gives
each request a number of its not-yet-computed tokens, reserves KV blocks for them
and advances `num_computed_tokens` at once. The running list is served first, in
list order (`running_pass.py`); then, only if nobody was preempted this step,
waiting requests are admitted from the head of the queue until one does not fit
(`waiting_pass.py`). `update_from_output()` is in `output_update.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from .kv_cache_coordinator import KVCacheCoordinator
from .output_update import OutputUpdate
from .probe import ScheduleEnd, ScheduleStart
from .running_pass import RunningPass
from .scheduler_output import (
    NO_GROUP_BLOCK_IDS,
    NO_SPEC_DECODE_TOKENS,
    CachedRequestData,
    GroupBlockIds,
    NewRequestData,
    SchedulerOutput,
)
from .step_plan import AdmissionStop, StepPlan
from .waiting_pass import WaitingPass

_request_id = attrgetter("request_id")
_num_computed_tokens = attrgetter("num_computed_tokens")
_output_token_ids = attrgetter("output_token_ids")
_block_id = attrgetter("block_id")


class Scheduler(RunningPass, WaitingPass, OutputUpdate):
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
        cadence = self.prefill_cadence
        if cadence is not None:
            plan.defer_prefills = cadence.defer_prefills(self.running)
        if self.probe is not None:
            self.probe.on_schedule_start(self._schedule_start(plan))
        plan.running_pass_end = self._schedule_running(plan)
        if self._may_admit(plan):
            plan.admission_stop = self._schedule_waiting(plan)
            if cadence is not None and not plan.defer_prefills:
                cadence.after_waiting_pass(len(self.waiting), len(self.deferred_waiting))
        else:
            plan.admission_stop = AdmissionStop.PREEMPTED_THIS_STEP
        output = self._make_output(plan)
        if cadence is not None:
            cadence.after_schedule(
                output.total_num_scheduled_tokens,
                carried_prefill=plan.prefill_scheduled or plan.prefill_admitted,
            )
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

    # ----- the output ---------------------------------------------------------

    def _make_output(self, plan: StepPlan) -> SchedulerOutput:
        new_reqs = tuple(
            NewRequestData(
                req_id=request.request_id,
                prompt_token_ids=request.prompt_token_ids,
                sampling_params=request.sampling_params,
                block_ids=tuple(map(_block_id, plan.new_blocks[request.request_id])),
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
            new_block_ids_by_group=self._new_block_ids_by_group(plan),
        )

    def _new_block_ids_by_group(self, plan: StepPlan) -> Mapping[str, GroupBlockIds]:
        """Hybrid KV cache groups: each scheduled request's new blocks in every group (an
        admitted one's whole tables)."""
        manager = self.kv_cache_manager
        if not isinstance(manager, KVCacheCoordinator):
            return NO_GROUP_BLOCK_IDS
        admitted = {r.request_id for r in (*plan.scheduled_new, *plan.scheduled_resumed)}
        return manager.step_block_ids_by_group(plan.num_scheduled_tokens, admitted)

    def _make_cached_request_data(self, plan: StepPlan) -> CachedRequestData:
        """The running requests scheduled again, then the resumed ones, column by column."""
        if not plan.scheduled_running and not plan.scheduled_resumed:
            return CachedRequestData.empty()
        requests = plan.scheduled_running + plan.scheduled_resumed
        req_ids = tuple(map(_request_id, requests))
        previous = self.prev_step_scheduled_req_ids
        return CachedRequestData(
            req_ids=req_ids,
            resumed_req_ids=frozenset(map(_request_id, plan.scheduled_resumed)),
            new_block_ids=tuple(
                [
                    tuple(map(_block_id, blocks)) if blocks else None
                    for blocks in map(plan.new_blocks.__getitem__, req_ids)
                ]
            ),
            num_computed_tokens=tuple(map(_num_computed_tokens, requests)),
            num_output_tokens=tuple(map(len, map(_output_token_ids, requests))),
            all_token_ids=(
                {}
                if previous.issuperset(req_ids)
                else {
                    r.request_id: tuple(r.all_token_ids)
                    for r in requests
                    if r.request_id not in previous
                }
            ),
        )

    def _update_after_schedule(self, output: SchedulerOutput) -> None:
        """Advance `num_computed_tokens` now, so the next step can schedule right away."""
        requests = self.requests
        for request_id, num_scheduled in output.num_scheduled_tokens.items():
            request = requests[request_id]
            num_computed_tokens = request.num_computed_tokens + num_scheduled
            request.num_computed_tokens = num_computed_tokens
            request.num_in_flight_tokens += num_scheduled
            request.is_prefill_chunk = num_computed_tokens < (
                request.num_tokens + request.num_output_placeholders
            )
        self.finished_req_ids = set()
        self.preempted_req_ids = set()


def _schedule_unexplained(scheduler: Scheduler) -> tuple[SchedulerOutput, ScheduleEnd | None]:
    """An overridden `schedule()`'s output; why its passes stopped is unknown, as for vLLM's."""
    return scheduler.schedule(), None
