"""What a vLLM `schedule()` call started from, and why each of its passes stopped.

vLLM keeps a step's budgets and its loop exits in local variables. The start is
read just before the call, as vLLM's own setup computes it; the reasons both
passes stopped follow from what the call did (its grants, refusals and
preemptions) and the queues it left, by the loop conditions of `schedule()`
(scheduler.py L794, L1062-1075 and L1290 in 0.33.0) in their order, and the installed
version's rules where versions differ.
"""

from __future__ import annotations

from typing import Any

from stepscope.engine.probe import (
    AdmissionCall,
    Decision,
    Preemption,
    ScheduleEnd,
    ScheduleStart,
    WaitingSkip,
)
from stepscope.engine.scheduler_output import SchedulerOutput
from stepscope.engine.step_plan import REFUSAL_STOP, AdmissionStop, RunningPassEnd

from .versions import installed_rules


def schedule_start(scheduler: Any) -> ScheduleStart:
    """`schedule()`'s budgets and the queues it is about to walk."""
    token_budget = scheduler.max_num_scheduled_tokens
    if scheduler._pause_state.name == "PAUSED_ALL":
        token_budget = 0
    input_budget = scheduler.scheduler_config.max_num_batched_tokens
    num_running, num_waiting = scheduler.get_request_counts()
    return ScheduleStart(
        token_budget=token_budget,
        input_budget=input_budget,
        long_prefill_token_threshold=_long_prefill_token_threshold(
            scheduler, num_running + num_waiting, input_budget
        ),
        num_running=num_running,
        num_waiting=num_waiting,
        num_free_blocks=scheduler.kv_cache_manager.block_pool.get_num_free_blocks(),
    )


def applies_prefill_cadence(scheduler: Any) -> bool:
    """Whether the scheduler holds prefill on its own (`prefill_schedule_interval`, 0.33)."""
    return getattr(scheduler, "local_prefill_interval", 1) > 1


def prefill_held(scheduler: Any) -> bool:
    """Whether the `schedule()` about to run holds prefill (vLLM's local `defer_prefills`):
    inside the interval since the last prefill, no backlog left by a release, a decode
    running. Read only where `applies_prefill_cadence`."""
    return (
        not scheduler.prefill_capacity_bound
        and (scheduler.num_executed_steps + 1) - scheduler.last_prefill_step
        < scheduler.local_prefill_interval
        and any(not request.is_prefill_chunk for request in scheduler.running)
    )


def _long_prefill_token_threshold(scheduler: Any, num_requests: int, input_budget: int) -> int:
    threshold = scheduler.scheduler_config.long_prefill_token_threshold
    if num_requests <= 1 or threshold <= 0:
        return 0
    if scheduler.adaptive_long_prefill_threshold:
        threshold = max(threshold, input_budget // num_requests)
    return int(threshold)


def schedule_end(
    scheduler: Any,
    start: ScheduleStart,
    decisions: list[Decision],
    output: SchedulerOutput,
    prefix_cache: tuple[int, int],
    *,
    held: bool = False,
) -> ScheduleEnd:
    """Why the running pass and the waiting pass stopped, from what the call did.

    `held`: the call held prefill (`prefill_held`, read before it)."""
    cached = output.scheduled_cached_reqs
    num_running_rows = len(cached.req_ids) - len(cached.resumed_req_ids)
    running_rows = list(output.num_scheduled_tokens.values())[:num_running_rows]
    num_admitted = len(output.num_scheduled_tokens) - num_running_rows
    running = scheduler.running[: len(scheduler.running) - num_admitted]
    last_running_row = cached.req_ids[num_running_rows - 1] if num_running_rows else None
    admission_stop, blocked = _admission_stop(scheduler, start, decisions, output, held=held)
    return ScheduleEnd(
        running_pass_end=_running_pass_end(
            scheduler, start, decisions, running_rows, running, last_running_row
        ),
        admission_stop=admission_stop,
        blocked_request_id=blocked,
        prefix_cache_queries=prefix_cache[0],
        prefix_cache_hits=prefix_cache[1],
    )


def _running_pass_end(
    scheduler: Any,
    start: ScheduleStart,
    decisions: list[Decision],
    running_rows: list[int],
    running: list[Any],
    last_running_row: str | None,
) -> RunningPassEnd:
    """A self-preemption stops it, unless the version goes on past one; so does the budget."""
    continues = scheduler.policy.value == "priority" and installed_rules().self_preemption_continues
    if not continues and any(
        type(d) is Preemption and d.request_id == d.needed_by for d in decisions
    ):
        return RunningPassEnd.SELF_PREEMPTED
    running_tokens = sum(running_rows)
    slots = _draft_slots(scheduler)
    input_left = start.input_budget - running_tokens - slots * len(running_rows)
    exhausted = start.token_budget - running_tokens <= 0 or input_left <= slots
    unvisited = bool(running) and running[-1].request_id != last_running_row
    if exhausted and unvisited:
        return RunningPassEnd.BUDGET
    return RunningPassEnd.ALL_VISITED


def _draft_slots(scheduler: Any) -> int:
    """Input slots each scheduled request takes for drafting (`draft_slots`; draft_model: 1)."""
    speculative = scheduler.vllm_config.speculative_config
    return 0 if speculative is None else int(speculative.max_num_new_slots_for_drafting)


def _admission_stop(
    scheduler: Any,
    start: ScheduleStart,
    decisions: list[Decision],
    output: SchedulerOutput,
    *,
    held: bool,
) -> tuple[AdmissionStop, str | None]:
    """The first of the waiting loop's exits that holds, in the loop's order.

    Past the queue's and the budgets' checks the head stopped the loop: on a held step
    because it had prefill left (a head with one token left passes the hold, and then
    fits any budget), else because chunked prefill is off.
    """
    if any(type(d) is Preemption for d in decisions):
        return AdmissionStop.PREEMPTED_THIS_STEP, None
    admissions = [d for d in decisions if type(d) is AdmissionCall]
    refusal = admissions[-1].refusal if admissions else None
    if refusal is not None:
        return REFUSAL_STOP[refusal.check], admissions[-1].request_id
    total = output.total_num_scheduled_tokens
    if start.token_budget - total <= 0:
        return AdmissionStop.BUDGET, None
    # Requests the loop skipped were out of the queue until it ended, then put back.
    skipped = {d.request_id for d in decisions if type(d) is WaitingSkip}
    num_waiting = scheduler.get_request_counts()[1] - len(skipped)
    if num_waiting == 0:
        return AdmissionStop.NO_WAITING, None
    slots = _draft_slots(scheduler)
    if start.input_budget - total - slots * len(output.num_scheduled_tokens) <= slots:
        return AdmissionStop.BUDGET, None
    if len(scheduler.running) >= scheduler.max_num_active_reqs:
        return AdmissionStop.MAX_NUM_SEQS, None
    head = next(r for r in scheduler.waiting if r.request_id not in skipped)
    if held:
        return AdmissionStop.PREFILL_HELD, head.request_id
    return AdmissionStop.CHUNKING_OFF, head.request_id
