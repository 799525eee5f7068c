"""What a vLLM `schedule()` call started from, and why each of its passes stopped.

vLLM keeps a step's budgets and its loop exits in local variables. The start is
read just before the call, as vLLM's own setup computes it; the reasons both
passes stopped follow from what the call did (its refusals, preemptions and
admissions) and the queues it left, by the loop conditions of `schedule()`
(scheduler.py L794, L1062-1075 and L1290 in 0.33.0) in their order, and the installed
version's rules where versions differ.

Both are read on vLLM's engine thread, as plain values, with what does not change
between calls (the config, the version's rules) read once; the recorder's builder thread
makes the records of them (`start_record`, `end_record`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stepscope.engine.kv_cache_manager import RefusalCheck
from stepscope.engine.probe import (
    Decision,
    Preemption,
    ScheduleEnd,
    ScheduleStart,
    WaitingSkip,
)
from stepscope.engine.step_plan import REFUSAL_STOP, AdmissionStop, RunningPassEnd

from .versions import installed_rules

StartValues = tuple[int, int, int, int]
"""`schedule()`'s token budget, and the running, waiting and free blocks it starts with."""
LastRefusal = tuple[RefusalCheck, str] | None
"""The check that refused a call's last admission call, and its request (None: granted)."""
EndValues = tuple[RunningPassEnd, AdmissionStop, "str | None"]
"""Why the running pass and the waiting pass stopped, and the request that blocked the latter."""


