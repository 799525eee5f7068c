"""Many traces read as one: every view and `_` table with `trace` and `rank` first.

Each trace gets a schema of its own in an in-memory database, holding its logical
tables (over its attached file, or over its partition of a Parquet export) and every
view; a top-level view of each name is the UNION ALL of the traces' in the order
given, each trace's rows in its view's order. The traces are attached read-only and
the exports read by pyarrow before DuckDB's file access is switched off and the
configuration locked; only queries run, so a query can read the traces and nothing
else, and change nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from .ddl import logical_tables, table_specs
from .member_views import (
    create_enum_types,
    create_member_schema,
    logical_select,
    views_in_order,
)
from .parquet_export import IDENTITY_COLUMNS, export_meta, table_dataset
from .query_rows import QueryRows
from .query_statements import statement_problem
from .set_members import Member, find_members
from .sql_files import query as stored_query
from .trace import TraceError, ViewInfo, checked_meta, queryable_names, view_infos
from .trace_file import damaged, first_line
from .version import SCHEMA_VERSION, SUPPORTED_VERSIONS

_LOCK = (
    "SET enable_external_access = false",
    "SET python_enable_replacements = false",
    "SET lock_configuration = true",
)


@dataclass(frozen=True)
class SetTrace:
    """A trace of the set: its name, where it is read from, its `_meta`, its DP rank."""

    name: str
    path: Path
    in_export: bool
    meta: dict[str, str] = field(compare=False)
    rank: int | None


class TraceSet:
    """Traces, trace folders and Parquet exports opened as one; `sql()` as `Trace.sql()`."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        members = find_members([Path(path) for path in paths])
        self._export_metas: dict[Path, dict[str, dict[str, str]]] = {}
        self._con = duckdb.connect(
            ":memory:",
            config={"autoload_known_extensions": False, "autoinstall_known_extensions": False},
        )
        try:
            create_enum_types(self._con)
            self.traces = tuple(self._add(index, m) for index, m in enumerate(members))
            _create_union_views(self._con, self.traces)
            for statement in _LOCK:
                self._con.execute(statement)
        except BaseException:
            self._con.close()
            raise

    @property
    def names(self) -> list[str]:
        return [trace.name for trace in self.traces]

    def views(self) -> list[ViewInfo]:
        return view_infos()

    def sql(
        self, query: str, params: list[Any] | dict[str, Any] | None = None
    ) -> duckdb.DuckDBPyRelation:
        """Run a query over every trace; bad SQL, or a statement not a query, is a TraceError."""
        problem = statement_problem(query, queryable_names())
        if problem is not None:
            raise TraceError(problem)
        try:
            relation = self._con.sql(query, params=params)
        except duckdb.CatalogException as error:
            raise TraceError(
                f"{first_line(error)} (list the views: stepscope sql PATH...)"
            ) from None
        except duckdb.Error as error:
            raise TraceError(first_line(error)) from None
        if relation is None:
            raise TraceError("the statement returned no rows (only queries are allowed)")
        return relation

    def rows(self, relation: duckdb.DuckDBPyRelation) -> QueryRows:
        """A relation of `sql()` run again, its rows read a batch at a time (`QueryRows`)."""
        try:
            return QueryRows(self._con, relation)
        except duckdb.Error as error:
            raise TraceError(first_line(error)) from None

    def interrupt(self) -> None:
        """Stop the query running now (from another thread); harmless when none runs, or closed."""
        with contextlib.suppress(duckdb.ConnectionException):
            self._con.interrupt()

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> TraceSet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the set; a DuckDB error while it was read becomes a TraceError."""
        self.close()
        if isinstance(exc, duckdb.Error):
            raise TraceError(first_line(exc)) from None

    def _add(self, index: int, member: Member) -> SetTrace:
        """Give the trace its schema, `trace_<index>`, and read its identity."""
        if member.in_export:
            meta, tables = self._exported(index, member)
        else:
            meta, tables = self._attached(index, member)
        try:
            create_member_schema(self._con, f"trace_{index}", tables)
        except duckdb.Error as error:
            raise TraceError(
                f"{member.path}: trace {member.name}: its tables do not match trace schema "
                f"version {meta.get('schema_version')} ({first_line(error)})"
            ) from None
        return SetTrace(member.name, member.path, member.in_export, meta, _rank(member, meta))

    def _attached(self, index: int, member: Member) -> tuple[dict[str, str], dict[str, str]]:
        """Attach a trace file, once checked as `open_trace` checks one, and select its tables."""
        meta = checked_meta(member.path)
        database = f"file_{index}"
        # The alias is an identifier: spliced in.
        try:
            self._con.execute(f"ATTACH ? AS {database} (READ_ONLY)", [str(member.path)])
        except duckdb.Error as error:
            raise TraceError(damaged(member.path, error)) from None
        have = self._stored_columns(database, int(meta["schema_version"]))
        tables = {
            table: logical_select(
                table,
                have.get(table, ()),
                f"{database}.main.{table}" if table in have else None,
                cast=False,
            )
            for table in logical_tables()
        }
        return meta, tables

    def _stored_columns(self, database: str, version: int) -> dict[str, set[str]]:
        """The columns of each table stored in `database`; all of them for today's version.

        Only an older trace lacks columns (they read as "off"); in one of today's
        version a missing column or table is an edited file, and its view fails.
        """
        if version == SCHEMA_VERSION:
            return {spec.name: {column[0] for column in spec.columns} for spec in table_specs()}
        have: dict[str, set[str]] = {}
        for table, column in self._con.execute(
            stored_query(__package__, "attached_columns"), [database]
        ).fetchall():
            have.setdefault(table, set()).add(column)
        return have

    def _export_meta(self, folder: Path) -> dict[str, dict[str, str]]:
        if folder not in self._export_metas:
            self._export_metas[folder] = export_meta(folder)
        return self._export_metas[folder]

    def _exported(self, index: int, member: Member) -> tuple[dict[str, str], dict[str, str]]:
        """Select the trace's partition of each table of its export, read through pyarrow."""
        tables = {}
        for table in logical_tables():
            dataset = table_dataset(member.path, table)
            if dataset is None:
                tables[table] = logical_select(table, (), None, cast=True)
                continue
            registered = f"export_{index}_{table.removeprefix('_')}"
            self._con.register(registered, dataset)
            have = set(dataset.schema.names) - {"trace", *IDENTITY_COLUMNS}
            where = f"{registered} WHERE trace = {_literal(member.name)}"
            tables[table] = logical_select(table, have, where, cast=True)
        meta = self._export_meta(member.path).get(member.name, {})
        _check_version(member, meta)
        return meta, tables


