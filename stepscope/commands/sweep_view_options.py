"""The sweep view's options of `stepscope sweep`: objectives to sort and plot by, the Pareto
front's, and `--show` to answer them from a result written before, with no replay."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from stepscope.replay.sweep_view import render_sweep

OBJECTIVE_HELP = (
    "[min:|max:]COLUMN of sweep_points; a bare column is minimized except tokens_per_step "
    "and num_finished"
)

SortOption = Annotated[
    str | None,
    typer.Option(
        "--sort", metavar="OBJECTIVE", help=f"Rank the points, best first: {OBJECTIVE_HELP}."
    ),
]
PlotOption = Annotated[
    str | None,
    typer.Option(
        "--plot",
        metavar="X:Y",
        help="Plot two objectives against each other, their Pareto front marked (in the "
        "terminal, or into --plot-out), e.g. ttft_p99_steps:tokens_per_step.",
    ),
]
PlotOutOption = Annotated[
    Path | None, typer.Option("--plot-out", metavar="FILE.svg", help="Write --plot as SVG.")
]
ParetoOption = Annotated[
    str | None,
    typer.Option(
        "--pareto",
        metavar="A:B[:...]",
        help="The objectives of the Pareto front the table marks (default: --plot's, else "
        f"ttft_p99_steps:tokens_per_step); each {OBJECTIVE_HELP}.",
    ),
]
ShowOption = Annotated[
    Path | None,
    typer.Option(
        "--show",
        metavar="SWEEP.duckdb",
        help="Answer --sort/--pareto/--plot from a result written before (no replay, no "
        "TRACE or --grid).",
    ),
]


def show_sweep(
    result: Path,
    sort: str | None,
    plot: str | None,
    plot_out: Path | None,
    pareto: str | None = None,
) -> None:
    """Print a written result's points ranked and marked, and its plot."""
    render_sweep(result, sort, plot, plot_out, pareto=pareto)
