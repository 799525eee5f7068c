"""`stepscope sweep`: a trace's arrivals replayed under a grid of knobs, one what-if per point."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from stepscope.engine import InputError
from stepscope.inputs import load_scheduler_class, parse_knob
from stepscope.replay.sweep import SweepPlan, fit_problem, run_sweep, trace_facts
from stepscope.replay.sweep_grid import SweepGrid, build_grid, value_text
from stepscope.replay.sweep_point import point_trace_name
from stepscope.replay.sweep_pool import default_jobs
from stepscope.replay.sweep_ray import require_ray
from stepscope.replay.sweep_result import kept_folder
from stepscope.run_view import run_console
from stepscope.schema.trace import check_readable

from .sweep_output import PointProgress, print_summary

VIEW_MODULE = "stepscope.replay.sweep_view"
"""The sweep view's module: `render_sweep(result, objective, plot, out)` sorts, marks, plots."""


def sweep(
    trace: Annotated[Path, typer.Argument(help="A recorded trace.")],
    grid: Annotated[
        list[str],
        typer.Option(
            "--grid",
            metavar="KNOB=V1,V2,...",
            help="A knob and the values to sweep (each read as --set reads it); repeatable, "
            "every combination is a point, the last --grid varying fastest.",
        ),
    ],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The result: a DuckDB file (sweep_points).")
    ],
    parquet: Annotated[
        Path | None, typer.Option("--parquet", help="Also write sweep_points as Parquet here.")
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", metavar="module:Class", help="A Scheduler subclass."),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", min=1, help="Worker processes (default: the cores)."),
    ] = None,
    keep: Annotated[
        str | None,
        typer.Option(
            "--keep", metavar="POINTS", help="Keep these points' traces, e.g. 0,3 (or all)."
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Run the points as Ray tasks: a cluster's address, auto, or local "
            "(needs stepscope[ray]).",
        ),
    ] = None,
    sort: Annotated[
        str | None, typer.Option("--sort", metavar="METRIC", help="Sort the table by a metric.")
    ] = None,
    plot: Annotated[
        str | None, typer.Option("--plot", metavar="X:Y", help="Plot one metric against another.")
    ] = None,
    plot_out: Annotated[
        Path | None, typer.Option("--plot-out", help="Write the plot to a PNG or SVG file.")
    ] = None,
) -> None:
    """Replay a trace's arrivals under every combination of knob values (a what-if per
    point, the same as `stepscope replay TRACE --set ...`) in parallel, and write each
    point's steps to drain, preemptions, TTFT/TPOT, KV usage and throughput as one row of
    sweep_points in the -o DuckDB file."""
    render = _view(sort, plot, plot_out)
    _check_targets(output, parquet)
    if ray is not None:
        if jobs is not None:
            raise InputError("--jobs and --ray: Ray places the tasks; give one of them")
        require_ray()
    check_readable(trace)
    scheduler_cls = load_scheduler_class(scheduler) if scheduler else None
    values = parse_grid(grid)
    facts = trace_facts(trace)
    points = build_grid(facts.config, values)
    keep_set = parse_keep(keep, points)
    _check_kept(output, keep_set)
    plan = SweepPlan(facts, points, scheduler_cls, keep_set, jobs or default_jobs(), ray)
    with PointProgress(f"sweep {trace.name}", len(points.points)) as progress:
        outcome = run_sweep(plan, output, parquet, progress.on_point)
    if render is None:
        print_summary(run_console(), outcome, output, parquet, fit_problem(facts.cost_model))
    else:
        render(output, sort, plot, plot_out)


def parse_grid(texts: list[str]) -> dict[str, list[Any]]:
    """`KNOB=V1,V2,...` per option: each value parsed as `--set KNOB=V` parses it."""
    values: dict[str, list[Any]] = {}
    for text in texts:
        name, sep, raw = text.partition("=")
        name = name.strip()
        if not sep or not name or not raw:
            raise InputError(f"--grid {text!r}: expected KNOB=V1,V2,...")
        if name in values:
            raise InputError(f"--grid {name}: given twice (list all its values in one --grid)")
        parsed = [parse_knob(f"{name}={item}")[1] for item in _items(name, raw)]
        repeated = [value_text(v) for i, v in enumerate(parsed) if v in parsed[:i]]
        if repeated:
            raise InputError(f"--grid {name}: value {repeated[0]} is given twice")
        values[name] = parsed
    return values


def parse_keep(text: str | None, grid: SweepGrid) -> frozenset[int]:
    """`--keep 0,3` (or `all`): points by number, each one of the grid's."""
    count = len(grid.points)
    if text is None:
        return frozenset()
    if text.strip() == "all":
        return frozenset(range(count))
    chosen = set()
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= count:
            raise InputError(f"--keep {item!r}: not a point of this grid (0 to {count - 1})")
        chosen.add(int(item))
    return frozenset(chosen)


def _items(name: str, raw: str) -> list[str]:
    items = [item.strip() for item in raw.split(",")]
    if not all(items):
        raise InputError(f"--grid {name}={raw}: an empty value (values are comma-separated)")
    return items


def _check_targets(output: Path, parquet: Path | None) -> None:
    for option, path in (("-o", output), ("--parquet", parquet)):
        if path is None:
            continue
        if path.exists():
            raise InputError(f"{path}: already exists (remove it or choose another {option})")
        if not path.parent.is_dir():
            raise InputError(f"{path}: no such folder {path.parent}")
    if parquet is not None and parquet.resolve() == output.resolve():
        raise InputError(f"--parquet {parquet}: the same file as -o")


def _check_kept(output: Path, keep: frozenset[int]) -> None:
    folder = kept_folder(output)
    taken = [path for path in (folder / point_trace_name(i) for i in keep) if path.exists()]
    if taken:
        raise InputError(f"{taken[0]}: already exists (a kept trace of --keep)")


def _view(
    sort: str | None, plot: str | None, plot_out: Path | None
) -> Callable[[Path, str | None, str | None, Path | None], None] | None:
    """The sweep view's renderer when sorting or plotting is asked for, before any work."""
    if sort is None and plot is None and plot_out is None:
        return None
    if plot_out is not None and plot is None:
        raise InputError("--plot-out needs --plot X:Y")
    try:
        module = importlib.import_module(VIEW_MODULE)
    except ImportError:
        raise InputError(
            f"--sort/--plot: this stepscope lacks the sweep view ({VIEW_MODULE})"
        ) from None
    render: Callable[[Path, str | None, str | None, Path | None], None] = module.render_sweep
    return render
