"""A sweep point's kept trace against the swept one: the timeline in diff mode, `escape` back."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.binding import Binding, BindingType

from stepscope.safe_text import safe_text

from ..messages import TraceOpened
from .timeline import TimelineScreen


class SweepPointScreen(TimelineScreen):
    """The original trace as A, point `point`'s what-if as B; `escape` returns to the sweep."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "back to sweep")]

    def __init__(self, original: Path, kept: Path, point: int) -> None:
        super().__init__(original, kept)
        self.kept = kept
        self.point = point

    def on_trace_opened(self, message: TraceOpened) -> None:
        """Name the point in the title; the timeline's own handler runs next (Textual walks
        the classes' handlers)."""
        self.sub_title = safe_text(f"point {self.point}: {self.path.name} ↔ {self.kept.name}")
