"""A step's `_steps` row: budgets, queue lengths and free blocks, why its passes stopped."""

from __future__ import annotations

from collections.abc import Iterable

from stepscope.engine import EngineStep, step_counts
from stepscope.engine.probe import QueueState, ScheduleEnd, ScheduleStart


def idle_step_row(
    columns: Iterable[str], step: int, scheduler: QueueState, ended_at_ns: int
) -> dict[str, object]:
    """A step with nothing scheduled: only its queue lengths, free blocks and end."""
    num_running, num_waiting = scheduler.get_request_counts()
    free = scheduler.get_num_free_blocks()
    row: dict[str, object] = dict.fromkeys(columns)
    row.update(
        step=step,
        idle=True,
        num_free_blocks_before=free,
        num_free_blocks_after_update=free,
        num_running_after=num_running,
        num_waiting_after=num_waiting,
        ended_at_ns=ended_at_ns,
    )
    return row


def engine_step_row(
    step: int,
    engine_step: EngineStep,
    scheduler: QueueState,
    start: ScheduleStart,
    end: ScheduleEnd,
    ended_at_ns: int,
) -> dict[str, object]:
    """A scheduled step's row; the caller fills in what it counted (preemptions, finishes,
    the blocked request's index, the update step)."""
    counts = step_counts(engine_step)
    num_running, num_waiting = scheduler.get_request_counts()
    return {
        "step": step,
        "idle": False,
        "token_budget": start.token_budget,
        "input_budget": start.input_budget,
        "long_prefill_token_threshold": start.long_prefill_token_threshold,
        "num_running_before": start.num_running,
        "num_waiting_before": start.num_waiting,
        "num_free_blocks_before": start.num_free_blocks,
        "num_scheduled_tokens": counts.num_scheduled_tokens,
        "num_scheduled_reqs": counts.num_scheduled_reqs,
        "num_new_reqs": counts.num_new_reqs,
        "num_resumed_reqs": counts.num_resumed_reqs,
        "num_preemptions": 0,
        "num_finished": 0,
        "num_free_blocks_after_schedule": counts.num_free_blocks_after_schedule,
        "num_free_blocks_after_update": scheduler.get_num_free_blocks(),
        "num_held_blocks_by_group": counts.num_held_blocks_by_group,
        "num_running_after": num_running,
        "num_waiting_after": num_waiting,
        "prefix_cache_queries": end.prefix_cache_queries,
        "prefix_cache_hits": end.prefix_cache_hits,
        "running_pass_end": str(end.running_pass_end),
        "admission_stop": str(end.admission_stop),
        "blocked_request_index": None,
        "update_step": None,
        "schedule_ns": engine_step.schedule_ns,
        "model_ns": engine_step.model_ns,
        "update_ns": engine_step.update_ns,
        "ended_at_ns": ended_at_ns,
    }
