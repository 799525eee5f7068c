"""Times `schedule()` and `update_from_output()` per step for any vLLM-shaped scheduler.

Imports nothing from stepscope or vLLM, so both `scheduler_cost.py` (stepscope) and
`vllm_scheduler_cost.py` (run under vLLM, see `vllm_venv.py`) use the same loop.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fake_drafter import SeededDrafter

SAMPLED_TOKEN_ID = 1000
"""Every sampled token; never EOS, so requests end by max_tokens only."""


def sampled_tokens(
    scheduler: Any, scheduler_output: Any, drafter: SeededDrafter | None = None
) -> dict[str, list[int]]:
    """The fake model: for each request whose chunk reached its known tokens, its accepted
    drafts (with a drafter) and one bonus token; nothing for a partial prefill chunk."""
    sampled: dict[str, list[int]] = {}
    requests = scheduler.requests
    spec_tokens = scheduler_output.scheduled_spec_decode_tokens
    for req_id in scheduler_output.num_scheduled_tokens:
        request = requests[req_id]
        if request.num_computed_tokens < request.num_tokens:
            sampled[req_id] = []
            continue
        num_drafts = len(spec_tokens.get(req_id) or ()) if drafter is not None else 0
        num_accepted = drafter.num_accepted(req_id, num_drafts) if drafter is not None else 0
        sampled[req_id] = [SAMPLED_TOKEN_ID] * (num_accepted + 1)
    return sampled


def time_steps(
    scheduler: Any,
    arrivals: Mapping[int, Sequence[Any]],
    make_runner_output: Callable[[dict[str, list[int]]], Any],
    measure_from: int,
    num_steps: int,
    clock: Callable[[], int] = time.process_time_ns,
    drafter: SeededDrafter | None = None,
) -> dict[str, float]:
    """Step the scheduler; CPU time of the two calls, averaged over the measured steps.

    Steps before `measure_from` warm up (admissions, prefills); the garbage collector
    is off while measuring, for both schedulers alike. `clock` is the process's CPU
    time unless asked otherwise (the engine thread's alone: `time.thread_time_ns`).
    With a drafter, its drafts go to `update_draft_token_ids` after each update, timed
    with the update. Preemptions and scheduled tokens count every step, warm-up included.
    """
    schedule_ns = update_ns = measured = preemptions = scheduled_tokens = 0
    last_arrival = max(arrivals, default=0)
    gc.collect()
    gc.disable()
    try:
        for step in range(measure_from + num_steps):
            for request in arrivals.get(step, ()):
                scheduler.add_request(request)
            if not scheduler.has_requests():
                if step > last_arrival:
                    break
                continue
            output, step_schedule_ns, step_update_ns = _step(
                scheduler, make_runner_output, clock, drafter
            )
            preemptions += len(output.preempted_req_ids or ())
            scheduled_tokens += output.total_num_scheduled_tokens
            if step >= measure_from:
                schedule_ns += step_schedule_ns
                update_ns += step_update_ns
                measured += 1
    finally:
        gc.enable()
    return {
        "steps": measured,
        "schedule_us": schedule_ns / max(measured, 1) / 1e3,
        "update_us": update_ns / max(measured, 1) / 1e3,
        "preemptions": preemptions,
        "scheduled_tokens": scheduled_tokens,
    }


def _step(
    scheduler: Any,
    make_runner_output: Callable[[dict[str, list[int]]], Any],
    clock: Callable[[], int],
    drafter: SeededDrafter | None,
) -> tuple[Any, int, int]:
    """One step: its output, and the CPU time of its schedule and of its update."""
    t0 = clock()
    output = scheduler.schedule()
    t1 = clock()
    sampled = sampled_tokens(scheduler, output, drafter)
    runner_output = make_runner_output(sampled)
    draft_ids = drafter.propose(sampled) if drafter is not None else None
    t2 = clock()
    scheduler.update_from_output(output, runner_output)
    if draft_ids is not None:
        scheduler.update_draft_token_ids(draft_ids)
    t3 = clock()
    return output, t1 - t0, t3 - t2
