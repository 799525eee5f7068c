"""A sweep's points as a scatter of two objectives and their Pareto front, as both plots draw it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .pareto import Objective, pareto_front
from .plot_scale import Axis, axis
from .result_reader import SweepError, SweepResult


@dataclass(frozen=True)
class PlotPoint:
    point: int
    x: float
    y: float
    on_front: bool
    label: str
    """The point's number and knob values, e.g. `point 3: num_blocks=64`."""


@dataclass(frozen=True)
class Scatter:
    x: Objective
    y: Objective
    x_axis: Axis
    y_axis: Axis
    points: tuple[PlotPoint, ...]
    num_unplotted: int
    """Points with no value (NULL) on an axis: neither drawn nor on the front."""

    @property
    def front(self) -> tuple[PlotPoint, ...]:
        """The front's points along the x axis."""
        return tuple(sorted((p for p in self.points if p.on_front), key=lambda p: (p.x, p.y)))

    @property
    def legend(self) -> str:
        return f"Pareto front of {self.x.spelled} and {self.y.spelled}"


def point_label(result: SweepResult, row: dict[str, Any]) -> str:
    """`point 3: num_blocks=64, max_num_batched_tokens=128`."""
    knobs = ", ".join(f"{knob}={row[knob]}" for knob in result.knobs)
    return f"point {row['point']}: {knobs}" if knobs else f"point {row['point']}"


def scatter(result: SweepResult, objectives: Sequence[Objective]) -> Scatter:
    """The points that have both values, their front over exactly these two objectives."""
    if len(objectives) != 2:
        raise SweepError(f"--plot takes two objectives, X:Y; got {len(objectives)}")
    x, y = objectives
    for objective in objectives:
        _require_values(result, objective)
    rows = [row for row in result.points if row[x.column] is not None and row[y.column] is not None]
    if not rows:
        raise SweepError(f"no point has both {x.column} and {y.column}")
    front = pareto_front(rows, objectives)
    points = tuple(
        PlotPoint(
            int(row["point"]),
            float(row[x.column]),
            float(row[y.column]),
            index in front,
            point_label(result, row),
        )
        for index, row in enumerate(rows)
    )
    return Scatter(
        x,
        y,
        axis([p.x for p in points]),
        axis([p.y for p in points]),
        points,
        len(result.points) - len(rows),
    )


def _require_values(result: SweepResult, objective: Objective) -> None:
    """A column with no value at any point cannot be plotted: say why (a poor fit, say)."""
    if any(row[objective.column] is not None for row in result.points):
        return
    why = f"; {result.fit_note}" if objective.column.endswith("_s") else ""
    raise SweepError(f"{objective.column} has no value at any point{why}")
