"""The trace's DDL from `tables.sql`, with its `--` comments turned into COMMENT ON statements."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from .sql_files import source, strip_comments

_CREATE_TABLE = re.compile(r"CREATE TABLE (\w+) \(")
_CREATE_ENUM = re.compile(r"CREATE TYPE (\w+) AS ENUM \(([^)]*)\)", re.DOTALL)
_COLUMN = re.compile(r"^\s+(\w+) ((?:\([^)]*\)|[^,(])+?),?\s+--\s*(.+)$")


@dataclass(frozen=True)
class TableSpec:
    name: str
    comment: str
    columns: tuple[tuple[str, str, str], ...]
    """(name, SQL type, comment) in table order."""


def tables_sql() -> str:
    """`tables.sql` as written: its comments document the tables and columns."""
    return source(__package__, "tables.sql")


def statements() -> list[str]:
    """CREATE TYPE / CREATE TABLE statements, then a COMMENT ON for every table and column."""
    sql = strip_comments(tables_sql())
    creates = [statement.strip() for statement in sql.split(";") if statement.strip()]
    return creates + [c for table in table_specs() for c in comment_statements(table)]


def comment_statements(table: TableSpec, kind: str = "TABLE", prefix: str = "") -> list[str]:
    """COMMENT ON statements for `table` and its columns, on a relation of that name.

    `kind` is TABLE or VIEW; `prefix` qualifies the name (e.g. `catalog.main.`).
    """
    name = f"{prefix}{table.name}"
    # COMMENT ON takes the table and column names as identifiers: they are spliced in.
    comments = [f"COMMENT ON {kind} {name} IS {_quote(table.comment)}"]
    for column, _, comment in table.columns:
        comments.append(f"COMMENT ON COLUMN {name}.{column} IS {_quote(comment)}")
    return comments


@cache
def table_specs() -> tuple[TableSpec, ...]:
    """Every table with its columns, parsed from `tables.sql`."""
    specs = []
    comment_lines: list[str] = []
    lines = iter(tables_sql().splitlines())
    for line in lines:
        if line.startswith("-- "):
            comment_lines.append(line[3:].strip())
            continue
        match = _CREATE_TABLE.match(line)
        if match is None:
            comment_lines = [] if not line.startswith("--") else comment_lines
            continue
        columns = []
        for column_line in lines:
            if column_line.startswith(")"):
                break
            column = _COLUMN.match(column_line)
            assert column is not None, f"tables.sql: uncommented column line {column_line!r}"
            columns.append((column.group(1), column.group(2).strip(), column.group(3).strip()))
        specs.append(TableSpec(match.group(1), " ".join(comment_lines), tuple(columns)))
        comment_lines = []
    return tuple(specs)


def logical_tables() -> tuple[str, ...]:
    """The `_name` relations a reader sees, in `tables.sql` order (each table stored as read)."""
    return tuple(spec.name for spec in table_specs())


@cache
def enum_types() -> dict[str, tuple[str, ...]]:
    """Each ENUM type of `tables.sql` with its values, in order."""
    return {
        match.group(1): tuple(re.findall(r"'([^']*)'", match.group(2)))
        for match in _CREATE_ENUM.finditer(tables_sql())
    }


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
