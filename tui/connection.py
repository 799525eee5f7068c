"""The one place the TUI reaches past `Trace`'s public API, to its DuckDB connection.

Prepared execution (one bind instead of the relation API's two: about a third off a
step's detail) and `interrupt()` (to cancel a console query) have no public door on
`Trace` yet; if it grows `execute()` and `interrupt()`, this module goes. DuckDB's errors
there become one-line TraceErrors, a damaged file's told apart from a query's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
from stepscope.schema import Trace, TraceError
from stepscope.schema.trace_file import damaged, first_line, is_file_error


class TraceDamagedError(TraceError):
    """A trace's own bytes failed a query: a damaged or cut block, found when it was read."""


def connection_of(trace: Trace) -> duckdb.DuckDBPyConnection:
    """The trace's read-only, locked connection."""
    return trace._con


def execute(trace: Trace, query: str, params: list[Any] | None = None) -> duckdb.DuckDBPyConnection:
    """Run a prepared query on the trace's connection; DuckDB errors become TraceError."""
    with reading(trace.path):
        return connection_of(trace).execute(query, params)


@contextmanager
def reading(path: Path | None) -> Iterator[None]:
    """DuckDB errors in the body become one-line TraceErrors (see `damaged_error`)."""
    try:
        yield
    except duckdb.InterruptException:
        raise
    except duckdb.Error as error:
        if is_file_error(error):
            raise damaged_error(error, path) from None
        raise TraceError(first_line(error)) from None


def damaged_error(error: duckdb.Error, path: Path | None) -> TraceDamagedError:
    """A query the file's bytes failed, naming the file (`path`, when one file was read)."""
    return TraceDamagedError(first_line(error) if path is None else damaged(path, error))
