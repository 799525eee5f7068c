"""`stepscope sweep`'s questions to the sweep view: rank, mark the Pareto front, plot.

The view (`stepscope.replay.sweep.view.render_sweep`) reads a written result; this module
checks the options against the columns the result will have before any replay starts, so
a typo in an objective costs a moment, not a sweep.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Annotated

import typer

from stepscope.engine import InputError

VIEW_MODULE = "stepscope.replay.sweep.view"
"""`render_sweep(result, objective, plot, out, *, pareto)`: the table ranked, the front, a plot."""
OBJECTIVES_MODULE = "stepscope.replay.sweep.pareto"
"""`parse_objective(text, columns)` and `parse_objectives(text, columns)`."""

OBJECTIVE_HELP = "\\[min:|max:]COLUMN of sweep_points"
SortOption = Annotated[
    str | None,
    typer.Option("--sort", metavar="OBJECTIVE", help=f"Rank the points: {OBJECTIVE_HELP}."),
]
PlotOption = Annotated[
    str | None,
    typer.Option(
        "--plot",
        metavar="X:Y",
        help="Plot two objectives, their Pareto front marked, e.g. ttft_p99_steps:tokens_per_step.",
    ),
]
PlotOutOption = Annotated[
    Path | None, typer.Option("--plot-out", metavar="FILE.svg", help="Write --plot as SVG.")
]
ParetoOption = Annotated[
    str | None,
    typer.Option("--pareto", metavar="A:B[:...]", help="The objectives of the front marked."),
]
ShowOption = Annotated[
    Path | None,
    typer.Option(
        "--show",
        metavar="SWEEP.duckdb",
        help="Answer --sort/--pareto/--plot from a result written before (no TRACE, --grid).",
    ),
]


@dataclass(frozen=True)
class ViewRequest:
    sort: str | None
    plot: str | None
    plot_out: Path | None
    pareto: str | None

    @property
    def asked(self) -> bool:
        return any(v is not None for v in (self.sort, self.plot, self.plot_out, self.pareto))


def check_view(request: ViewRequest, numeric_columns: Sequence[str] | None) -> None:
    """InputError now for what the view would refuse after the sweep (None: columns unknown)."""
    if not request.asked:
        return
    if request.plot_out is not None and request.plot is None:
        raise InputError("--plot-out needs --plot X:Y")
    view = _module(VIEW_MODULE)
    out = request.plot_out
    if out is not None and out != Path("-") and out.suffix.lower() not in view.PLOT_SUFFIXES:
        raise InputError(f"--plot-out {out}: the plot is written as SVG; name the file *.svg")
    if numeric_columns is None:
        return
    objectives = _module(OBJECTIVES_MODULE)
    if request.sort is not None:
        objectives.parse_objective(request.sort, numeric_columns)
    for text in (request.plot, request.pareto):
        if text is not None:
            objectives.parse_objectives(text, numeric_columns)


def view_available() -> bool:
    """Whether the sweep view is installed: it then draws the table after every sweep."""
    return importlib.util.find_spec(VIEW_MODULE) is not None


def render(result: Path, request: ViewRequest) -> None:
    """The sweep view's answer, printed (and the plot written when asked)."""
    view = _module(VIEW_MODULE)
    view.render_sweep(result, request.sort, request.plot, request.plot_out, pareto=request.pareto)


def _module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise InputError(
            f"--sort/--pareto/--plot/--show: this stepscope lacks the sweep view ({name})"
        ) from None
