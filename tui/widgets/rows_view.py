"""A light table of a few rows (the step detail's lists), drawn line by line.

Cheaper to repaint than a DataTable, which matters when every step key redraws it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from stepscope.safe_text import safe_rich_text, safe_text

Cell = str | Text


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _safe(cell: Cell) -> Cell:
    """The cell with its unprintable characters escaped (a trace's id may hold any)."""
    return safe_rich_text(cell) if isinstance(cell, Text) else safe_text(cell)


class RowsView(ScrollView):
    """Rows under a header, columns as wide as their widest cell; an optional row cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "move(1)", "next row", show=False),
        Binding("up", "move(-1)", "previous row", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"rows-view--header", "rows-view--cursor"}

    cursor_row: reactive[int] = reactive(0)

    def __init__(
        self, columns: Sequence[str], *, cursor: bool = False, classes: str | None = None
    ) -> None:
        super().__init__(classes=classes)
        self.columns = tuple(columns)
        self.rows: list[tuple[Cell, ...]] = []
        self.show_cursor = cursor
        self.can_focus = cursor
        self._widths = [len(column) for column in self.columns]

    def set_rows(self, rows: Sequence[tuple[Cell, ...]]) -> None:
        """Replace the rows (drawn as plain text, controls escaped); the height follows the
        row count, the cursor stays put."""
        self.rows = [tuple(map(_safe, row)) for row in rows]
        self._widths = [
            max([len(title), *(len(_plain(row[i])) for row in self.rows)])
            for i, title in enumerate(self.columns)
        ]
        width = sum(self._widths) + len(self._widths) + 1
        # Never narrower than before: a width change means a new layout, most steps need none.
        self.virtual_size = Size(max(width, self.virtual_size.width), len(self.rows) + 1)
        if self.styles.height is None or self.styles.height.value != len(self.rows) + 1:
            self.styles.height = len(self.rows) + 1
        self.cursor_row = min(self.cursor_row, max(len(self.rows) - 1, 0))
        self.refresh()

    def action_move(self, delta: int) -> None:
        self.cursor_row = max(0, min(self.cursor_row + delta, len(self.rows) - 1))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x = int(self.scroll_offset.x)
        if y == 0:
            style = self.get_component_rich_style("rows-view--header")
            text = " " + " ".join(
                f"{t:<{w}}" for t, w in zip(self.columns, self._widths, strict=True)
            )
            strip = Strip([Segment(text, style)])
        else:
            index = int(self.scroll_offset.y) + y - 1
            if index >= len(self.rows):
                return Strip.blank(width, self.rich_style)
            on_cursor = self.show_cursor and index == self.cursor_row and self.has_focus
            base = self.get_component_rich_style("rows-view--cursor") if on_cursor else Style()
            segments = [Segment(" ", base)]
            for cell, cell_width in zip(self.rows[index], self._widths, strict=True):
                if isinstance(cell, Text):
                    style = base + cell.style if isinstance(cell.style, Style) else base
                    segments.append(Segment(f"{cell.plain:<{cell_width}} ", style))
                else:
                    segments.append(Segment(f"{cell:<{cell_width}} ", base))
            strip = Strip(segments)
        return strip.crop(scroll_x, scroll_x + width).extend_cell_length(width, self.rich_style)
