"""What `stepscope sweep` shows: a line per finished point on a terminal, then the points table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from stepscope.progress import StepProgress
from stepscope.replay.sweep.grid import SweepPoint
from stepscope.replay.sweep.point import PointResult
from stepscope.replay.sweep.result_reader import seconds_problem
from stepscope.replay.sweep.run import SweepOutcome
from stepscope.safe_text import safe_text

SUMMARY_METRICS = {
    "num_steps": "steps",
    "num_preemptions": "preempt-\nions",
    "recomputed_tokens": "recom-\nputed",
    "ttft_p99_steps": "TTFT\np99",
    "tpot_p99_steps": "TPOT\np99",
    "ttft_p99_s": "TTFT\np99 s",
    "tpot_p99_s": "TPOT\np99 s",
    "kv_usage_max": "KV\nmax",
    "tokens_per_step": "tokens\n/step",
}
"""The table's metric columns and their headings (all of them are in the result file)."""


class PointProgress(StepProgress):
    """Points done of the grid, and a line per point as it finishes; silent off a terminal."""

    def __init__(self, description: str, num_points: int, console: Console | None = None):
        self.console = console or Console(stderr=True)
        super().__init__(self.console, unit="points")
        self.start(description, num_points)
        self.num_points = num_points

    def on_point(self, point: SweepPoint, result: PointResult) -> None:
        self.progress.advance(self.task)
        if self.console.is_terminal:
            metrics = result.metrics
            self.progress.console.print(
                f"point {point.index}/{self.num_points - 1} {escape(safe_text(point.label))}: "
                f"{metrics['num_steps']} steps, {metrics['num_preemptions']} preemptions",
                highlight=False,
            )


def print_summary(
    console: Console,
    outcome: SweepOutcome,
    output: Path,
    parquet: Path | None,
    fit_problem: str | None,
) -> None:
    """The points table, where the result went, and why seconds are missing if they are."""
    console.print(_table(outcome, seconds=fit_problem is None))
    print_written(console, outcome, output, parquet)
    if fit_problem is not None:
        windowed = bool(outcome.meta["from_step"] or outcome.meta["to_step"])
        why = seconds_problem(safe_text(fit_problem), windowed=windowed)
        console.print(f"[yellow]no modelled seconds:[/] {escape(why)}", highlight=False)


def print_written(
    console: Console, outcome: SweepOutcome, output: Path, parquet: Path | None
) -> None:
    """Where the result (and the kept traces) went."""
    written = f"{outcome.points.num_rows} points written to {output}"
    if parquet is not None:
        written += f" and {parquet}"
    if outcome.kept:
        written += f"; kept traces in {next(iter(outcome.kept.values())).parent}"
    console.print(escape(safe_text(written)), highlight=False, soft_wrap=True)


def _table(outcome: SweepOutcome, *, seconds: bool) -> Table:
    knobs = [name for name in outcome.points.column_names if name in _knob_names(outcome)]
    metrics = {k: v for k, v in SUMMARY_METRICS.items() if seconds or not k.endswith("_s")}
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False, show_edge=False)
    headings = ["point", *(name.replace("_", "_\n") for name in knobs), *metrics.values()]
    for heading in headings:
        width = max(len(line) for line in heading.split("\n"))
        table.add_column(escape(heading), justify="right", no_wrap=True, min_width=width)
    for row in outcome.points.select(["point", *knobs, *metrics]).to_pylist():
        table.add_row(*(escape(safe_text(_cell(value))) for value in row.values()))
    return table


def _knob_names(outcome: SweepOutcome) -> set[str]:
    return set(json.loads(outcome.meta["grid"] or "{}"))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1 else f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)