class ScheduleFacts:
    """Reads one vLLM scheduler around its `schedule()` calls."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self._block_pool = scheduler.kv_cache_manager.block_pool
        config = scheduler.scheduler_config
        self.input_budget: int = config.max_num_batched_tokens
        self._threshold: int = config.long_prefill_token_threshold
        self._adaptive_threshold = bool(scheduler.adaptive_long_prefill_threshold)
        self._draft_slots = _draft_slots(scheduler)
        self._self_preemption_stops = not (
            scheduler.policy.value == "priority" and installed_rules().self_preemption_continues
        )
        pause_states = type(scheduler._pause_state)
        self.unpaused = pause_states["UNPAUSED"]
        """vLLM's `PauseState.UNPAUSED`."""
        self._paused_all = pause_states["PAUSED_ALL"]
        self.applies_prefill_cadence = applies_prefill_cadence(scheduler)

    # ----- the engine thread ----------------------------------------------------

    def start(self) -> StartValues:
        """`schedule()`'s budget and the queues it is about to walk."""
        scheduler = self.scheduler
        token_budget = scheduler.max_num_scheduled_tokens
        if scheduler._pause_state is self._paused_all:
            token_budget = 0
        num_running, num_waiting = scheduler.get_request_counts()
        return token_budget, num_running, num_waiting, self._block_pool.get_num_free_blocks()

    def paused(self) -> bool:
        """Whether scheduling is paused (`set_pause_state`)."""
        return self.scheduler._pause_state is not self.unpaused

    def end(
        self,
        start: StartValues,
        decisions: Sequence[Decision],
        last_refusal: LastRefusal,
        output: Any,
        *,
        held: bool,
    ) -> EndValues:
        """Why the running pass and the waiting pass stopped, from what the call did.

        `decisions`: the call's, which list running grants only where it preempted.
        `last_refusal`: the call's last admission call was refused (by which check, for
        which request), or None.
        `output`: vLLM's `SchedulerOutput` as the call returned it (its running rows come
        first among the cached ones and the scheduled counts). `held`: the call held
        prefill (`prefill_held`, read before it).
        """
        preempted = self_preempted = False
        skipped: set[str] = set()
        for decision in decisions:
            kind = type(decision)
            if kind is Preemption:
                preempted = True
                self_preempted |= decision.request_id == decision.needed_by  # type: ignore[union-attr]
            elif kind is WaitingSkip:
                skipped.add(decision.request_id)
        cached = output.scheduled_cached_reqs
        num_running_rows = len(cached.req_ids) - len(cached.resumed_req_ids)
        if self_preempted and self._self_preemption_stops:
            running_pass_end = RunningPassEnd.SELF_PREEMPTED
        else:
            running_pass_end = self._running_pass_end(start, output, num_running_rows)
        if preempted:
            return running_pass_end, AdmissionStop.PREEMPTED_THIS_STEP, None
        admission_stop = self._admission_stop(start, output, last_refusal, skipped, held=held)
        return (running_pass_end, *admission_stop)

    def _running_pass_end(
        self, start: StartValues, output: Any, num_running_rows: int
    ) -> RunningPassEnd:
        """The budget stopped it if it ran out with running requests left unvisited."""
        running_tokens = output.total_num_scheduled_tokens - _waiting_pass_tokens(output)
        slots = self._draft_slots
        input_left = self.input_budget - running_tokens - slots * num_running_rows
        if start[0] - running_tokens > 0 and input_left > slots:
            return RunningPassEnd.ALL_VISITED
        # The running queue as the running pass left it, before this call's admissions.
        running = self.scheduler.running
        num_kept = len(running) - (len(output.num_scheduled_tokens) - num_running_rows)
        if num_kept <= 0:
            return RunningPassEnd.ALL_VISITED
        last_row = (
            output.scheduled_cached_reqs.req_ids[num_running_rows - 1] if num_running_rows else None
        )
        if running[num_kept - 1].request_id != last_row:
            return RunningPassEnd.BUDGET
        return RunningPassEnd.ALL_VISITED

    def _admission_stop(
        self,
        start: StartValues,
        output: Any,
        last_refusal: LastRefusal,
        skipped: set[str],
        *,
        held: bool,
    ) -> tuple[AdmissionStop, str | None]:
        """The first of the waiting loop's exits that holds, in the loop's order.

        Past the queue's and the budgets' checks the head stopped the loop: on a held step
        because it had prefill left (a head with one token left passes the hold, and then
        fits any budget), else because chunked prefill is off.
        """
        if last_refusal is not None:
            check, request_id = last_refusal
            return REFUSAL_STOP[check], request_id
        total = output.total_num_scheduled_tokens
        if start[0] - total <= 0:
            return AdmissionStop.BUDGET, None
        scheduler = self.scheduler
        # Requests the loop skipped were out of the queue until it ended, then put back.
        if scheduler.get_request_counts()[1] - len(skipped) == 0:
            return AdmissionStop.NO_WAITING, None
        slots = self._draft_slots
        if self.input_budget - total - slots * len(output.num_scheduled_tokens) <= slots:
            return AdmissionStop.BUDGET, None
        if len(scheduler.running) >= scheduler.max_num_active_reqs:
            return AdmissionStop.MAX_NUM_SEQS, None
        head = next(r for r in scheduler.waiting if r.request_id not in skipped)
        if held:
            return AdmissionStop.PREFILL_HELD, head.request_id
        return AdmissionStop.CHUNKING_OFF, head.request_id

    # ----- the builder thread ---------------------------------------------------

    def start_record(self, start: StartValues) -> ScheduleStart:
        token_budget, num_running, num_waiting, num_free_blocks = start
        return ScheduleStart(
            token_budget=token_budget,
            input_budget=self.input_budget,
            long_prefill_token_threshold=self._long_prefill_token_threshold(
                num_running + num_waiting
            ),
            num_running=num_running,
            num_waiting=num_waiting,
            num_free_blocks=num_free_blocks,
        )

    @staticmethod
    def end_record(end: EndValues, prefix_cache: tuple[int, int]) -> ScheduleEnd:
        running_pass_end, admission_stop, blocked = end
        return ScheduleEnd(
            running_pass_end=running_pass_end,
            admission_stop=admission_stop,
            blocked_request_id=blocked,
            prefix_cache_queries=prefix_cache[0],
            prefix_cache_hits=prefix_cache[1],
        )

    def _long_prefill_token_threshold(self, num_requests: int) -> int:
        threshold = self._threshold
        if num_requests <= 1 or threshold <= 0:
            return 0
        if self._adaptive_threshold:
            threshold = max(threshold, self.input_budget // num_requests)
        return int(threshold)


def _waiting_pass_tokens(output: Any) -> int:
    """The tokens `output` scheduled for the requests its waiting pass admitted (new and
    resumed: fewer than the running ones, which take the rest of the total)."""
    scheduled = output.num_scheduled_tokens
    resumed = output.scheduled_cached_reqs.resumed_req_ids
    new: int = sum(scheduled[request.req_id] for request in output.scheduled_new_reqs)
    return new + sum(scheduled[req_id] for req_id in resumed) if resumed else new


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


def _draft_slots(scheduler: Any) -> int:
    """Input slots each scheduled request takes for drafting (`draft_slots`; draft_model: 1)."""
    speculative = scheduler.vllm_config.speculative_config
    return 0 if speculative is None else int(speculative.max_num_new_slots_for_drafting)
