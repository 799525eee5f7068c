"""The SQL console's own connection to a trace, so a long query can be cancelled alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import duckdb
from stepscope.schema import Trace, TraceError, open_trace
from stepscope.schema.query_statements import not_a_query
from stepscope.schema.trace_file import is_file_error

from .both_traces import connect_both
from .connection import damaged_error
from .models import QueryResult

MAX_ROWS = 1000
"""Rows of a result brought into the console's table."""


class QueryCancelledError(Exception):
    """The query was interrupted."""


class ConsoleSession:
    """Runs the console's queries on a connection of its own (read-only, as every trace).

    With `other` (diffing), B's tables and views are there too, as `b.<name>`."""

    def __init__(self, path: str | Path, other: str | Path | None = None) -> None:
        self.trace: Trace | None = None
        self.path = Path(path) if other is None else None
        """The one file its queries read (None when diffing: either may have failed one)."""
        if other is None:
            self.trace = open_trace(path)
            self._connection = self.trace._con  # replaced by the one trace reader next
        else:
            self._connection = connect_both(Path(path), Path(other))
        self._lock = threading.Lock()
        self.running = threading.Event()

    def run(self, query: str, max_rows: int = MAX_ROWS) -> QueryResult:
        """Run one query and keep its first `max_rows` rows (TraceError, QueryCancelledError).

        A DuckDB error is kept whole (its hints and the caret under the bad token)."""
        started = time.perf_counter()
        with self._lock:
            self.running.set()
            try:
                problem = not_a_query(query)
                if problem is not None:
                    raise TraceError(problem)
                relation = self._connection.sql(query)
                if relation is None:
                    raise TraceError("the statement returned no rows (only queries are allowed)")
                rows = relation.limit(max_rows + 1).fetchall()
                columns, types = tuple(relation.columns), tuple(map(str, relation.types))
            except duckdb.InterruptException:
                raise QueryCancelledError(query) from None
            except duckdb.Error as error:
                if is_file_error(error):
                    raise damaged_error(error, self.path) from None
                raise TraceError(str(error).strip() or type(error).__name__) from None
            finally:
                self.running.clear()
        return QueryResult(
            query=query,
            columns=columns,
            rows=tuple(rows[:max_rows]),
            truncated=len(rows) > max_rows,
            elapsed_s=time.perf_counter() - started,
            types=types,
        )

    def interrupt(self) -> None:
        """Ask the running query to stop (DuckDB's interrupt; harmless when none runs)."""
        self._connection.interrupt()

    def close(self) -> None:
        if self.trace is not None:
            self.trace.close()
        else:
            self._connection.close()


class SessionSlot:
    """Where a session opened in a worker lands: closing the slot closes the session, even one
    still opening when its screen goes (else that connection would stay open)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session: ConsoleSession | None = None
        self._closed = False

    @property
    def session(self) -> ConsoleSession | None:
        return self._session

    def fill(self, session: ConsoleSession) -> bool:
        """Keep `session`; False, and `session` closed, when the slot was closed meanwhile."""
        with self._lock:
            if not self._closed:
                self._session = session
                return True
        session.close()
        return False

    def close(self) -> None:
        """Stop the session's query, if any, and close it; a session opened later is closed too."""
        with self._lock:
            self._closed = True
            session, self._session = self._session, None
        if session is not None:
            session.interrupt()
            session.close()
