"""`stepscope sweep`: a trace's arrivals replayed under a grid of knobs, one what-if per point."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pyarrow as pa
import typer

from stepscope.engine import InputError, Scheduler
from stepscope.inputs import load_scheduler_class, parse_knob
from stepscope.output_paths import cannot_write, check_outputs, data_file, new_file
from stepscope.replay.from_step import StepWindow
from stepscope.replay.sweep.grid import SweepGrid, build_grid, value_text
from stepscope.replay.sweep.metrics import METRIC_TYPES, SECONDS_METRICS
from stepscope.replay.sweep.point import point_trace_name
from stepscope.replay.sweep.pool import default_jobs
from stepscope.replay.sweep.ray_tasks import require_ray
from stepscope.replay.sweep.result_writer import kept_folder
from stepscope.replay.sweep.run import SweepPlan, fit_problem, run_sweep, trace_facts
from stepscope.run_printout import run_console
from stepscope.schema.trace import check_readable
from stepscope.stop_signals import stops_like_ctrl_c
from stepscope.tracer.export import ExportError

from .options import ForceOption, FromStepOption, ToStepOption, step_window
from .sweep_output import PointProgress, print_summary, print_written
from .sweep_view_hook import (
    ParetoOption,
    PlotOption,
    PlotOutOption,
    ShowOption,
    SortOption,
    ViewRequest,
    check_view,
    render,
    view_available,
)

TraceArgument = Annotated[
    Path | None,
    typer.Argument(help="A recorded trace (a file or a recording folder).", show_default=False),
]
GridOption = Annotated[
    list[str] | None,
    typer.Option(
        "--grid",
        metavar="KNOB=V1,V2,...",
        help="A knob and the values to sweep (each read as --set reads it); repeatable, "
        "every combination is a point, the last --grid varying fastest.",
    ),
]
OutputOption = Annotated[
    Path | None,
    typer.Option("-o", "--output", help="The result: a DuckDB file (sweep_meta, sweep_points)."),
]
ParquetOption = Annotated[
    Path | None, typer.Option("--parquet", help="Also write sweep_points as Parquet here.")
]
JobsOption = Annotated[
    int | None, typer.Option("--jobs", min=1, help="Worker processes (default: the cores).")
]
KeepOption = Annotated[
    str | None,
    typer.Option("--keep", metavar="POINTS", help="Keep these points' traces: 0,3 or all."),
]
RayOption = Annotated[
    str | None,
    typer.Option(
        "--ray",
        metavar="ADDRESS",
        help="Run the points as Ray tasks: a cluster's address, auto, or local "
        "(needs stepscope\\[ray]).",
    ),
]
SchedulerOption = Annotated[
    str | None,
    typer.Option("--scheduler", metavar="module:Class", help="A Scheduler subclass."),
]


@stops_like_ctrl_c
def sweep(
    trace: TraceArgument = None,
    grid: GridOption = None,
    output: OutputOption = None,
    parquet: ParquetOption = None,
    scheduler: SchedulerOption = None,
    jobs: JobsOption = None,
    keep: KeepOption = None,
    ray: RayOption = None,
    sort: SortOption = None,
    plot: PlotOption = None,
    plot_out: PlotOutOption = None,
    pareto: ParetoOption = None,
    show: ShowOption = None,
    from_step: FromStepOption = None,
    to_step: ToStepOption = None,
    *,
    force: ForceOption = False,
) -> None:
    """Replay a trace's arrivals under every combination of knob values (a what-if per
    point, the same as `stepscope replay TRACE --set ...`) in parallel, and write each
    point's steps to drain, preemptions, TTFT/TPOT, KV usage and throughput as one row of
    sweep_points in the -o DuckDB file. With --from-step/--to-step every point starts from
    the recorded state at --from-step and its figures are the window's. Every output is
    checked before the first point: -o must not exist; --parquet and --plot-out replace a
    file only with --force."""
    view = ViewRequest(sort, plot, plot_out, pareto)
    window = step_window(from_step, to_step)
    plot_file = data_file("--plot-out", plot_out, "the plot (the table goes to stdout)")
    if show is not None:
        if trace is not None or grid or output is not None or not window.whole:
            raise InputError(
                "--show reads a result written before: no TRACE, --grid, -o or step window"
            )
        check_view(view, None)
        check_outputs([plot_file], [show], force=force)
        render(show, view)
        return
    if trace is None or not grid or output is None:
        raise InputError("expected TRACE --grid KNOB=V1,V2,... -o SWEEP.duckdb (or --show)")
    check_view(view, None)
    result_file = new_file("-o", output, "a sweep result (a DuckDB file)")
    copy = data_file("--parquet", parquet, "a Parquet file")
    check_outputs([result_file, copy, plot_file], [trace], force=force)
    _check_runner(jobs, ray)
    check_readable(trace)
    scheduler_cls = load_scheduler_class(scheduler) if scheduler else None
    plan = _plan(trace, window, parse_grid(grid), scheduler_cls, keep, jobs, ray)
    check_view(view, numeric_columns(plan))
    _check_kept(output, plan.keep)
    progress = PointProgress(f"sweep {trace.name}", len(plan.grid.points))
    with progress:
        outcome = run_sweep(plan, output, parquet, progress.on_point)
    problem = fit_problem(plan.facts)
    if view.asked or view_available():
        _render_written(output, view)
        print_written(run_console(), outcome, output, parquet)
    else:
        print_summary(run_console(), outcome, output, parquet, problem)


def _plan(
    trace: Path,
    window: StepWindow,
    values: dict[str, list[Any]],
    scheduler_cls: type[Scheduler] | None,
    keep: str | None,
    jobs: int | None,
    ray: str | None,
) -> SweepPlan:
    """The trace read, the grid checked on its config, the points to keep."""
    facts = trace_facts(trace, window)
    grid = build_grid(facts.config, values)
    keep_set = parse_keep(keep, grid)
    return SweepPlan(facts, grid, scheduler_cls, keep_set, jobs or default_jobs(), ray)


def numeric_columns(plan: SweepPlan) -> list[str]:
    """The result's columns an objective can name: numeric knobs, metrics (seconds if fit)."""
    knobs = [n for n, t in plan.grid.column_types().items() if pa.types.is_integer(t)
             or pa.types.is_floating(t)]  # fmt: skip
    seconds = fit_problem(plan.facts) is None
    metrics = [name for name in METRIC_TYPES if seconds or name not in SECONDS_METRICS]
    return [*knobs, *metrics]


def _check_runner(jobs: int | None, ray: str | None) -> None:
    if ray is None:
        return
    if jobs is not None:
        raise InputError("--jobs and --ray: Ray places the tasks; give one of them")
    require_ray()


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


def _render_written(output: Path, view: ViewRequest) -> None:
    """The view of the result just written; a plot that cannot be written keeps the result."""
    if view.plot_out is None:
        render(output, view)
        return
    try:
        render(output, view)
    except (OSError, ExportError) as error:
        raise cannot_write("--plot-out", view.plot_out, error, kept_in=output) from None


def _check_kept(output: Path, keep: frozenset[int]) -> None:
    folder = kept_folder(output)
    if keep and folder.exists() and not folder.is_dir():
        raise InputError(f"--keep: {folder} (where kept traces go) exists and is not a folder")
    taken = [path for path in (folder / point_trace_name(i) for i in keep) if path.exists()]
    if taken:
        raise InputError(f"{taken[0]}: already exists (a kept trace of --keep)")
