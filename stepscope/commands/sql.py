"""`stepscope sql`: ask traces a question in SQL, or list the views that answer common ones."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from stepscope.closed_pipe import reader_gone
from stepscope.engine import InputError
from stepscope.interrupted import ctrl_c_is_one_line
from stepscope.safe_text import safe_text
from stepscope.schema import QueryRows, Trace, ViewInfo, open_trace
from stepscope.schema.recording_layout import is_recording
from stepscope.schema.step_window import StepWindow
from stepscope.schema.trace_set import SetTrace, TraceSet, open_traces
from stepscope.sql_output import as_text, csv_header, csv_lines, escaped, json_lines
from stepscope.sql_table import print_table

from .options import ReadFromStepOption, ReadToStepOption, step_window

BATCH_ROWS = 10_000
"""Rows read, and written, at a time by `--csv` and `--json`."""


def sql(
    arguments: Annotated[
        list[str],
        typer.Argument(
            metavar="PATH... [QUERY]",
            help="Traces (files or recording folders), folders of traces or Parquet export "
            "folders, then a SQL query. Without a query, the views are listed. Given a folder "
            "of traces or several traces, every view and table has `trace` and `rank` (the "
            "data-parallel rank) as its first columns.",
            show_default=False,
        ),
    ],
    *,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="JSON lines, one object per row (NaN/Infinity as null, intervals as ISO 8601 "
            "durations, BLOBs as base64).",
        ),
    ] = False,
    as_csv: Annotated[
        bool,
        typer.Option(
            "--csv",
            help="CSV with a header row, as DuckDB's COPY writes it (on a terminal, control "
            "characters written as escapes).",
        ),
    ] = False,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            min=1,
            help="Most rows shown in the table view; the rest are counted, up to a million.",
        ),
    ] = 200,
    vertical: Annotated[
        bool,
        typer.Option(
            "-x", "--vertical", help="One 'column: value' block per row (auto when wide)."
        ),
    ] = False,
    from_step: ReadFromStepOption = None,
    to_step: ReadToStepOption = None,
) -> None:
    """Run a read-only SQL query against traces (tables and views: see `stepscope sql PATH`).

    --from-step/--to-step read a window of steps: each table and view answers as if the
    trace held those steps only (of a set: each trace's steps in the window)."""
    if as_json and as_csv:
        raise InputError("--json and --csv: choose one output format")
    window = step_window(from_step, to_step)
    paths, query = _paths_and_query(arguments)
    with ctrl_c_is_one_line() as ctrl_c, _open(paths, window) as opened:
        ctrl_c.interrupts(opened.interrupt)
        if query is None:
            _print_views(Console(), opened.views())
            if isinstance(opened, TraceSet):
                _print_traces(Console(), opened.traces)
            return
        relation = opened.sql(query)
        if as_csv:
            _write_csv(relation.columns, opened.rows(as_text(relation)))
        elif as_json:
            _write_json(opened.rows(relation))
        else:
            print_table(Console(), opened.rows(relation), limit, vertical=vertical)


def _write_csv(columns: list[str], rows: QueryRows) -> None:
    """CSV a batch at a time; on a terminal every control character is written as its escape."""
    on_terminal = sys.stdout.isatty()
    if on_terminal:
        columns = [safe_text(column) for column in columns]
    batches = rows.batches(BATCH_ROWS)
    first = next(batches, [])  # a query that fails, fails before the header is written
    sys.stdout.write(csv_header(columns))
    for batch in itertools.chain([first], batches):
        sys.stdout.write(csv_lines(escaped(batch) if on_terminal else batch))
        if reader_gone(sys.stdout):
            return


def _write_json(rows: QueryRows) -> None:
    for batch in rows.batches(BATCH_ROWS):
        sys.stdout.write(json_lines(rows.columns, batch))
        if reader_gone(sys.stdout):
            return


def _paths_and_query(arguments: list[str]) -> tuple[list[Path], str | None]:
    """The paths, and the query: the last argument, unless it is one of the paths."""
    *paths, last = arguments
    if paths and not last.strip():
        raise InputError(
            "the query is empty: give a query after the traces, or none to list the views"
        )
    if not paths or _exists(last):
        return [Path(a) for a in arguments], None
    if not any(c.isspace() for c in last) and (last.endswith(".duckdb") or "/" in last):
        raise InputError(f"{last}: no such file or folder")
    return [Path(p) for p in paths], last


def _exists(text: str) -> bool:
    """Whether `text` names a file or folder (a query is never one, however long)."""
    try:
        return Path(text).exists()
    except (OSError, ValueError):
        return False


def _open(paths: list[Path], window: StepWindow) -> Trace | TraceSet:
    """One trace (a file or a recording folder) given alone reads as ever; anything more is
    a set, `trace` column first."""
    if len(paths) == 1 and (is_recording(paths[0]) or not paths[0].is_dir()):
        return open_trace(paths[0], window)
    return open_traces(paths, window)


def _print_views(console: Console, views: list[ViewInfo]) -> None:
    table = Table(title="views (query them like tables)", title_justify="left", box=None)
    table.add_column("view", style="bold cyan", no_wrap=True)
    table.add_column("answers")
    for view in views:
        table.add_row(Text(view.name), Text(view.description))
    console.print(table)


def _print_traces(console: Console, traces: tuple[SetTrace, ...]) -> None:
    table = Table(title="traces (the trace column)", title_justify="left", box=None)
    for column in ("trace", "rank", "engine", "read from"):
        table.add_column(column, style="bold cyan" if column == "trace" else None)
    for trace in traces:
        rank = "" if trace.rank is None else str(trace.rank)
        where = f"{trace.path} (Parquet)" if trace.in_export else str(trace.path)
        table.add_row(
            *(Text(safe_text(v)) for v in (trace.name, rank, trace.meta.get("engine", ""), where))
        )
    console.print(table)
