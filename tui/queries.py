"""The TUI's SQL: one typed, commented `.sql` file per query in `sql/`, read once."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def query(name: str) -> str:
    """The text of `sql/<name>.sql`."""
    return resources.files(__package__).joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")
