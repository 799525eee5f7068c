"""The one place the TUI reaches past `Trace`'s public API, to its DuckDB connection.

Prepared execution (one bind instead of the relation API's two: about a third off a
step's detail) and `interrupt()` (to cancel a console query) have no public door on
`Trace` yet; if it grows `execute()` and `interrupt()`, this module goes.
"""

from __future__ import annotations

from typing import Any

import duckdb
from stepscope.schema import Trace, TraceError


def connection_of(trace: Trace) -> duckdb.DuckDBPyConnection:
    """The trace's read-only, locked connection."""
    return trace._con


def execute(trace: Trace, query: str, params: list[Any] | None = None) -> duckdb.DuckDBPyConnection:
    """Run a prepared query on the trace's connection; DuckDB errors become TraceError."""
    try:
        return connection_of(trace).execute(query, params)
    except duckdb.InterruptException:
        raise
    except duckdb.Error as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TraceError(message) from None
