"""Objectives over a sweep's points, the Pareto front they draw, and a ranking by one of them.

An objective is a column to minimize or maximize: `min:COLUMN`, `max:COLUMN`, or a
bare `COLUMN`, which takes the column's natural direction: higher is better for
`tokens_per_step` and `num_finished`, lower for every other column (latencies,
steps, preemptions, recomputed tokens, rejections, KV usage, and a knob's value,
read as its cost).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stepscope.engine import InputError

MAXIMIZED = frozenset({"tokens_per_step", "num_finished"})
"""Columns whose bare name means maximize; every other bare column is minimized."""

Row = Mapping[str, object]


@dataclass(frozen=True)
class Objective:
    column: str
    maximize: bool

    @property
    def spelled(self) -> str:
        """How the objective is written on the command line, direction explicit."""
        return f"{'max' if self.maximize else 'min'}:{self.column}"

    @property
    def better(self) -> str:
        return "higher is better" if self.maximize else "lower is better"

    def cost(self, row: Row) -> float | None:
        """The row's value as a cost (lower is better); None when the value is NULL."""
        value = row[self.column]
        if value is None:
            return None
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number):
            return None
        return -number if self.maximize else number


def parse_objective(text: str, columns: Sequence[str]) -> Objective:
    """`[min:|max:]COLUMN`, checked against the result's numeric columns."""
    direction, sep, column = text.strip().rpartition(":")
    if sep and direction not in ("min", "max"):
        raise InputError(f"objective {text!r}: expected [min:|max:]COLUMN")
    if column not in columns:
        raise InputError(
            f"objective {text!r}: no numeric column {column!r}; one of: {', '.join(columns)}"
        )
    maximize = direction == "max" if sep else column in MAXIMIZED
    return Objective(column, maximize)


def parse_objectives(text: str, columns: Sequence[str]) -> tuple[Objective, ...]:
    """Objectives joined by `:` (`min:a:b`, `a:max:b`): `min`/`max` bind to the next column."""
    words = [word.strip() for word in text.split(":")]
    objectives, direction = [], ""
    for word in words:
        if word in ("min", "max") and not direction:
            direction = word + ":"
            continue
        objectives.append(parse_objective(direction + word, columns))
        direction = ""
    if direction or not objectives:
        raise InputError(f"objectives {text!r}: a direction with no column after it")
    return tuple(objectives)


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether costs `a` are no worse than `b` in every objective and better in one."""
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(
        x < y for x, y in zip(a, b, strict=True)
    )


def costs(rows: Sequence[Row], objectives: Sequence[Objective]) -> list[tuple[float, ...] | None]:
    """Each row's costs under the objectives; None for a row with a NULL among them."""
    result: list[tuple[float, ...] | None] = []
    for row in rows:
        values = [objective.cost(row) for objective in objectives]
        result.append(None if None in values else tuple(v for v in values if v is not None))
    return result


def pareto_front(rows: Sequence[Row], objectives: Sequence[Objective]) -> frozenset[int]:
    """Indices of the rows no other row dominates (rows with a NULL objective are never on it).

    Rows are visited best-first in lexicographic cost order, so a row's dominators
    all come before it, and it is compared only with the front found so far.
    """
    row_costs = costs(rows, objectives)
    order = sorted((c, i) for i, c in enumerate(row_costs) if c is not None)
    front: list[tuple[tuple[float, ...], int]] = []
    for cost, index in order:
        if not any(dominates(kept, cost) for kept, _ in front):
            front.append((cost, index))
    return frozenset(index for _, index in front)


def ranked(rows: Sequence[Row], objective: Objective, tiebreak: str = "point") -> list[int]:
    """Row indices best first by the objective; NULLs last; ties in `tiebreak` order."""

    def key(index: int) -> tuple[bool, float, object]:
        cost = objective.cost(rows[index])
        return (cost is None, 0.0 if cost is None else cost, rows[index][tiebreak])

    return sorted(range(len(rows)), key=key)
