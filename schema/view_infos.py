"""The reader's views: each `views/*.sql` with its one-line description, in creation order."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from .ddl import logical_tables
from .sql_files import header, names, source, strip_comments

_READ = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)", re.IGNORECASE)


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


@cache
def queryable_names() -> frozenset[str]:
    """The names a query reads: every view and every `_` table."""
    return frozenset(info.name for info in view_infos()) | frozenset(logical_tables())


@cache
def views_in_order() -> tuple[ViewInfo, ...]:
    """Every view, each after the views it names after a FROM or a JOIN."""
    infos = {info.name: info for info in view_infos()}
    reads = {
        name: set(_READ.findall(strip_comments(info.sql))) & (infos.keys() - {name})
        for name, info in infos.items()
    }
    ordered: list[ViewInfo] = []
    while len(ordered) < len(infos):
        done = {info.name for info in ordered}
        ready = [n for n in sorted(infos) if n not in done and reads[n] <= done]
        assert ready, f"views read each other in a cycle: {sorted(set(infos) - done)}"
        ordered.extend(infos[name] for name in ready)
    return tuple(ordered)
