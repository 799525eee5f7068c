"""`stepscope sql`: ask traces a question in SQL, or list the views that answer common ones."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from stepscope.engine import InputError
from stepscope.safe_text import safe_text
from stepscope.schema import Trace, open_trace
from stepscope.schema.trace_set import SetTrace, TraceSet, open_traces
from stepscope.sql_output import as_text, write_csv, write_json_lines


def sql(
    arguments: Annotated[
        list[str],
        typer.Argument(
            metavar="PATH... [QUERY]",
            help="Traces, folders of traces or Parquet export folders, then a SQL query. "
            "Without a query, the views are listed. Given a folder or several traces, every "
            "view and table has `trace` and `rank` (the data-parallel rank) as its first columns.",
            show_default=False,
        ),
    ],
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="JSON lines, one object per row (NaN/Infinity as null, intervals as ISO 8601 "
            "durations, BLOBs as base64).",
        ),
    ] = False,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="CSV with a header row, as DuckDB's COPY writes it.")
    ] = False,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="Most rows shown in the table view.")
    ] = 200,
    vertical: Annotated[
        bool,
        typer.Option(
            "-x", "--vertical", help="One 'column: value' block per row (auto when wide)."
        ),
    ] = False,
) -> None:
    """Run a read-only SQL query against traces (tables and views: see `stepscope sql PATH`)."""
    if as_json and as_csv:
        raise InputError("--json and --csv: choose one output format")
    paths, query = _paths_and_query(arguments)
    with _open(paths) as opened:
        if query is None:
            _print_views(Console(), opened.views())
            if isinstance(opened, TraceSet):
                _print_traces(Console(), opened.traces)
            return
        relation = opened.sql(query)
        columns = relation.columns
        rows = (as_text(relation) if as_csv else relation).fetchall()
    if as_json:
        write_json_lines(sys.stdout, columns, rows)
    elif as_csv:
        write_csv(sys.stdout, columns, rows)
    else:
        _print_rows(Console(), columns, rows, limit, vertical)


def _paths_and_query(arguments: list[str]) -> tuple[list[Path], str | None]:
    """The paths, and the query: the last argument, unless it is one of the paths."""
    *paths, last = arguments
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


def _open(paths: list[Path]) -> Trace | TraceSet:
    """One trace file given alone reads as ever; anything more is a set, `trace` column first."""
    if len(paths) == 1 and not paths[0].is_dir():
        return open_trace(paths[0])
    return open_traces(paths)


def _print_views(console: Console, views: list[Any]) -> None:
    table = Table(title="views (query them like tables)", title_justify="left", box=None)
    table.add_column("view", style="bold cyan", no_wrap=True)
    table.add_column("answers")
    for view in views:
        table.add_row(view.name, view.description)
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


def _print_rows(
    console: Console, columns: list[str], rows: list[tuple[Any, ...]], limit: int, vertical: bool
) -> None:
    shown = rows[:limit]
    if vertical or _natural_width(columns, shown) > console.width:
        _print_vertical(console, columns, shown)
    else:
        table = Table(header_style="bold", pad_edge=False)
        for column in columns:
            table.add_column(column, no_wrap=True)
        for row in shown:
            table.add_row(*(_cell(value) for value in row))
        console.print(table)
    more = f", showing {limit} (--limit, --csv or --json for all)" if len(rows) > limit else ""
    console.print(f"[dim]{len(rows)} rows{more}[/]")


def _print_vertical(console: Console, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """psql's expanded display: each row as a block of `column | value` lines."""
    width = max(map(len, columns), default=0)
    for number, row in enumerate(rows, 1):
        console.print(f"[bold]-[ row {number} ]-[/]")
        for column, value in zip(columns, row, strict=True):
            line = Text(column.ljust(width) + " | ", style="cyan")
            line.append_text(_cell(value))
            console.print(line)


def _natural_width(columns: list[str], rows: list[tuple[Any, ...]]) -> int:
    """Width of a one-line-per-row table: the widest cell of each column, plus borders."""
    widths = [len(column) for column in columns]
    for row in rows:
        for index, value in enumerate(row):
            widths[index] = max(widths[index], len(_cell(value).plain))
    return sum(widths) + 3 * len(widths) + 1


def _cell(value: Any) -> Text:
    if value is None:
        return Text("NULL", style="dim")
    return Text(safe_text(str(value)))
