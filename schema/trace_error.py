"""The errors a trace reader raises: one line a user reads, and DuckDB's whole text beside it."""

from __future__ import annotations


class TraceError(ValueError):
    """A file that is not a readable trace, or a query the trace cannot answer."""

    def __init__(self, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.detail = message if detail is None else detail
        """DuckDB's whole message, hints and the caret under a bad token included (a console
        shows it); the one line when there is no more."""


class TraceDamagedError(TraceError):
    """A trace's own bytes failed a query: a damaged or cut block, found when it was read."""


class RecordingChangedError(TraceError):
    """A recording's file went away while it was read: the writer closed or deleted a segment."""
