"""The console's query editor: a TextArea where `ctrl+a` selects all, as editors do."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import TextArea


class QueryEditor(TextArea):
    """`ctrl+a` selects the whole query (`home` still goes to the line's start)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+a", "select_all", "select all", show=False),
    ]

    def insert_name(self, name: str) -> None:
        """Put `name` at the cursor, replacing any selection, with a space where words meet."""
        start, end = sorted(self.selection)
        before = self.get_text_range((start[0], 0), start)
        after = self.get_text_range(end, (end[0], len(self.document.get_line(end[0]))))
        left = " " if before and not before[-1].isspace() else ""
        right = " " if after and not after[0].isspace() else ""
        self.replace(f"{left}{name}{right}", start, end)
