"""The columns a trace's rows are found and joined by: never NULL, requests all named.

The recorder writes every one of them. A file edited by hand, or written by another
tool, may not: replay and diff read rows by these keys, so they check them first
and name the first that fails, instead of failing somewhere inside with a Python
error. Each check is a filtered scan that DuckDB answers mostly from its segments'
statistics (its cost: `benchmarks/RESULTS.md`, replay_speed).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from .sql_files import query

KEY_COLUMNS = {
    "_requests": ("request_index", "request_id", "arrival_step"),
    "_steps": ("step", "idle"),
    "_scheduled": ("step", "seq", "request_index", "kind", "num_tokens"),
    "_block_ids": ("step", "request_index", "slot", "block_id"),
    "_allocations": ("step", "seq", "request_index", "pass"),
    "_preemptions": ("step", "seq", "request_index"),
    "_events": ("step", "seq", "request_index", "kind"),
    "_spec_decode": ("step", "request_index"),
}
"""Each table's columns that are never NULL in a recorded trace."""

REQUEST_REFERENCES = (
    "_scheduled",
    "_block_ids",
    "_allocations",
    "_preemptions",
    "_events",
    "_spec_decode",
)
"""Tables whose `request_index` names a row of `_requests`."""


def key_problem(
    con: duckdb.DuckDBPyConnection, path: Path, *, numbered_from_0: bool = True
) -> str | None:
    """What is wrong with the trace's keys (the first thing found), or None.

    A recording may lack requests (those that finished in segments retention deleted, or
    in a gap): with `numbered_from_0` off its requests need only be numbered once each,
    and every reference name one of them.
    """
    for table, columns in KEY_COLUMNS.items():
        # Table and column names are the constants above: identifiers spliced in.
        nulls = " OR ".join(f"{column} IS NULL" for column in columns)
        if con.sql(f"SELECT 1 FROM {table} WHERE {nulls} LIMIT 1").fetchall():
            return _null_key(con, path, table, columns)
    if numbered_from_0:
        return _request_index_problem(con, path)
    return _request_reference_problem(con, path)


def _null_key(
    con: duckdb.DuckDBPyConnection, path: Path, table: str, columns: tuple[str, ...]
) -> str | None:
    """Which of `table`'s key columns is NULL in a row, and at which step if it has one."""
    for column in columns:
        step = "step" if column != "step" and "step" in columns else "NULL"
        rows = con.sql(f"SELECT {step} FROM {table} WHERE {column} IS NULL LIMIT 1").fetchall()
        if rows:
            at = f" (step {rows[0][0]})" if rows[0][0] is not None else ""
            return f"{path}: {table}.{column} is NULL in a row{at}; a recorded trace's never is"
    return None


def _request_index_problem(con: duckdb.DuckDBPyConnection, path: Path) -> str | None:
    """`_requests` numbered once each, 0..n-1 (or, in a window of a trace, the numbers of
    the requests it holds), and every reference naming one of them."""
    count, distinct, low, high = con.sql(query(__package__, "request_numbering")).fetchall()[0]
    if count and (distinct != count or low < 0):
        return f"{path}: _requests.request_index holds a number twice, or one below 0"
    dense = not count or (low == 0 and high == count - 1)
    for table in REQUEST_REFERENCES:
        problem = (
            _out_of_range(con, path, table, count)
            if dense
            else _unknown_reference(con, path, table)
        )
        if problem is not None:
            return problem
    return None


def _out_of_range(con: duckdb.DuckDBPyConnection, path: Path, table: str, count: int) -> str | None:
    """A reference outside 0..count-1 (read from the table's statistics, mostly)."""
    # A table's name from the constants above, spliced in.
    low, high = con.sql(f"SELECT min(request_index), max(request_index) FROM {table}").fetchall()[0]
    if low is not None and (low < 0 or high >= count):
        index = low if low < 0 else high
        return f"{path}: {table}.request_index {index} names no request (of {count})"
    return None


def _unknown_reference(con: duckdb.DuckDBPyConnection, path: Path, table: str) -> str | None:
    """A reference to a request the window does not hold."""
    rows = con.execute(query(__package__, "unknown_request_reference"), [table]).fetchall()
    if rows:
        return f"{path}: {table}.request_index {rows[0][0]} names no request of the trace"
    return None


def _request_reference_problem(con: duckdb.DuckDBPyConnection, path: Path) -> str | None:
    """`_requests` numbered once each, and every reference naming one of them."""
    count, distinct, _, _ = con.sql(query(__package__, "request_numbering")).fetchall()[0]
    if distinct != count:
        return f"{path}: _requests.request_index names a request twice"
    for table in REQUEST_REFERENCES:
        # A table's name from the constant above, spliced in.
        rows = con.sql(
            f"SELECT request_index FROM {table} ANTI JOIN _requests USING (request_index) LIMIT 1"
        ).fetchall()
        if rows:
            return f"{path}: {table}.request_index {rows[0][0]} names no request"
    return None
