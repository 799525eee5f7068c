"""A what-if sweep: the recorded arrivals replayed under every point of a grid of knobs.

Each point is one what-if replay, the same as `stepscope replay TRACE --set ...` (the
same function), run in worker processes or as Ray tasks; its figures become one row of
`sweep_points`. Rows depend only on the trace, the grid and the scheduler, never on how
many workers ran them or where. Seconds come from the step-time model fitted to the
trace, only when that fit is usable.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from stepscope.engine import EngineConfig, Scheduler, default_scheduler_cls
from stepscope.schema import Trace, open_trace
from stepscope.tracer.held_signals import signals_held

from ..cost_model import CostModel, fit_cost_model
from ..from_step import WHOLE, StepWindow, check_window, one_stretch, require_checkpoints
from ..inputs import recorded_config, workload_from_trace
from .grid import SweepGrid, SweepPoint
from .point import PointResult, PointTask, point_trace_name
from .pool import run_local
from .ray_tasks import run_ray
from .result_writer import SWEEP_SCHEMA_VERSION, kept_paths, move_kept, points_table, write_result
from .work_dir import new_work_dir, remove_stale_work_dirs


@dataclass(frozen=True)
class TraceFacts:
    """What a sweep reads from the trace once, before any point runs."""

    path: Path
    config: EngineConfig
    cost_model: CostModel | None
    """None over a window (its latencies are of whole requests) or without timed steps."""
    sha256: str
    window: StepWindow = WHOLE


@dataclass(frozen=True)
class SweepPlan:
    facts: TraceFacts
    grid: SweepGrid
    scheduler_cls: type[Scheduler] | None
    keep: frozenset[int]
    jobs: int
    ray_address: str | None
    """Run the points as Ray tasks there (`local`, `auto` or an address); None: processes."""


@dataclass(frozen=True)
class SweepOutcome:
    points: pa.Table
    meta: dict[str, str | None]
    kept: dict[int, Path]


def trace_facts(path: Path, window: StepWindow = WHOLE) -> TraceFacts:
    """The recorded config (grid values are checked against it), the fit and the file's hash.

    Over a window past step 0 the trace must have checkpoints to start from, which is
    checked once here rather than by every point."""
    with open_trace(path) as trace:
        check_window(window, trace)
        window = _steps_held(one_stretch(window, trace), trace)
        if window.from_step:
            require_checkpoints(trace)
        # A whole sweep reads (and so checks) every request once here, not in every point.
        config = workload_from_trace(trace).config if window.whole else recorded_config(trace)
        model = fit_cost_model(trace) if window.whole else None
        digest = _digest(trace)
    return TraceFacts(path, config, model, digest, window)


def _digest(trace: Trace) -> str:
    """The SHA-256 of the trace file, or of a recording's files (each by name, then bytes)."""
    digest = hashlib.sha256()
    for name, path in trace.stored_files():
        digest.update(name.encode())
        with path.open("rb") as file:
            while block := file.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


def _steps_held(window: StepWindow, trace: Trace) -> StepWindow:
    """A recording still being written, up to the last step it holds now: every point
    replays the same steps, however many the recorder adds meanwhile."""
    if trace.recording is None or window.to_step is not None or trace.complete:
        return window
    return StepWindow(window.from_step, trace.last_step)


def fit_problem(facts: TraceFacts) -> str | None:
    """Why modelled seconds are left out, or None when the fit is usable."""
    model = facts.cost_model
    if not facts.window.whole:
        return "a step window (the step-time model's latencies are of whole requests)"
    if model is None:
        return "too few timed steps to fit a step-time model"
    return None if model.problem is None else f"{model.problem}: {model.describe()}"


def run_sweep(
    plan: SweepPlan,
    output: Path,
    parquet: Path | None,
    on_point: Callable[[SweepPoint, PointResult], None] = lambda point, result: None,
) -> SweepOutcome:
    """Every point run, then the result written atomically (with the kept traces beside it)."""
    remove_stale_work_dirs(output.parent)
    work_dir: Path | None = None
    try:
        with signals_held():  # a stop between its creation and this name would leave it behind
            work_dir = new_work_dir(output.parent)
        facts = plan.facts
        task = PointTask(facts.path, plan.scheduler_cls, work_dir, plan.keep, facts.window)
        results: dict[int, PointResult] = {}
        for result in _run_points(plan, task):
            results[result.index] = result
            on_point(plan.grid.points[result.index], result)
        traces = {i: r.trace for i, r in results.items() if r.trace is not None}
        final = kept_paths(output, {i: point_trace_name(i) for i in traces})
        metrics = {index: result.metrics for index, result in results.items()}
        table = points_table(plan.grid, metrics, final)
        meta = sweep_meta(plan, sorted({r.scheduler for r in results.values()}))
        write_result(output, parquet, table, meta, lambda: move_kept(traces, final))
        return SweepOutcome(table, meta, final)
    finally:
        if work_dir is not None:
            with signals_held():
                shutil.rmtree(work_dir, ignore_errors=True)


def sweep_meta(plan: SweepPlan, schedulers: Sequence[str]) -> dict[str, str | None]:
    """The `sweep_meta` rows: what was swept, over which trace, and whether seconds are in."""
    model, problem = plan.facts.cost_model, fit_problem(plan.facts)
    window = plan.facts.window
    return {
        "sweep_schema_version": str(SWEEP_SCHEMA_VERSION),
        "trace": str(plan.facts.path.resolve()),
        "trace_sha256": plan.facts.sha256,
        "scheduler": ", ".join(schedulers) or _scheduler_name(plan),
        "grid": plan.grid.to_json(),
        "from_step": None if window.whole else str(window.from_step),
        "to_step": None if window.to_step is None else str(window.to_step),
        "fit_r2": None if model is None else repr(model.r_squared),
        "fit_ok": json.dumps(problem is None),
        "fit_problem": problem,
    }


def _run_points(plan: SweepPlan, task: PointTask) -> Iterator[PointResult]:
    if plan.ray_address is not None:
        return run_ray(plan.ray_address, task, plan.grid.points)
    return run_local(task, plan.grid.points, plan.jobs)


def _scheduler_name(plan: SweepPlan) -> str:
    cls = plan.scheduler_cls or default_scheduler_cls(plan.facts.config)
    return f"{cls.__module__}.{cls.__qualname__}"
