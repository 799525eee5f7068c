"""Reading a trace: read-only, with no file access from SQL, and views defined by the reader."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import pyarrow as pa

from .older_traces import shadow_missing_columns
from .sql_files import header, names, query, source, strip_comments
from .version import SCHEMA_VERSION, SUPPORTED_VERSIONS

_LOCKED_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "lock_configuration": True,
}


class TraceError(ValueError):
    """A file that is not a readable trace, or a query the trace cannot answer."""


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
                shadow_missing_columns(self._con)
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
            raise TraceError(_first_line(error)) from None

    def sql(
        self, query: str, params: list[Any] | dict[str, Any] | None = None
    ) -> duckdb.DuckDBPyRelation:
        """Run a query; bad SQL raises TraceError with DuckDB's message."""
        try:
            relation = self._con.sql(query, params=params)
        except duckdb.CatalogException as error:
            raise TraceError(
                f"{_first_line(error)} (list the views: stepscope sql TRACE)"
            ) from None
        except duckdb.Error as error:
            raise TraceError(_first_line(error)) from None
        if relation is None:
            raise TraceError("the statement returned no rows (only queries are allowed)")
        return relation

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
            raise TraceError(_first_line(error)) from None

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
        self.close()


def open_trace(path: str | Path) -> Trace:
    """Open a trace for reading (see `Trace`)."""
    return Trace(path)


def _connect(path: Path) -> duckdb.DuckDBPyConnection:
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace")
    try:
        con = duckdb.connect(str(path), read_only=True, config=_LOCKED_CONFIG)
    except duckdb.Error as error:
        raise TraceError(f"{path}: not a readable trace ({_first_line(error)})") from None
    expected = _expected_size(con)
    if expected is not None and path.stat().st_size < expected:
        con.close()
        raise TraceError(
            f"{path}: truncated trace ({path.stat().st_size} of {expected} bytes are there)"
        )
    return con


_DUCKDB_HEADER_BYTES = 3 * 4096
"""DuckDB's main header and its two database headers, before the first block."""


def _expected_size(con: duckdb.DuckDBPyConnection) -> int | None:
    """The least file size the database's own header allows, when DuckDB reports it.

    That is room for every block in use: a checkpoint cuts free blocks off the
    file's end, so `total_blocks` can count blocks the file no longer holds.
    """
    try:
        ((block_size, used_blocks),) = con.execute(query(__package__, "database_size")).fetchall()
    except duckdb.Error:
        return None
    return _DUCKDB_HEADER_BYTES + int(block_size) * int(used_blocks)


def _read_meta(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    try:
        rows = con.table("_meta").select("key", "value").fetchall()
    except duckdb.Error:
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
                    f"{SCHEMA_VERSION} (view {info.name}: {_first_line(error)}); "
                    "re-record the trace"
                ) from None
        if len(failed) == len(pending):
            names = ", ".join(v.name for v in failed)
            raise TraceError(f"{path}: views cannot be created: {names}")
        pending = failed


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
