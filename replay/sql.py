"""The replay part's SQL, one query per file in `sql/`."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def query(name: str) -> str:
    """The query in `sql/<name>.sql`, without its comment lines."""
    text = resources.files(__package__).joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("--"))
