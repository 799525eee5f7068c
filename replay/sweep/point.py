"""One sweep point: the what-if replay `stepscope replay --set` runs, then its figures.

This is the function every worker runs, in a local process or a Ray task, so it takes
and returns only plain picklable values.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.engine import InputError, Scheduler
from stepscope.schema import open_trace

from ..from_step import WHOLE, StepWindow
from ..whatif import replay_whatif
from .grid import SweepPoint
from .metrics import point_metrics


@dataclass(frozen=True)
class PointTask:
    """What every point of one sweep shares."""

    trace: Path
    scheduler_cls: type[Scheduler] | None
    work_dir: Path
    """Where each point's trace is written; a kept one stays there until the sweep is done."""
    keep: frozenset[int]
    window: StepWindow = WHOLE
    """The steps each point replays: from the recorded state at its first step."""


@dataclass(frozen=True)
class PointResult:
    index: int
    metrics: dict[str, Any]
    scheduler: str
    """The scheduler class the what-if ran, by qualified name."""
    trace: Path | None
    """The point's trace in the work folder, when the point is kept."""


def point_trace_name(index: int) -> str:
    return f"point-{index}.duckdb"


def run_point(task: PointTask, point: SweepPoint) -> PointResult:
    """The what-if replay of one point and its metrics; its trace is deleted unless kept."""
    output = task.work_dir / point_trace_name(point.index)
    try:
        result = replay_whatif(
            task.trace, output, point.knobs, task.scheduler_cls, window=task.window
        )
        model = result.cost_model
        usable = model if model is not None and model.problem is None else None
        with open_trace(output) as replayed:
            metrics = point_metrics(replayed, usable, task.window)
    except InputError as error:
        raise InputError(f"point {point.index} ({point.label}): {error}") from None
    kept = point.index in task.keep
    if not kept:
        output.unlink()
    return PointResult(point.index, metrics, result.scheduler, output if kept else None)
