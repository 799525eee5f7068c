"""A new trace file starts as a copy of an empty one, made once per process.

Running the DDL (every type and table of `tables.sql`, and a COMMENT ON for each table
and column) is most of what creating a trace costs, and a replay started from the TUI
creates one for each `p`. The empty file is made once, with the writer's settings (its
block size is stored in the file), and kept in memory: nothing is left on disk.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

import duckdb
from stepscope.schema.ddl import statements

Config = Mapping[str, str | bool | int | float | list[str]]

_lock = threading.Lock()
_empty: dict[tuple[tuple[str, str], ...], bytes] = {}
"""The empty trace's bytes, by the settings it was made with."""


def create_empty_trace(path: Path, config: Config) -> None:
    """Write an empty trace at `path`, which must not exist yet (FileExistsError if it does)."""
    data = empty_trace(config)
    with open(path, "xb") as file:
        try:
            file.write(data)
        except OSError:
            with contextlib.suppress(OSError):
                path.unlink()
            raise


def empty_trace(config: Config) -> bytes:
    """The empty trace's bytes, made on the first call with these settings."""
    key = tuple(sorted((name, str(value)) for name, value in config.items()))
    with _lock:
        if key not in _empty:
            _empty[key] = _make(config)
        return _empty[key]


def _make(config: Config) -> bytes:
    with tempfile.TemporaryDirectory(prefix="stepscope-empty-trace-") as folder:
        path = Path(folder) / "empty.duckdb"
        con = duckdb.connect(str(path), config=dict(config))
        try:
            con.begin()
            for statement in statements():
                con.execute(statement)
            con.commit()
            con.checkpoint()
        finally:
            con.close()
        return path.read_bytes()
