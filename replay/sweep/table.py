"""A sweep's points as a table: chosen order, Pareto front marked, the columns that matter.

`stepscope sweep` prints it and the TUI's sweep screen shows it, from this one model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .pareto import Objective, pareto_front, parse_objectives, ranked
from .result_reader import SweepError, SweepResult

DEFAULT_FRONT = "ttft_p99_steps:tokens_per_step"
"""The front's objectives when none are named: tail latency against throughput."""

SHOWN_METRICS = ("num_preemptions", "ttft_p99_steps", "tokens_per_step")
"""Metrics every table shows, after the knobs and the objectives' own columns (the rest are
in the result's `sweep_points`)."""

SECONDS_METRICS = ("ttft_p99_s",)
"""Shown too when the step-time fit is good (they are NULL otherwise)."""

FRONT_MARK = "◆"
KEPT = "kept"
"""The column that says a point's trace was kept (the paths are in `kept_note`)."""
MAX_KEPT = 5


@dataclass(frozen=True)
class SweepTable:
    result: SweepResult
    columns: tuple[str, ...]
    """The point and knob columns, the objectives', then the metrics shown."""
    rows: tuple[dict[str, Any], ...]
    """The points in the table's order."""
    front: frozenset[int]
    """The point numbers on the Pareto front."""
    front_objectives: tuple[Objective, ...]
    sort: Objective | None

    def on_front(self, row: dict[str, Any]) -> bool:
        return int(row["point"]) in self.front

    def cells(self, row: dict[str, Any]) -> list[str]:
        """The row as text: the front mark, then a cell per column."""
        mark = FRONT_MARK if self.on_front(row) else ""
        return [mark, *(_cell(row, column) for column in self.columns)]

    @property
    def kept_note(self) -> str | None:
        """Where the kept traces are, by point (relative to the working folder when inside it)."""
        kept = [(row["point"], row["kept_trace"]) for row in self.rows if row.get("kept_trace")]
        if not kept:
            return None
        listed = ", ".join(f"point {p} {shown_path(str(t))}" for p, t in sorted(kept)[:MAX_KEPT])
        more = f" and {len(kept) - MAX_KEPT} more" if len(kept) > MAX_KEPT else ""
        return f"kept traces: {listed}{more}"

    @property
    def front_note(self) -> str:
        objectives = ", ".join(objective.spelled for objective in self.front_objectives)
        count = f"{len(self.front)} of {len(self.rows)} points"
        return f"{FRONT_MARK} Pareto front of {objectives}: {count}"

    @property
    def order_note(self) -> str:
        if self.sort is None:
            return "points in grid order"
        return f"points sorted by {self.sort.spelled}, best first ({self.sort.better})"


def sweep_table(
    result: SweepResult, sort: str | None = None, front: str | None = None
) -> SweepTable:
    """The table for `--sort OBJECTIVE` and `--pareto OBJECTIVES` (default `DEFAULT_FRONT`)."""
    columns = result.numeric_columns
    sort_objective = _sort_objective(sort, columns) if sort else None
    front_objectives = parse_objectives(front or DEFAULT_FRONT, columns)
    rows = result.points
    on_front = pareto_front(rows, front_objectives)
    order = ranked(rows, sort_objective) if sort_objective else range(len(rows))
    return SweepTable(
        result=result,
        columns=_shown_columns(result, [sort_objective, *front_objectives]),
        rows=tuple(rows[i] for i in order),
        front=frozenset(int(rows[i]["point"]) for i in on_front),
        front_objectives=front_objectives,
        sort=sort_objective,
    )


def _sort_objective(sort: str, columns: Sequence[str]) -> Objective:
    objectives = parse_objectives(sort, columns)
    if len(objectives) != 1:
        raise SweepError(f"--sort {sort!r}: one objective, e.g. min:ttft_p99_steps")
    return objectives[0]


def _shown_columns(result: SweepResult, objectives: Sequence[Objective | None]) -> tuple[str, ...]:
    wanted = ["point", *result.knobs]
    wanted += [o.column for o in objectives if o is not None]
    wanted += SHOWN_METRICS
    if result.fit_ok:
        wanted += SECONDS_METRICS
    present = [column for column in wanted if column in result.columns]
    if any(row.get("kept_trace") for row in result.points):
        present.append(KEPT)
    return tuple(dict.fromkeys(present))


def _cell(row: dict[str, Any], column: str) -> str:
    if column == KEPT:
        return "yes" if row.get("kept_trace") else ""
    return format_value(row[column])


def shown_path(path: str) -> str:
    """`path` relative to the working folder when it lies inside it, else as it is."""
    with contextlib.suppress(ValueError):
        return str(Path(path).relative_to(Path.cwd()))
    return path


def format_value(value: Any) -> str:
    """A cell: integers as they are, other numbers to four significant digits, NULL as `—`."""
    if value is None:
        return "—"
    if isinstance(value, float):
        if value != value:
            return "—"
        return f"{value:.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return str(value)
