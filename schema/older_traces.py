"""An older trace read through today's tables: columns and tables it lacks read as "off".

A column added in a later schema version is missing from an older trace's table; a
TEMP view of the same name shadows the table and adds the column with its "off"
value (NULL, or 0 for a count), and a missing table becomes an empty TEMP view, so
every view and query binds to one set of columns whatever version wrote the file.
"""

from __future__ import annotations

import duckdb

from .ddl import table_specs
from .sql_files import query

_OFF_VALUES = {("_config", "num_speculative_tokens"): "0"}
"""Columns whose "off" value is not NULL."""


def shadow_missing_columns(con: duckdb.DuckDBPyConnection) -> None:
    """Create the TEMP views that give an older trace's tables today's columns."""
    rows = con.execute(query(__package__, "physical_columns")).fetchall()
    present: dict[str, set[str]] = {}
    for _, table, column in rows:
        present.setdefault(table, set()).add(column)
    for spec in table_specs():
        have = present.get(spec.name)
        missing = [(n, t) for n, t, _ in spec.columns if have is None or n not in have]
        if not missing:
            continue
        added = ", ".join(off_column(spec.name, n, t) for n, t in missing)
        # Names and types come from tables.sql: identifiers, spliced in.
        if have is None:
            con.execute(f"CREATE TEMP VIEW {spec.name} AS SELECT {added} WHERE false")
        else:
            source = f'"{rows[0][0]}".main.{spec.name}'
            con.execute(f"CREATE TEMP VIEW {spec.name} AS SELECT *, {added} FROM {source}")


def off_column(table: str, column: str, sql_type: str) -> str:
    """The select item that reads a column missing from `table` as its "off" value."""
    return f"CAST({_OFF_VALUES.get((table, column), 'NULL')} AS {sql_type}) AS {column}"
