"""Every `.sql` file of stepscope, read through one loader with one comment rule.

A file opens with a header of `--` lines: what the statement returns (or does) and
each of its parameters (`$1`, `$name`). The statement handed to DuckDB is the file
without its comments: a `--` outside a string literal or a quoted name starts a
comment that runs to the end of its line.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_COMMENT_OR_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*")


def strip_comments(text: str) -> str:
    """`text` without its `--` comments; string literals and quoted names are kept whole."""
    return _COMMENT_OR_QUOTED.sub(_keep_quoted, text).strip()


def _keep_quoted(match: re.Match[str]) -> str:
    return "" if match.group().startswith("--") else match.group()


@cache
def source(package: str, path: str) -> str:
    """The text of `path` inside `package` (e.g. `sql/abort_order.sql`), comments and all."""
    return resources.files(package).joinpath(path).read_text(encoding="utf-8")


@cache
def query(package: str, name: str, folder: str = "sql") -> str:
    """The statement in `<package>/<folder>/<name>.sql`, without its comments."""
    return strip_comments(source(package, f"{folder}/{name}.sql"))


def names(package: str, folder: str = "sql") -> list[str]:
    """The names of the `.sql` files in `<package>/<folder>`, sorted."""
    entries = resources.files(package).joinpath(folder).iterdir()
    return sorted(e.name.removesuffix(".sql") for e in entries if e.name.endswith(".sql"))


def header(text: str) -> list[str]:
    """The file's opening `--` lines, without the `--`: what it returns and its parameters."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line.removeprefix("--").strip())
    return lines
