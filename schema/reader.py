"""Traces read in one sandboxed in-memory database: a file, a set of traces, or a diff's two.

Every view is created the one way `member_views` creates them, in a schema whose
`_` tables are the trace's: at the top level (`main`) for a lone trace and a diff's
A, whose tables of today's version are found as stored on the search path; in a
schema of its own over logical tables (`member_tables`) for a diff's B (`b.<name>`),
each trace of a set (`trace_<i>`, under a UNION ALL of them all) and an older trace. The files
are attached read-only, and exports read by pyarrow, before the lockdown
(`lockdown`) switches file access off and locks the configuration; only queries run,
so a query reads the traces and nothing else, and changes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import duckdb
import pyarrow as pa

from .lockdown import connect_unlocked, lock
from .member_tables import attached_tables
from .member_views import create_enum_types, create_member_schema
from .query_rows import QueryRows
from .query_statements import parser_error, statement_problem
from .reader_memory import memory_hint
from .recording_errors import recording_error
from .recording_layout import is_recording
from .recording_paths import readable_folder
from .recording_tables import Recording, recorded_tables
from .step_window import REQUESTS, StepWindow, check_held, create_window
from .trace_error import RecordingChangedError, TraceDamagedError, TraceError
from .trace_file import damaged, first_line, is_file_error, stored_tables
from .version import SCHEMA_VERSION
from .view_infos import ViewInfo, queryable_names, view_infos

_SET_SEARCH_PATH = "SET search_path = ?"


@dataclass(frozen=True)
class MemberTables:
    """One trace as a reader finds it: its `_meta`, each logical table's SELECT, and the
    recording it is (None: a trace file)."""

    meta: dict[str, str]
    tables: dict[str, str]
    recording: Recording | None


class TraceReader:
    """The read API every kind of reader shares: `sql()` returns a DuckDB relation
    (`.to_arrow_table()`, `.pl()`, ...), `execute()` runs the reader's own prepared queries.

    Subclasses add their traces' schemas in `__init__`, through `_open`.
    """

    LIST_VIEWS = "stepscope sql TRACE"
    """The command that lists the views, for an error naming a table or view that is none."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        """The one trace every query reads (its damage is named); None when there are several."""
        self._connect()

    def _connect(self) -> None:
        """A new in-memory database to give the traces to (unlocked until they are)."""
        self._recordings: list[Path] = []
        """The folders of the recordings read (absolute): their files are read by queries."""
        self._con = connect_unlocked()
        self._search_path: str | None = None
        """Where unqualified names are found besides `main` (a top-level trace's tables)."""
        create_enum_types(self._con)

    def _open(self, add_traces: Callable[[], None]) -> None:
        """Give the reader its traces (`add_traces`), then lock it; a recording that changed
        while it was read is scanned again, once. The connection is closed on failure."""
        try:
            try:
                add_traces()
            except RecordingChangedError:
                self._con.close()
                self._connect()
                add_traces()
            lock(self._con, self._recordings)
        except BaseException:
            self._con.close()
            raise

    def _read_trace(self, alias: str, path: Path) -> MemberTables:
        """The trace at `path`: a file attached as `alias`, or a recording folder whose
        files' views go in the schema `alias`."""
        if not is_recording(path):
            return MemberTables(*attached_tables(self._con, alias, path), recording=None)
        self._recordings.append(readable_folder(path))
        try:
            recording, meta, tables = recorded_tables(self._con, alias, path)
        except duckdb.Error as error:
            raise self._error(error) from None
        return MemberTables(meta, tables, recording)

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
            return self._cursor().sql(query, params=params).to_arrow_reader(batch_rows)
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
            if recording_error(error, self._recordings) is not None:
                raise self._error(error) from None
            raise TraceError(
                f"{where}: its tables do not match trace schema version "
                f"{meta.get('schema_version')} ({first_line(error)}); re-record the trace"
            ) from None

    def _add_top_level(
        self,
        database: str,
        tables: dict[str, str],
        where: str,
        meta: dict[str, str],
        keep: Collection[str] = (),
    ) -> None:
        """The trace whose tables and views are at the top level (`main`), attached as
        `database`: the stored tables of one of today's version read as they are (found on
        the search path, no view between them and a query), the rest through `tables` (an
        older trace's, a compacted trace's `_requests`, a view of its own catalog, and those
        to `keep` as given: a step window's `_requests`)."""
        if int(meta["schema_version"]) == SCHEMA_VERSION:
            self._search_path = f"memory.main,{database}.main"
            self._con.execute(_SET_SEARCH_PATH, [self._search_path])
            stored = set(stored_tables(self._con, database))
            tables = {
                table: select
                for table, select in tables.items()
                if table not in stored or table in keep
            }
        self._add_schema("main", tables, where, meta)

    def _add_main(
        self, database: str, read: MemberTables, path: Path, window: StepWindow
    ) -> tuple[int, int, int] | None:
        """The trace `read` (at `path`, attached as `database`) at the top level, cut to
        `window`; returns (steps, first, last) of the whole trace (None: read whole)."""
        tables, held = self._cut_to_window("main", read.tables, path, window)
        if read.recording is None:
            keep = () if window.whole else (REQUESTS,)
            self._add_top_level(database, tables, str(path), read.meta, keep)
        else:
            self._add_schema("main", tables, str(path), read.meta)
        return held

    def _cut_to_window(
        self, schema: str, tables: dict[str, str], path: Path, window: StepWindow
    ) -> tuple[dict[str, str], tuple[int, int, int] | None]:
        """The trace at `path` read through `window` in `schema` (`create_window`), and
        (steps, first, last) of the whole trace; a window it does not hold is a TraceError
        naming what it holds. For the whole trace: `tables` as given, and None."""
        if window.whole:
            return tables, None
        try:
            ((count, first, last),) = self._con.execute(
                f"SELECT count(*), min(step), max(step) FROM ({tables['_steps']})"
            ).fetchall()
        except duckdb.Error as error:
            raise self._error(error) from None
        held = (0, 0, -1) if not count else (int(count), int(first), int(last))
        check_held(window, path, held)
        return self._create_window(schema, tables, window), held

    def _create_window(
        self, schema: str, tables: dict[str, str], window: StepWindow
    ) -> dict[str, str]:
        """`create_window` in `schema`, a recording's errors named as every read names them."""
        try:
            return create_window(self._con, schema, tables, window)
        except duckdb.Error as error:
            raise self._error(error) from None

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection of its own to the reader's database, finding names as the reader does
        (the search path is each connection's own)."""
        cursor = self._con.cursor()
        if self._search_path is not None:
            cursor.execute(_SET_SEARCH_PATH, [self._search_path])
        return cursor

    def _error(self, error: duckdb.Error) -> TraceError:
        """A query's error in one line; a TraceDamagedError, naming the file when there is
        one, when a file's bytes failed it; a recording's errors as `recording_error` says."""
        about_recording = recording_error(error, self._recordings)
        if about_recording is not None:
            return about_recording
        if isinstance(error, duckdb.OutOfMemoryException):
            return TraceError(f"{first_line(error)} ({memory_hint()})", _whole(error))
        if is_file_error(error):
            if self.path is None or self._recordings:
                return TraceDamagedError(first_line(error), _whole(error))
            return TraceDamagedError(damaged(self.path, error), _whole(error))
        return TraceError(first_line(error), _whole(error))


def _whole(error: duckdb.Error) -> str:
    return str(error).strip() or type(error).__name__
