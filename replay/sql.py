"""The replay part's SQL, one statement per file in `sql/`."""

from __future__ import annotations

from stepscope.schema import sql_files


def query(name: str) -> str:
    """The statement in `sql/<name>.sql`, read by the schema's one loader."""
    return sql_files.query(__package__, name)
