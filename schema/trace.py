"""Reading a trace: read-only, with no file access from SQL, and views defined by the reader."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import pyarrow as pa

from .ddl import logical_tables, table_specs
from .older_traces import shadow_missing_columns
from .query_rows import QueryRows
from .query_statements import statement_problem
from .sql_files import header, names, query, source, strip_comments
from .trace_file import (
    check_length,
    damaged,
    first_line,
    is_file_error,
    not_duckdb,
    read_every_block,
    stored_tables,
)
from .trace_keys import key_problem
from .version import SCHEMA_VERSION, SUPPORTED_VERSIONS

_LOCKED_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "lock_configuration": True,
}


class TraceError(ValueError):
    """A file that is not a readable trace, or a query the trace cannot answer."""


class TraceDamagedError(TraceError):
    """A trace's own bytes failed a query: a damaged or cut block, found when it was read."""


@dataclass(frozen=True)
class ViewInfo:
    name: str
    description: str
    sql: str


def view_infos() -> list[ViewInfo]:
    """Every view in `views/`, with the one-line description from its first comment."""
    infos = []
    for name in names(__package__, "views"):
        text = source(__package__, f"views/{name}.sql")
        description = header(text)
        assert description and description[0], (
            f"views/{name}.sql: first line must be '-- description'"
        )
        infos.append(ViewInfo(name, description[0], text))
    return infos


@cache
def queryable_names() -> frozenset[str]:
    """The names a query reads: every view and every `_` table."""
    return frozenset(info.name for info in view_infos()) | frozenset(logical_tables())


class Trace:
    """An open trace; `sql()` returns a DuckDB relation (`.to_arrow_table()`, `.pl()`, ...).

    The file is opened read-only with external access disabled and the
    configuration locked, so a query in a trace someone else made cannot read or
    write the reader's files.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._con = _connect(self.path)
        try:
            self.meta = _read_meta(self._con, self.path)
            if self.schema_version < SCHEMA_VERSION:
                _shadow_missing_columns(self._con, self.path, self.schema_version)
            _create_views(self._con, self.path)
        except BaseException:
            self._con.close()
            raise

    @property
    def complete(self) -> bool:
        return self.meta.get("complete") == "true"

    @property
    def schema_version(self) -> int:
        return int(self.meta["schema_version"])

    @cached_property
    def config(self) -> dict[str, Any]:
        relation = self._con.table("_config")
        rows = relation.fetchall()
        return dict(zip(relation.columns, rows[0], strict=True)) if rows else {}

    @cached_property
    def num_steps(self) -> int:
        """Steps recorded, idle ones included (what the file holds, complete or not)."""
        return int(self._con.sql(query(__package__, "num_steps")).fetchall()[0][0])

    def views(self) -> list[ViewInfo]:
        return view_infos()

    def view(self, name: str) -> duckdb.DuckDBPyRelation:
        """All the rows of the view `name` (one of `views()`)."""
        try:
            return self._con.view(name)
        except duckdb.Error as error:
            raise TraceError(self._message(error)) from None

    def sql(
        self, query: str, params: list[Any] | dict[str, Any] | None = None
    ) -> duckdb.DuckDBPyRelation:
        """Run a query; bad SQL, or a statement not a query, raises TraceError."""
        problem = statement_problem(query, queryable_names())
        if problem is not None:
            raise TraceError(problem)
        try:
            relation = self._con.sql(query, params=params)
        except duckdb.CatalogException as error:
            raise TraceError(f"{first_line(error)} (list the views: stepscope sql TRACE)") from None
        except duckdb.Error as error:
            raise TraceError(self._message(error)) from None
        if relation is None:
            raise TraceError("the statement returned no rows (only queries are allowed)")
        return relation

    def execute(
        self, query: str, params: list[Any] | dict[str, Any] | None = None
    ) -> duckdb.DuckDBPyConnection:
        """Run one of the reader's own prepared queries (one bind, no statement check): the
        connection holding its result; TraceDamagedError when the file's bytes fail it."""
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
        except duckdb.Error as error:
            raise TraceError(self._message(error)) from None

    def stream(
        self, query: str, batch_rows: int = 1 << 16, params: list[Any] | None = None
    ) -> pa.RecordBatchReader:
        """Stream a query's rows in Arrow batches, on a cursor of its own.

        Several streams can be open at once; they see the physical `_` tables, not
        the views (which belong to the main connection).
        """
        try:
            return self._con.cursor().sql(query, params=params).to_arrow_reader(batch_rows)
        except duckdb.Error as error:
            raise TraceError(self._message(error)) from None

    def read_all(self) -> None:
        """Read every stored byte, so a damaged block is an error now, not a missed difference."""
        problem = read_every_block(self._con, self.path)
        if problem is not None:
            raise TraceError(problem)

    def check_keys(self) -> None:
        """Refuse a trace whose rows cannot be found by their keys (`trace_keys`): replay and
        diff read every row by them."""
        try:
            problem = key_problem(self._con, self.path)
        except duckdb.Error as error:
            raise TraceError(self._message(error)) from None
        if problem is not None:
            raise TraceError(problem)

    def interrupt(self) -> None:
        """Stop the query running now (from another thread); harmless when none runs, or closed."""
        with contextlib.suppress(duckdb.ConnectionException):
            self._con.interrupt()

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Trace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the file; a DuckDB error while it was read becomes a TraceError naming it."""
        self.close()
        if isinstance(exc, duckdb.Error):
            raise TraceError(self._message(exc)) from None

    def _message(self, error: duckdb.Error) -> str:
        """A query's error as is; one from the file's bytes names the file."""
        return damaged(self.path, error) if is_file_error(error) else first_line(error)

    def _error(self, error: duckdb.Error) -> TraceError:
        """A query's error in one line, a TraceDamagedError when the file's bytes failed it."""
        if is_file_error(error):
            return TraceDamagedError(damaged(self.path, error))
        return TraceError(first_line(error))


def open_trace(path: str | Path) -> Trace:
    """Open a trace for reading (see `Trace`)."""
    return Trace(path)


def checked_meta(path: str | Path) -> dict[str, str]:
    """A trace file's `_meta`, once it passes the checks `open_trace` makes before its views."""
    con = _connect(Path(path))
    try:
        return _read_meta(con, Path(path))
    finally:
        con.close()


