"""A step's summary counts: the requests and tokens it scheduled, preempted and finished."""

from __future__ import annotations

from dataclasses import dataclass

from .core import EngineStep


@dataclass(frozen=True, slots=True)
class StepCounts:
    """What the trace's `_steps`, the OTel step span, `stepscope run` and a break predicate
    count for one scheduled step."""

    num_scheduled_tokens: int
    num_scheduled_reqs: int
    num_new_reqs: int
    num_resumed_reqs: int
    num_preempted_reqs: int
    num_finished: int
    """Requests its update finished (0 until its output is processed, under async scheduling)."""
    num_free_blocks_after_schedule: int
    num_held_blocks_by_group: tuple[int, ...] | None
    """Each KV cache group's held blocks after `schedule()` (None: no `kv_cache_groups`)."""


def step_counts(engine_step: EngineStep) -> StepCounts:
    """The summary counts of `engine_step`, from its SchedulerOutput and outputs."""
    output = engine_step.scheduler_output
    return StepCounts(
        num_scheduled_tokens=output.total_num_scheduled_tokens,
        num_scheduled_reqs=len(output.num_scheduled_tokens),
        num_new_reqs=len(output.scheduled_new_reqs),
        num_resumed_reqs=len(output.scheduled_cached_reqs.resumed_req_ids),
        num_preempted_reqs=len(output.preempted_req_ids),
        num_finished=sum(1 for o in engine_step.outputs if o.finish_reason is not None),
        num_free_blocks_after_schedule=engine_step.num_free_blocks_after_schedule,
        num_held_blocks_by_group=engine_step.num_held_blocks_by_group,
    )
