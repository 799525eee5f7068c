"""`stepscope sql`'s table view: the first rows of a result, then how many rows it had.

Only the rows shown are held; the rest are counted as they stream past, up to
`COUNTED_ROWS_AT_MOST`, so a result of any length costs the same memory.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from stepscope.closed_pipe import reader_gone
from stepscope.safe_text import safe_text
from stepscope.schema.query_rows import QueryRows

COUNTED_ROWS_AT_MOST = 1_000_000
"""Rows of a result counted (or shown, when `--limit` is higher) before the table view
says "more than" instead: counting reads every row, and a result can be endless."""

COUNT_BATCH_ROWS = 10_000
"""Rows read at a time while counting."""


@dataclass(frozen=True)
class RowCount:
    """How many rows a result had: `num_rows`, or more than that when `stopped`."""

    num_rows: int
    stopped: bool


def print_table(console: Console, rows: QueryRows, limit: int, *, vertical: bool) -> None:
    """The first `limit` rows, as a table (or one block per row), then how many there were."""
    shown = rows.fetch(limit)
    columns = rows.columns
    if vertical or _natural_width(columns, shown) > console.width:
        _print_vertical(console, columns, shown)
    else:
        table = Table(header_style="bold", pad_edge=False)
        for column in columns:
            table.add_column(Text(safe_text(column)), no_wrap=True)
        for row in shown:
            table.add_row(*(_cell(value) for value in row))
        console.print(table)
    if len(shown) < limit:
        console.print(f"[dim]{len(shown):,} rows[/]")
        return
    count = _count(rows, len(shown), max(limit, COUNTED_ROWS_AT_MOST))
    console.print(f"[dim]{_count_line(len(shown), count)}[/]")


def _count(rows: QueryRows, num_read: int, at_most: int) -> RowCount:
    """Count the rows left as they stream past, until more than `at_most` have been read."""
    for batch in rows.batches(COUNT_BATCH_ROWS):
        num_read += len(batch)
        if num_read > at_most:
            return RowCount(at_most, stopped=True)
        if reader_gone(sys.stdout):
            break
    return RowCount(num_read, stopped=False)


def _count_line(num_shown: int, count: RowCount) -> str:
    if count.stopped:
        return (
            f"{num_shown:,} rows shown; more than {count.num_rows:,} in all "
            "(stopped counting; --csv or --json for all)"
        )
    if count.num_rows == num_shown:
        return f"{num_shown:,} rows"
    return f"{num_shown:,} rows shown of {count.num_rows:,} (--limit, --csv or --json for all)"


def _print_vertical(console: Console, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """psql's expanded display: each row as a block of `column | value` lines."""
    names = [safe_text(column) for column in columns]
    width = max(map(len, names), default=0)
    for number, row in enumerate(rows, 1):
        console.print(f"[bold]-[ row {number} ]-[/]")
        for name, value in zip(names, row, strict=True):
            line = Text(name.ljust(width) + " | ", style="cyan")
            line.append_text(_cell(value))
            console.print(line)


def _natural_width(columns: list[str], rows: list[tuple[Any, ...]]) -> int:
    """Width of a one-line-per-row table: the widest cell of each column, plus borders."""
    widths = [len(safe_text(column)) for column in columns]
    for row in rows:
        for index, value in enumerate(row):
            widths[index] = max(widths[index], len(_cell(value).plain))
    return sum(widths) + 3 * len(widths) + 1


def _cell(value: Any) -> Text:
    if value is None:
        return Text("NULL", style="dim")
    return Text(safe_text(str(value)))
