"""Following a recording while it is written: its trace opened again every second, and the
screen told when the recording holds other steps than the trace it shows.

A recording folder's readers see its closed segments and the parts of its open one written
so far (`schema/recording_layout.py`); a trace opened once keeps what it saw. So the
follower opens the folder again in a worker, compares what it holds with what the screen
shows, and posts `TraceGrew` with the new source when they differ; the screen swaps it in
and keeps the old one open a while for the workers still reading it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
from stepscope.schema import TraceError
from stepscope.schema.recording_layout import writer_pid
from textual.screen import Screen

from .messages import TraceGrew
from .models import TailState
from .trace_source import TraceSource

FOLLOW_INTERVAL_S = 1.0
"""How often the recording is opened again: new steps are on screen about this long after
the recorder hands them over (it does so at least every second)."""


class Follower:
    """Opens `path` again every `FOLLOW_INTERVAL_S` and tells `screen` what changed."""

    def __init__(self, screen: Screen[None], path: Path, shown: TailState) -> None:
        self.screen = screen
        self.path = path
        self.shown = shown
        """What the screen shows now (set on the UI thread, read by the worker)."""
        self._reading = False
        """A worker is opening the recording: a tick then waits for the next (a busy
        machine can take longer than the interval to open a long recording)."""

    def start(self) -> None:
        self.screen.set_interval(FOLLOW_INTERVAL_S, self._poll)

    def _poll(self) -> None:
        if self._reading:
            return
        self._reading = True
        self.screen.run_worker(self._reopen, thread=True, group="follow", exit_on_error=False)

    def _reopen(self) -> None:
        """In a worker: the recording opened again, posted if it holds other steps."""
        try:
            source = TraceSource(self.path)
            state = TailState.of(source.info, writer_pid(self.path))
        except (TraceError, duckdb.Error):
            return  # a segment merged or deleted while it was opened: the next tick sees it
        finally:
            self._reading = False
        if state == self.shown:
            source.close()
            return
        self.screen.post_message(TraceGrew(source, state))