def _connect(path: Path) -> duckdb.DuckDBPyConnection:
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace")
    problem = not_duckdb(path)
    if problem is not None:
        raise TraceError(problem)
    try:
        con = duckdb.connect(str(path), read_only=True, config=_LOCKED_CONFIG)
    except duckdb.Error as error:
        raise TraceError(damaged(path, error)) from None
    try:
        problem = check_length(con, path)
    except duckdb.Error as error:
        problem = damaged(path, error)
    if problem is not None:
        con.close()
        raise TraceError(problem)
    return con


def _read_meta(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    try:
        rows = con.table("_meta").select("key", "value").fetchall()
    except duckdb.Error as error:
        if is_file_error(error):
            raise TraceError(damaged(path, error)) from None
        raise TraceError(
            f"{path}: a DuckDB file, but not a stepscope trace (no _meta table)"
        ) from None
    meta = dict(rows)
    version = meta.get("schema_version", "")
    if not version.isdigit():
        raise TraceError(f"{path}: not a stepscope trace (no schema_version in _meta)")
    if int(version) not in SUPPORTED_VERSIONS:
        newer = int(version) > SCHEMA_VERSION
        raise TraceError(
            f"{path}: trace schema version {version} is "
            + ("newer than this stepscope reads" if newer else "not one this stepscope reads")
            + f" (it reads {', '.join(map(str, sorted(SUPPORTED_VERSIONS)))}); "
            + ("upgrade stepscope" if newer else "re-record the trace")
        )
    return meta


def _shadow_missing_columns(con: duckdb.DuckDBPyConnection, path: Path, version: int) -> None:
    """`shadow_missing_columns`, failing with an error that names the file."""
    try:
        shadow_missing_columns(con)
    except duckdb.Error as error:
        if is_file_error(error):
            raise TraceError(damaged(path, error)) from None
        raise TraceError(
            f"{path}: its tables do not match trace schema version {version} "
            f"({first_line(error)}); re-record the trace"
        ) from None


def _create_views(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Create every view as a TEMP view, retrying those that depend on others.

    A view that does not bind means the tables are not the ones the trace's schema
    version promises (a hand-edited file, or one from a development build).
    """
    pending = view_infos()
    while pending:
        failed = []
        for info in pending:
            body = strip_comments(info.sql)
            try:
                # A view's name is an identifier: it is spliced in, not a parameter.
                con.execute(f"CREATE TEMP VIEW {info.name} AS {body}")
            except duckdb.CatalogException:
                failed.append(info)
            except duckdb.BinderException as error:
                raise TraceError(
                    f"{path}: its tables do not match trace schema version "
                    f"{SCHEMA_VERSION} (view {info.name}: {first_line(error)}); "
                    "re-record the trace"
                ) from None
        if len(failed) == len(pending):
            raise TraceError(_views_failed(con, path, failed))
        pending = failed


def _views_failed(con: duckdb.DuckDBPyConnection, path: Path, failed: list[ViewInfo]) -> str:
    """Why views did not bind: most often a table the trace should hold is not there."""
    missing = sorted({spec.name for spec in table_specs()} - set(stored_tables(con)))
    if missing:
        return (
            f"{path}: a stepscope trace without its {', '.join(missing)} table"
            f"{'s' if len(missing) > 1 else ''} (an edited or damaged file); re-record it"
        )
    return f"{path}: views cannot be created: {', '.join(v.name for v in failed)}"


def check_readable(path: str | Path) -> None:
    """Open the trace and read every stored byte: a TraceError naming what cannot be read."""
    with open_trace(path) as trace:
        trace.read_all()
