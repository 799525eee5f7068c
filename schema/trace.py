"""One trace file read: its tables and views at the top level, with its facts (`_meta`, config)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb

from .member_tables import attached_tables
from .reader import TraceReader
from .sql_files import query
from .trace_checks import check_every_block
from .trace_error import TraceError
from .trace_keys import key_problem

__all__ = ["Trace", "check_readable", "open_trace"]


_DATABASE = "trace_file"
"""The trace file's alias in the reader's database."""


class Trace(TraceReader):
    """An open trace file, read-only and sandboxed (see `TraceReader`).

    A query in a trace someone else made cannot read or write the reader's files.
    """

    def __init__(self, path: str | Path) -> None:
        super().__init__(Path(path))
        self.path: Path = Path(path)
        self._keys_checked = False
        try:
            self.meta, tables = attached_tables(self._con, _DATABASE, self.path)
            self._add_top_level(_DATABASE, tables, str(self.path), self.meta)
            self._lock()
        except BaseException:
            self._con.close()
            raise

    @property
    def complete(self) -> bool:
        return self.meta.get("complete") == "true"

    @property
    def schema_version(self) -> int:
        return int(self.meta["schema_version"])

    @cached_property
    def config(self) -> dict[str, Any]:
        cursor = self.execute(query(__package__, "config"))
        rows = cursor.fetchall()
        columns = [column[0] for column in cursor.description or ()]
        return dict(zip(columns, rows[0], strict=True)) if rows else {}

    @cached_property
    def num_steps(self) -> int:
        """Steps recorded, idle ones included (what the file holds, complete or not)."""
        return int(self.execute(query(__package__, "num_steps")).fetchall()[0][0])

    def read_all(self) -> None:
        """Read every stored byte, so a damaged block is an error now, not a missed difference."""
        try:
            check_every_block(self._con, _DATABASE, self.path)
        except duckdb.Error as error:
            raise self._error(error) from None

    def check_keys(self) -> None:
        """Refuse a trace whose rows cannot be found by their keys (`trace_keys`): replay and
        diff read every row by them. Checked once: the file is open read-only."""
        if self._keys_checked:
            return
        try:
            problem = key_problem(self._con, self.path)
        except duckdb.Error as error:
            raise self._error(error) from None
        if problem is not None:
            raise TraceError(problem)
        self._keys_checked = True


def open_trace(path: str | Path) -> Trace:
    """Open a trace for reading (see `Trace`)."""
    return Trace(path)


def check_readable(path: str | Path) -> None:
    """Open the trace and read every stored byte: a TraceError naming what cannot be read."""
    with open_trace(path) as trace:
        trace.read_all()
