"""A diff's two traces read as one: A's tables and views at the top level, B's as `b.<name>`."""

from __future__ import annotations

from pathlib import Path

from .member_tables import attached_tables
from .reader import TraceReader

B_SCHEMA = "b"
"""Where side B's tables and views are (`SELECT * FROM b.steps`)."""


class TracePair(TraceReader):
    """Two trace files, read-only and sandboxed as one is (see `TraceReader`)."""

    def __init__(self, a: str | Path, b: str | Path) -> None:
        super().__init__(None)
        self.a, self.b = Path(a), Path(b)
        try:
            meta, tables = attached_tables(self._con, "trace_a", self.a)
            self._add_top_level("trace_a", tables, str(self.a), meta)
            meta, tables = attached_tables(self._con, "trace_b", self.b)
            self._add_schema(B_SCHEMA, tables, str(self.b), meta)
            self._lock()
        except BaseException:
            self._con.close()
            raise


def open_pair(a: str | Path, b: str | Path) -> TracePair:
    """Open a diff's two traces for reading together (see `TracePair`)."""
    return TracePair(a, b)
