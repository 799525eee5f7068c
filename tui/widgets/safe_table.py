"""A DataTable that draws what it is given as text: never as markup, never a control character.

DataTable reads a `str` cell or label as markup and draws a control character in one as it
is; the strings in these tables come from a trace.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text, TextType
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from stepscope.safe_text import safe_rich_text


def safe_cell(value: object) -> object:
    """`value` as the table may draw it: numbers as they are, anything else as plain text."""
    if value is None or isinstance(value, int | float):
        return value
    return safe_rich_text(value if isinstance(value, Text) else str(value))


class SafeTable(DataTable[Any]):
    """Every cell and label drawn as plain text, unprintable characters escaped."""

    def add_column(
        self,
        label: TextType,
        *,
        width: int | None = None,
        key: str | None = None,
        default: Any | None = None,
    ) -> ColumnKey:
        return super().add_column(
            safe_rich_text(label), width=width, key=key, default=safe_cell(default)
        )

    def add_row(
        self,
        *cells: Any,
        height: int | None = 1,
        key: str | None = None,
        label: TextType | None = None,
    ) -> RowKey:
        return super().add_row(
            *map(safe_cell, cells),
            height=height,
            key=key,
            label=None if label is None else safe_rich_text(label),
        )
