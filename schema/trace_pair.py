"""A diff's two traces read as one: A's tables and views at the top level, B's as `b.<name>`."""

from __future__ import annotations

from pathlib import Path

from .reader import TraceReader

B_SCHEMA = "b"
"""Where side B's tables and views are (`SELECT * FROM b.steps`)."""


class TracePair(TraceReader):
    """Two traces (files or recording folders), read-only and sandboxed as one is (see
    `TraceReader`)."""

    def __init__(self, a: str | Path, b: str | Path) -> None:
        super().__init__(None)
        self.a, self.b = Path(a), Path(b)
        self._open(self._add_traces)

    def _add_traces(self) -> None:
        a = self._read_trace("trace_a", self.a)
        if a.recording is None:
            self._add_top_level("trace_a", a.tables, str(self.a), a.meta)
        else:
            self._add_schema("main", a.tables, str(self.a), a.meta)
        b = self._read_trace("trace_b", self.b)
        self._add_schema(B_SCHEMA, b.tables, str(self.b), b.meta)


def open_pair(a: str | Path, b: str | Path) -> TracePair:
    """Open a diff's two traces for reading together (see `TracePair`)."""
    return TracePair(a, b)
