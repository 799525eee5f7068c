"""What-if replay: the recorded arrivals under another config or scheduler, as a new trace.

Each request's output sequence comes from the trace as its tape, so the run may take
a different course: requests may be admitted, preempted and finished at other steps.
A request that would sample past its recorded sequence (it ran further before an
abort, say) gets a placeholder token; the summary counts them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.engine import Scheduler, default_scheduler_cls
from stepscope.schema import open_trace
from stepscope.tracer.record_workload import StepSink, record_workload

from .cost_model import CostModel, fit_cost_model, latency_seconds
from .diff import TraceDiff, diff_traces
from .from_step import WHOLE, StepWindow, check_window, one_stretch, start_at
from .inputs import workload_from_trace
from .trace_runner import whatif_model_runner


@dataclass(frozen=True)
class WhatIfReplay:
    original: Path
    output: Path
    knobs: dict[str, Any]
    scheduler: str
    diff: TraceDiff
    cost_model: CostModel | None
    seconds: dict[str, tuple[float | None, float | None]]
    """Modelled seconds, original vs what-if (empty without step timings or a usable fit)."""
    num_placeholder_tokens: int


def replay_whatif(
    trace_path: Path,
    output: Path,
    knobs: Mapping[str, Any] | None = None,
    scheduler_cls: type[Scheduler] | None = None,
    sinks: Sequence[StepSink] = (),
    max_steps: int | None = None,
    window: StepWindow = WHOLE,
) -> WhatIfReplay:
    """Replay the trace's arrivals; with `max_steps`, stop there (a recording cut short).

    Over a `window` that starts past step 0, the what-if starts at the recorded state
    there (`from_step.start_at`) and is compared over the window; its modelled seconds
    are left out (the model's latencies are of whole requests)."""
    with open_trace(trace_path) as trace:
        check_window(window, trace)
        window = one_stretch(window, trace)
        start = None
        if window.from_step:
            start = start_at(trace, window.from_step, knobs)
            workload, runner = start.workload, start.runner
        else:
            workload = workload_from_trace(trace, knobs)
            runner = whatif_model_runner(workload, trace, knobs or {})
        if max_steps is not None:
            workload = dataclasses.replace(workload, max_steps=max_steps)
        model = fit_cost_model(trace) if window.whole else None
        usable = model is not None and model.problem is None
        original_seconds = latency_seconds(trace, model) if model and usable else {}
    cls = scheduler_cls or default_scheduler_cls(workload.config)
    scheduler = f"{cls.__module__}.{cls.__qualname__}"
    meta = {"replay_of": str(trace_path), "what_if": json.dumps(dict(knobs or {})),
            "scheduler": scheduler}  # fmt: skip
    if not window.whole:
        meta.update(replay_from_step=str(window.from_step), replay_to_step=str(window.to_step))
    record_workload(
        workload, runner, output, meta=meta, scheduler_cls=scheduler_cls, sinks=sinks,
        start=None if start is None else start.state, to_step=window.to_step,
    )  # fmt: skip
    seconds: dict[str, tuple[float | None, float | None]] = {}
    if model is not None and usable:
        with open_trace(output) as replayed:
            new_seconds = latency_seconds(replayed, model)
        seconds = {name: (original_seconds[name], new_seconds[name]) for name in new_seconds}
    return WhatIfReplay(
        original=trace_path,
        output=output,
        knobs=dict(knobs or {}),
        scheduler=scheduler,
        diff=diff_traces(trace_path, output, window=window),
        cost_model=model,
        seconds=seconds,
        num_placeholder_tokens=runner.num_padded_tokens,
    )
