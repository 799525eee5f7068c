"""Times `schedule()` and `update_from_output()` per step for any vLLM-shaped scheduler.

Imports nothing from stepscope or vLLM, so both `scheduler_cost.py` (stepscope) and
`vllm_scheduler_cost.py` (run under vLLM, see `vllm_venv.py`) use the same loop.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

SAMPLED_TOKEN_ID = 1000
"""Every sampled token; never EOS, so requests end by max_tokens only."""


def sampled_tokens(scheduler: Any, scheduler_output: Any) -> dict[str, list[int]]:
    """The fake model: one token for each request whose chunk reached its known tokens."""
    sampled: dict[str, list[int]] = {}
    requests = scheduler.requests
    for req_id in scheduler_output.num_scheduled_tokens:
        request = requests[req_id]
        done = request.num_computed_tokens >= request.num_tokens
        sampled[req_id] = [SAMPLED_TOKEN_ID] if done else []
    return sampled


def time_steps(
    scheduler: Any,
    arrivals: Mapping[int, Sequence[Any]],
    make_runner_output: Callable[[dict[str, list[int]]], Any],
    measure_from: int,
    num_steps: int,
    clock: Callable[[], int] = time.process_time_ns,
) -> dict[str, float]:
    """Step the scheduler; CPU time of the two calls, averaged over the measured steps.

    Steps before `measure_from` warm up (admissions, prefills); the garbage collector
    is off while measuring, for both schedulers alike. `clock` is the process's CPU
    time unless asked otherwise (the engine thread's alone: `time.thread_time_ns`).
    """
    schedule_ns = update_ns = measured = preemptions = 0
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
            t0 = clock()
            output = scheduler.schedule()
            t1 = clock()
            runner_output = make_runner_output(sampled_tokens(scheduler, output))
            t2 = clock()
            scheduler.update_from_output(output, runner_output)
            t3 = clock()
            preemptions += len(output.preempted_req_ids or ())
            if step >= measure_from:
                schedule_ns += t1 - t0
                update_ns += t3 - t2
                measured += 1
    finally:
        gc.enable()
    return {
        "steps": measured,
        "schedule_us": schedule_ns / max(measured, 1) / 1e3,
        "update_us": update_ns / max(measured, 1) / 1e3,
        "preemptions": preemptions,
    }
