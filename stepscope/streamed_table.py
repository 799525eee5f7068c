"""A table printed a row at a time: fixed column widths, so nothing is held for the whole run.

Rich's `Table` measures every row before it prints any, so a long run held every row
in memory until the end. Here the widths come from the workload's limits and the
console's width, each row is wrapped into its cells and printed as it completes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

Piece = tuple[str, str]
"""A word of a cell and its style ("" for none)."""
Cell = Sequence[Piece]


@dataclass(frozen=True)
class Column:
    header: str
    width: int
    """Cells' width; 0: a share of what the fixed columns leave."""
    share: int = 0
    right: bool = False
    style: str = ""
    min_width: int = 0
    """A fixed column may shrink to this (never below its header) so the shared ones get
    their least; a shared column's least width (8 when 0)."""


def cell_width(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)


class StepTable:
    """Prints the header once, then each row as it is added, in fixed columns."""

    def __init__(self, console: Console, columns: Sequence[Column]) -> None:
        self.console = console
        self.widths, self.gap = _layout(columns, console.width)
        self.columns = columns
        self._style_codes: dict[str, tuple[str, str]] = {}
        self._blanks = [" " * width for width in self.widths]
        self._sep = " " * self.gap + "│" + " " * self.gap

    def print_header(self) -> None:
        self._rule("┏", "━", "┳", "┓")
        line = Text()
        for index, (column, width) in enumerate(zip(self.columns, self.widths, strict=True)):
            line.append("┃" if index == 0 else self._sep.replace("│", "┃"))
            line.append(_pad(column.header, width, right=column.right), style="bold")
        line.append(" " * self.gap + "┃")
        self.console.print(line, soft_wrap=True, highlight=False)
        self._rule("┡", "━", "╇", "┩")

    def print_row(self, cells: Sequence[Cell]) -> None:
        """One row, each cell wrapped at spaces (a word wider than its cell is folded)."""
        rendered = [self._cell_lines(cell, index) for index, cell in enumerate(cells)]
        height = max(len(lines) for lines in rendered)
        blanks = self._blanks
        out = []
        for line_index in range(height):
            parts = [
                lines[line_index] if line_index < len(lines) else blanks[index]
                for index, lines in enumerate(rendered)
            ]
            out.append("│" + self._sep.join(parts) + " " * self.gap + "│\n")
        self.console.file.write("".join(out))

    def _cell_lines(self, cell: Cell, index: int) -> list[str]:
        """The cell's lines, each padded to the column's width and styled."""
        column, width = self.columns[index], self.widths[index]
        lines = []
        for pieces in _wrap(cell, width):
            used = sum(cell_width(text) for text, _ in pieces) + len(pieces) - 1
            gap = " " * (width - used)
            words = []
            for text, style in pieces:
                start, end = self._codes(style or column.style)
                words.append(f"{start}{text}{end}" if start else text)
            line = " ".join(words)
            lines.append(gap + line if column.right else line + gap)
        return lines or [self._blanks[index]]

    def _codes(self, style: str) -> tuple[str, str]:
        """The terminal codes that start and end `style` on this console ("" without colour)."""
        codes = self._style_codes.get(style)
        if codes is None:
            codes = ("", "")
            if style and self.console.color_system is not None and not self.console.no_color:
                with self.console.capture() as capture:
                    self.console.print(Text("\x00", style=style), end="")
                start, _, end = capture.get().partition("\x00")
                codes = (start, end)
            self._style_codes[style] = codes
        return codes

    def print_footer(self) -> None:
        self._rule("└", "─", "┴", "┘")

    def _rule(self, left: str, fill: str, cross: str, right: str) -> None:
        inner = cross.join(
            fill * (width + self.gap * (1 if i == 0 else 2)) for i, width in enumerate(self.widths)
        )
        self.console.print(left + inner + right, soft_wrap=True, highlight=False, markup=False)


def _layout(columns: Sequence[Column], total: int) -> tuple[list[int], int]:
    """Column widths and the padding beside each border: one space, none when it does not fit."""
    for gap in (1, 0):
        borders = 2 + gap + (len(columns) - 1) * (2 * gap + 1)
        widths = _widths(columns, total - borders)
        if sum(widths) + borders <= total:
            break
    return widths, gap


def _widths(columns: Sequence[Column], room: int) -> list[int]:
    """Fixed columns at their width, shrunk toward their least if the shared ones need it; the
    shared columns get their least and then what is left by ratio."""
    widths = [0 if c.share else max(c.width, len(c.header)) for c in columns]
    least = [max(c.min_width or 8, len(c.header)) if c.share else 0 for c in columns]
    shortfall = sum(widths) + sum(least) - room
    for index, column in enumerate(columns):
        floor = max(column.min_width, len(column.header))
        if shortfall > 0 and not column.share and column.min_width and widths[index] > floor:
            cut = min(shortfall, widths[index] - floor)
            widths[index] -= cut
            shortfall -= cut
    extra = max(0, room - sum(widths) - sum(least))
    shares = sum(c.share for c in columns) or 1
    return [w if not c.share else lo + extra * c.share // shares
            for c, w, lo in zip(columns, widths, least, strict=True)]  # fmt: skip


def _pad(text: str, width: int, *, right: bool) -> str:
    gap = " " * max(0, width - cell_width(text))
    return gap + text if right else text + gap


def _append_line(row: Text, pieces: Sequence[Piece], width: int, column: Column) -> None:
    used = sum(cell_width(text) for text, _ in pieces) + max(0, len(pieces) - 1)
    gap = " " * max(0, width - used)
    if column.right:
        row.append(gap)
    for index, (text, style) in enumerate(pieces):
        if index:
            row.append(" ")
        row.append(text, style=style or column.style)
    if not column.right:
        row.append(gap)


def _wrap(cell: Cell, width: int) -> list[list[Piece]]:
    lines: list[list[Piece]] = []
    line: list[Piece] = []
    used = 0
    for text, style in cell:
        for part in _fold(text, width):
            size = cell_width(part)
            if line and used + 1 + size > width:
                lines.append(line)
                line, used = [], 0
            used += size + (1 if line else 0)
            line.append((part, style))
    if line:
        lines.append(line)
    return lines


def _fold(text: str, width: int) -> list[str]:
    """`text` in pieces of at most `width`, broken after a `_`, `-` or `/` where there is one."""
    if cell_width(text) <= width:
        return [text]
    parts, part = [], ""
    for char in text:
        if cell_width(part + char) > width:
            cut = max(part.rfind("_"), part.rfind("-"), part.rfind("/")) + 1
            cut = cut if 0 < cut < len(part) else len(part)
            parts.append(part[:cut])
            part = part[cut:]
        part += char
    return [*parts, part] if part else parts
