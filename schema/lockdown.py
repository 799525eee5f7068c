"""The one read-only lockdown every connection over a trace (or a sweep result) is under.

External access off (no file, URL or extension a query could reach, but the folders of
the recordings read), no extension loaded or installed on its own, no Python variable
read as a table, and the configuration locked so no query can turn any of it back on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from .reader_memory import reader_limits

LOCKED_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "python_enable_replacements": False,
    "lock_configuration": True,
}
"""The settings, `lock_configuration` last (nothing changes after it)."""


def connect_locked(path: Path | None = None) -> duckdb.DuckDBPyConnection:
    """`path` opened read-only under the lockdown (an empty in-memory database when None),
    within a reader's memory (`reader_memory`)."""
    if path is None:
        con = connect_unlocked()
    else:
        con = duckdb.connect(str(path), read_only=True, config=_unlocked_config())
    lock(con)
    return con


def connect_unlocked() -> duckdb.DuckDBPyConnection:
    """An in-memory database to attach traces to, locked by `lock` once they are, within a
    reader's memory (`reader_memory`)."""
    return duckdb.connect(":memory:", config=_unlocked_config())


def lock(con: duckdb.DuckDBPyConnection, readable: Sequence[Path] = ()) -> None:
    """Put `con` under the lockdown (after its traces are attached: attaching reads files);
    `readable`: folders whose files its queries still read (a recording's Parquet)."""
    if readable:
        con.execute("SET allowed_directories = ?", [[_folder(path) for path in readable]])
    for name, value in LOCKED_CONFIG.items():
        # Setting names and values are the constants above: spliced in.
        con.execute(f"SET {name} = {str(value).lower()}")


def _unlocked_config() -> dict[str, str | bool | int | float | list[str]]:
    """A reader's memory, and no extension loaded or installed on its own; the rest of the
    lockdown is set by `lock` (DuckDB refuses a temp folder given beside a locked config)."""
    settings = ("autoload_known_extensions", "autoinstall_known_extensions")
    return {**reader_limits(), **{name: LOCKED_CONFIG[name] for name in settings}}


def _folder(path: Path) -> str:
    """The folder as DuckDB compares it with a file's path: absolute, ending in a slash."""
    return str(path.resolve()).rstrip("/") + "/"
