"""A diff's two traces read as one: A's tables and views at the top level, B's as `b.<name>`;
both, if given one, through the same window of steps."""

from __future__ import annotations

from pathlib import Path

from .reader import TraceReader
from .step_window import WHOLE, StepWindow

B_SCHEMA = "b"
"""Where side B's tables and views are (`SELECT * FROM b.steps`)."""


class TracePair(TraceReader):
    """Two traces (files or recording folders), read-only and sandboxed as one is (see
    `TraceReader`), each cut to `window` as `open_trace` cuts one: a side that does not
    hold the window's bounds is a TraceError naming it."""

    def __init__(self, a: str | Path, b: str | Path, window: StepWindow = WHOLE) -> None:
        super().__init__(None)
        self.a, self.b = Path(a), Path(b)
        self.window = window
        self._open(self._add_traces)

    def _add_traces(self) -> None:
        self._add_main("trace_a", self._read_trace("trace_a", self.a), self.a, self.window)
        b = self._read_trace("trace_b", self.b)
        tables, _ = self._cut_to_window(B_SCHEMA, b.tables, self.b, self.window)
        self._add_schema(B_SCHEMA, tables, str(self.b), b.meta)


def open_pair(a: str | Path, b: str | Path, window: StepWindow = WHOLE) -> TracePair:
    """Open a diff's two traces for reading together (see `TracePair`), all of each or
    the steps of `window`."""
    return TracePair(a, b, window)
