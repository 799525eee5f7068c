"""A SafeTable whose rows repaint when a column widens to fit new cells."""

from __future__ import annotations

from textual.geometry import Size

from .safe_table import SafeTable


class AutoWidthTable(SafeTable):
    """DataTable sizes auto-width columns to new cells only when it goes idle; rows drawn
    before that stay cached at the old widths (cells cut short) until something else
    changes. A change of the table's width is such a resize: drop the cached rows then.
    """

    def watch_virtual_size(self, old: Size, new: Size) -> None:
        if new.width != old.width:
            self.notify_style_update()
