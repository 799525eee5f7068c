"""One trace as a schema of its own: its logical `_` tables and every view.

The view SQL names tables without a schema; a view created in a schema resolves those
names in that schema first, so the same `views/*.sql` read one trace's tables there,
whether the schema is `main` (a lone trace), `b` (a diff's other side) or one of a set's.
"""

from __future__ import annotations

import re
from collections.abc import Collection

import duckdb

from .ddl import enum_types, table_specs
from .older_traces import off_column
from .sql_files import strip_comments
from .view_infos import views_in_order

_CONSTRAINT = re.compile(r"\s+(PRIMARY KEY|NOT NULL|UNIQUE)\b.*$")


def logical_select(table: str, have: Collection[str], source: str | None, *, cast: bool) -> str:
    """A SELECT giving `table` its columns, in order, from `source` holding the `have` ones.

    A column `source` lacks reads as its "off" value, as in an older trace, and with no
    `source` the table has no rows; `cast` gives each column its schema type (ENUMs are
    stored as text in Parquet).
    """
    (spec,) = (spec for spec in table_specs() if spec.name == table)
    items = []
    for name, declared, _ in spec.columns:
        sql_type = _CONSTRAINT.sub("", declared)
        if name not in have:
            items.append(off_column(table, name, sql_type))
        elif cast:
            items.append(f"CAST({name} AS {sql_type}) AS {name}")
        else:
            items.append(name)
    return f"SELECT {', '.join(items)} FROM {source or '(SELECT 1) WHERE false'}"


def create_enum_types(con: duckdb.DuckDBPyConnection) -> None:
    """The schema's ENUM types, for the columns a Parquet export stores as text."""
    for name, values in enum_types().items():
        # A type's name is an identifier and its values come from tables.sql: spliced in.
        labels = ", ".join("'" + value.replace("'", "''") + "'" for value in values)
        con.execute(f"CREATE TYPE {name} AS ENUM ({labels})")


def create_views(con: duckdb.DuckDBPyConnection, schema: str, selects: dict[str, str]) -> None:
    """Create `schema` (if new) with a view of each SELECT given (name → SELECT)."""
    # The schema's name and the views' names are identifiers: spliced in.
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for table, select in selects.items():
        con.execute(f"CREATE VIEW {schema}.{table} AS {select}")


def create_member_schema(
    con: duckdb.DuckDBPyConnection, schema: str, tables: dict[str, str]
) -> None:
    """Create `schema` with the logical tables given (name → SELECT) and every view over them
    (a table not given is found on the search path, as it is stored)."""
    create_views(con, schema, tables)
    for info in views_in_order():
        con.execute(f"CREATE VIEW {schema}.{info.name} AS {strip_comments(info.sql)}")