def open_traces(paths: Sequence[str | Path]) -> TraceSet:
    """Open traces, folders of traces and Parquet exports as one set (see `TraceSet`)."""
    return TraceSet(paths)


def _create_union_views(con: duckdb.DuckDBPyConnection, traces: Sequence[SetTrace]) -> None:
    """Each table and view at the top level: every trace's rows, `trace` and `rank` first."""
    for name in (*logical_tables(), *(info.name for info in views_in_order())):
        branches = " UNION ALL BY NAME ".join(
            f"(SELECT {_literal(trace.name)} AS trace, "
            f"CAST({'NULL' if trace.rank is None else trace.rank} AS INTEGER) AS rank, * "
            f"FROM trace_{index}.{name})"
            for index, trace in enumerate(traces)
        )
        con.execute(f"CREATE VIEW main.{name} AS {branches}")


def _rank(member: Member, meta: dict[str, str]) -> int | None:
    """The trace's data-parallel rank (`_meta.dp_rank`; None when not one rank of many)."""
    rank = meta.get("dp_rank")
    if rank is None:
        return None
    if not rank.isdigit():
        raise TraceError(f"{member.path}: trace {member.name}: dp_rank {rank!r} is not a number")
    return int(rank)


def _check_version(member: Member, meta: dict[str, str]) -> None:
    version = meta.get("schema_version", "")
    if not version.isdigit() or int(version) not in SUPPORTED_VERSIONS:
        raise TraceError(
            f"{member.path}: trace {member.name} has schema version {version or 'none'}; "
            f"this stepscope reads {', '.join(map(str, sorted(SUPPORTED_VERSIONS)))} "
            f"(newest {SCHEMA_VERSION})"
        )


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
