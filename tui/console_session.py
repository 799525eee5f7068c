"""The SQL console's own reader of a trace (or a diff's two), so a long query can be cancelled
alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import duckdb
from stepscope.schema import TraceDamagedError, TraceError, TraceReader, open_pair, open_trace
from stepscope.schema.step_window import WHOLE, StepWindow
from stepscope.schema.trace_error import RecordingChangedError

from .models import QueryResult

MAX_ROWS = 1000
"""Rows of a result brought into the console's table."""


class QueryCancelledError(Exception):
    """The query was interrupted."""


class ConsoleSession:
    """Runs the console's queries on a reader of its own (read-only, as every trace's).

    With `other` (diffing), B's tables and views are there too, as `b.<name>`; a `window`
    reads its steps only, on both sides."""

    def __init__(
        self, path: str | Path, other: str | Path | None = None, window: StepWindow = WHOLE
    ) -> None:
        self._path, self._other, self._window = path, other, window
        self.reader: TraceReader = self._open()
        self._lock = threading.Lock()
        self.running = threading.Event()

    def _open(self) -> TraceReader:
        if self._other is None:
            return open_trace(self._path, self._window)
        return open_pair(self._path, self._other, self._window)

    def run(self, query: str, max_rows: int = MAX_ROWS) -> QueryResult:
        """Run one query and keep its first `max_rows` rows (TraceError, QueryCancelledError).

        A DuckDB error is kept whole (its hints and the caret under the bad token)."""
        started = time.perf_counter()
        with self._lock:
            self.running.set()
            try:
                relation, rows = self._fetch(query, max_rows + 1)
                columns, types = tuple(relation.columns), tuple(map(str, relation.types))
            except duckdb.InterruptException:
                raise QueryCancelledError(query) from None
            except TraceDamagedError:
                raise
            except TraceError as error:
                raise TraceError(error.detail) from None
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

    def _fetch(
        self, query: str, max_rows: int
    ) -> tuple[duckdb.DuckDBPyRelation, list[tuple[Any, ...]]]:
        """The query's relation and first rows; a recording whose file went away while it
        ran (its writer merged or deleted a segment) is opened again and queried once more:
        the recording as it stands now."""
        try:
            relation = self.reader.sql(query)
            return relation, self.reader.fetch(relation, max_rows)
        except RecordingChangedError:
            self.reader.close()
            self.reader = self._open()
            relation = self.reader.sql(query)
            return relation, self.reader.fetch(relation, max_rows)

    def interrupt(self) -> None:
        """Ask the running query to stop (harmless when none runs)."""
        self.reader.interrupt()

    def close(self) -> None:
        self.reader.close()


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
