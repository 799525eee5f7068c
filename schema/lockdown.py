"""The one read-only lockdown every connection over a trace (or a sweep result) is under.

External access off (no file, URL or extension a query could reach, but the folders of
the recordings read), no extension loaded or installed on its own, no Python variable
read as a table, and the configuration locked so no query can turn any of it back on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

LOCKED_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "python_enable_replacements": False,
    "lock_configuration": True,
}
"""The settings, `lock_configuration` last (nothing changes after it)."""


def connect_locked(path: Path | None = None) -> duckdb.DuckDBPyConnection:
    """`path` opened read-only under the lockdown (an empty in-memory database when None)."""
    if path is None:
        return duckdb.connect(":memory:", config=LOCKED_CONFIG)
    return duckdb.connect(str(path), read_only=True, config=LOCKED_CONFIG)


def connect_unlocked() -> duckdb.DuckDBPyConnection:
    """An in-memory database to attach traces to, locked by `lock` once they are."""
    settings = ("autoload_known_extensions", "autoinstall_known_extensions")
    return duckdb.connect(":memory:", config={name: LOCKED_CONFIG[name] for name in settings})


def lock(con: duckdb.DuckDBPyConnection, readable: Sequence[Path] = ()) -> None:
    """Put `con` under the lockdown (after its traces are attached: attaching reads files);
    `readable`: folders whose files its queries still read (a recording's Parquet)."""
    if readable:
        con.execute("SET allowed_directories = ?", [[_folder(path) for path in readable]])
    for name, value in LOCKED_CONFIG.items():
        # Setting names and values are the constants above: spliced in.
        con.execute(f"SET {name} = {str(value).lower()}")


def _folder(path: Path) -> str:
    """The folder as DuckDB compares it with a file's path: absolute, ending in a slash."""
    return str(path.resolve()).rstrip("/") + "/"
