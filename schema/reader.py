"""Traces read in one sandboxed in-memory database: a file, a set of traces, or a diff's two.

Each trace's logical tables and every view are created in a schema of their own
(`member_views`); what a query sees at the top level is that schema (one trace), or
it and `b.<name>` (a diff's two), or a UNION ALL over every trace (a set). The files
are attached read-only, and exports read by pyarrow, before the lockdown
(`lockdown`) switches file access off and locks the configuration; only queries run,
so a query reads the traces and nothing else, and changes nothing.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import duckdb
import pyarrow as pa

from .lockdown import connect_unlocked, lock
from .member_views import create_enum_types, create_member_schema
from .query_rows import QueryRows
from .query_statements import parser_error, statement_problem
from .trace_error import TraceDamagedError, TraceError
from .trace_file import damaged, first_line, is_file_error
from .view_infos import ViewInfo, queryable_names, view_infos


class TraceReader:
    """The read API every kind of reader shares: `sql()` returns a DuckDB relation
    (`.to_arrow_table()`, `.pl()`, ...), `execute()` runs the reader's own prepared queries.

    Subclasses add their traces' schemas in `__init__`, then call `_lock()`.
    """

    LIST_VIEWS = "stepscope sql TRACE"
    """The command that lists the views, for an error naming a table or view that is none."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        """The one file every query reads (its damage is named); None when there are several."""
        self._con = connect_unlocked()
        create_enum_types(self._con)

    def views(self) -> list[ViewInfo]:
        return view_infos()

    def view(self, name: str) -> duckdb.DuckDBPyRelation:
        """All the rows of the view `name` (one of `views()`)."""
        try:
            return self._con.view(name)
        except duckdb.Error as error:
            raise self._error(error) from None

    def sql(
        self, query: str, params: list[Any] | dict[str, Any] | None = None
    ) -> duckdb.DuckDBPyRelation:
        """Run a query; bad SQL, or a statement not a query, raises TraceError."""
        problem = statement_problem(query, queryable_names())
        if problem is not None:
            raise TraceError(problem, parser_error(query))
        try:
            relation = self._con.sql(query, params=params)
        except duckdb.InterruptException:
            raise
        except duckdb.CatalogException as error:
            raise TraceError(
                f"{first_line(error)} (list the views: {self.LIST_VIEWS})", _whole(error)
            ) from None
        except duckdb.Error as error:
            raise self._error(error) from None
        if relation is None:
            raise TraceError("the statement returned no rows (only queries are allowed)")
        return relation

    def execute(
        self, query: str, params: list[Any] | dict[str, Any] | None = None
    ) -> duckdb.DuckDBPyConnection:
        """Run one of the reader's own prepared queries (one bind, no statement check): the
        connection holding its result; TraceDamagedError when a file's bytes fail it."""
        try:
            return self._con.execute(query, params)
        except duckdb.InterruptException:
            raise
        except duckdb.Error as error:
            raise self._error(error) from None

    def rows(self, relation: duckdb.DuckDBPyRelation) -> QueryRows:
        """A relation of `sql()` run again, its rows read a batch at a time (`QueryRows`)."""
        try:
            return QueryRows(self._con, relation)
        except duckdb.InterruptException:
            raise
        except duckdb.Error as error:
            raise self._error(error) from None

    def fetch(self, relation: duckdb.DuckDBPyRelation, max_rows: int) -> list[tuple[Any, ...]]:
        """The relation's first `max_rows` rows; DuckDB's errors as `sql()` raises them."""
        try:
            return relation.limit(max_rows).fetchall()
        except duckdb.InterruptException:
            raise
        except duckdb.Error as error:
            raise self._error(error) from None

    def arrow(self, query: str, params: list[Any] | None = None) -> pa.Table:
        """A query's rows as one Arrow table; DuckDB's errors as `execute()` raises them."""
        try:
            return self._con.sql(query, params=params).to_arrow_table()
        except duckdb.InterruptException:
            raise
        except duckdb.Error as error:
            raise self._error(error) from None

    def stream(
        self, query: str, batch_rows: int = 1 << 16, params: list[Any] | None = None
    ) -> pa.RecordBatchReader:
        """Stream a query's rows in Arrow batches, on a cursor of its own (several streams
        can be open at once)."""
        try:
            return self._con.cursor().sql(query, params=params).to_arrow_reader(batch_rows)
        except duckdb.Error as error:
            raise self._error(error) from None

    def interrupt(self) -> None:
        """Stop the query running now (from another thread); harmless when none runs, or closed."""
        with contextlib.suppress(duckdb.ConnectionException):
            self._con.interrupt()

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the reader; a DuckDB error while it was read becomes a TraceError."""
        self.close()
        if isinstance(exc, duckdb.Error):
            raise self._error(exc) from None

    def _add_schema(
        self, schema: str, tables: dict[str, str], where: str, meta: dict[str, str]
    ) -> None:
        """One trace's tables and views in `schema`; `where` names the trace in an error."""
        try:
            create_member_schema(self._con, schema, tables)
        except duckdb.Error as error:
            raise TraceError(
                f"{where}: its tables do not match trace schema version "
                f"{meta.get('schema_version')} ({first_line(error)}); re-record the trace"
            ) from None

    def _lock(self) -> None:
        lock(self._con)

    def _error(self, error: duckdb.Error) -> TraceError:
        """A query's error in one line; a TraceDamagedError, naming the file when there is
        one, when a file's bytes failed it."""
        if is_file_error(error):
            line = first_line(error) if self.path is None else damaged(self.path, error)
            return TraceDamagedError(line, _whole(error))
        return TraceError(first_line(error), _whole(error))


def _whole(error: duckdb.Error) -> str:
    return str(error).strip() or type(error).__name__
