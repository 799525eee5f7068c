"""The TUI's SQL: one typed, commented `.sql` file per query in `sql/`, read once."""

from __future__ import annotations

from stepscope.schema import sql_files


def query(name: str) -> str:
    """The statement in `sql/<name>.sql`, read by the schema's one loader."""
    return sql_files.query(__package__, name)
