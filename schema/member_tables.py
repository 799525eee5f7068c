"""Where a trace's logical `_` tables come from: an attached trace file, or its part of an export.

Either way each table becomes a SELECT giving it today's columns (`logical_select`),
so the same views read a file of any supported version and a Parquet export alike.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import duckdb

from .ddl import logical_tables, table_specs
from .member_views import logical_select
from .parquet_export import IDENTITY_COLUMNS, table_dataset
from .sql_files import query
from .trace_checks import attach_checked
from .trace_error import TraceError
from .version import SCHEMA_VERSION, TABLES_ADDED


def attached_tables(
    con: duckdb.DuckDBPyConnection, database: str, path: Path
) -> tuple[dict[str, str], dict[str, str]]:
    """Attach the trace file `path` read-only as `database`, once it passes the checks: its
    `_meta`, and each logical table's SELECT."""
    meta = attach_checked(con, database, path)
    version = int(meta["schema_version"])
    have = _stored_columns(con, database)
    _check_tables(path, version, have.keys())
    if version == SCHEMA_VERSION:
        have = _todays_columns()
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


def exported_tables(
    con: duckdb.DuckDBPyConnection, prefix: str, folder: Path, name: str
) -> dict[str, str]:
    """Each logical table's SELECT of trace `name`'s rows in the export `folder`, its files
    registered (read by pyarrow) as `<prefix>_<table>`."""
    tables = {}
    for table in logical_tables():
        dataset = table_dataset(folder, table)
        if dataset is None:
            tables[table] = logical_select(table, (), None, cast=True)
            continue
        registered = f"{prefix}_{table.removeprefix('_')}"
        con.register(registered, dataset)
        have = set(dataset.schema.names) - {"trace", *IDENTITY_COLUMNS}
        where = f"{registered} WHERE trace = {literal(name)}"
        tables[table] = logical_select(table, have, where, cast=True)
    return tables


def _stored_columns(con: duckdb.DuckDBPyConnection, database: str) -> dict[str, set[str]]:
    """The columns of each table stored in `database`."""
    have: dict[str, set[str]] = {}
    for table, column in con.execute(query(__package__, "attached_columns"), [database]).fetchall():
        have.setdefault(table, set()).add(column)
    return have


def _check_tables(path: Path, version: int, stored: Collection[str]) -> None:
    """Refuse a trace without a table its version has (an edited or damaged file)."""
    expected = {spec.name for spec in table_specs() if version >= TABLES_ADDED.get(spec.name, 0)}
    missing = sorted(expected - set(stored))
    if missing:
        raise TraceError(
            f"{path}: a stepscope trace without its {', '.join(missing)} table"
            f"{'s' if len(missing) > 1 else ''} (an edited or damaged file); re-record it"
        )


def _todays_columns() -> dict[str, set[str]]:
    """Every column of every table, for a trace of today's version, which must hold them all.

    Only an older trace lacks columns (they read as "off"); in one of today's version a
    missing column fails its table's SELECT.
    """
    return {spec.name: {column[0] for column in spec.columns} for spec in table_specs()}


def literal(text: str) -> str:
    """`text` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
