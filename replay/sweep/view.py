"""Answering questions from a sweep result: its points ranked, the Pareto front marked, a plot.

`render_sweep` is what `stepscope sweep --sort/--pareto/--plot` calls, on a fresh result
or on one written before (`--show`).
"""

from __future__ import annotations

import re
from pathlib import Path

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from stepscope.safe_text import safe_text

from .pareto import parse_objectives
from .plot import scatter
from .result_reader import SweepError, SweepResult, read_sweep
from .svg_plot import write_svg
from .table import SweepTable, shown_path, sweep_table
from .text_plot import text_plot

PLOT_SUFFIXES = (".svg",)
TERMINAL_PLOT_HEIGHT = 16


def render_sweep(
    result_path: Path,
    objective: str | None,
    plot: str | None,
    out: Path | None,
    *,
    pareto: str | None = None,
    console: Console | None = None,
) -> SweepTable:
    """Print the points sorted by `objective` with the front of `pareto` (else the plot's
    axes) marked; plot `X:Y` in the terminal, or into `out` (an `.svg` file)."""
    console = console or Console()
    if out is not None and plot is None:
        raise SweepError("--plot-out needs --plot X:Y (the two objectives to draw)")
    if out is not None and out.suffix.lower() not in PLOT_SUFFIXES:
        raise SweepError(f"{out}: the plot is written as SVG; name the file *.svg")
    result = read_sweep(result_path)
    table = sweep_table(result, objective, pareto or plot)
    for line in describe(result):
        console.print(safe_text(line), markup=False, highlight=False)
    console.print(rich_table(table))
    for note in (table.front_note, table.order_note, table.kept_note):
        if note is not None:
            console.print(safe_text(note), markup=False, highlight=False)
    if plot is not None:
        drawn = scatter(result, parse_objectives(plot, result.numeric_columns))
        if out is None:
            console.print(text_plot(drawn, console.width - 1, TERMINAL_PLOT_HEIGHT))
        else:
            title = f"{result.trace.name}: {drawn.y.column} against {drawn.x.column}"
            write_svg(drawn, title, out)
            console.print(f"plot written to {safe_text(str(out))}", markup=False, highlight=False)
    return table


def describe(result: SweepResult) -> tuple[str, str]:
    """The trace, the grid and the scheduler; what the step-time fit allows."""
    grid = " × ".join(
        f"{knob} ({', '.join(map(str, values))})" for knob, values in result.grid().items()
    )
    scheduler = result.meta.get("scheduler", "?")
    trace = shown_path(result.meta.get("trace", "?"))
    if result.windowed:
        first, last = result.meta.get("from_step") or "0", result.meta.get("to_step") or "end"
        trace = f"{trace} steps {first}..{last}"
    return (
        f"sweep of {trace}: {len(result.points)} points over {grid}; scheduler {scheduler}",
        result.fit_note,
    )


def rich_table(table: SweepTable) -> Table:
    """The table as rich draws it: the front mark first, numbers right-aligned."""
    shown = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    shown.add_column("", no_wrap=True, min_width=1)
    numeric = set(table.result.numeric_columns) | {"point"}
    body = [table.cells(row) for row in table.rows]
    for index, column in enumerate(table.columns, start=1):
        widest = max((len(cells[index]) for cells in body), default=0)
        justify: JustifyMethod = "right" if column in numeric else "left"
        heading = Text(wrap_name(safe_text(column), widest))
        shown.add_column(heading, justify=justify, no_wrap=True)
    for row, cells in zip(table.rows, body, strict=True):
        style = "bold yellow" if table.on_front(row) else None
        shown.add_row(*(Text(safe_text(cell)) for cell in cells), style=style)
    return shown


def wrap_name(name: str, widest_cell: int, narrowest: int = 8) -> str:
    """A column name broken after its underscores into lines no wider than its cells need."""
    width = max(widest_cell, narrowest)
    lines = [""]
    for part in re.findall(r"[^_]+_?|_", name):
        if lines[-1] and len(lines[-1]) + len(part.rstrip("_")) > width:
            lines.append("")
        lines[-1] += part
    if len(lines) > 1 and len(lines[-1]) <= 2:
        tail = lines.pop()
        lines[-1] += tail
    return "\n".join(lines)
