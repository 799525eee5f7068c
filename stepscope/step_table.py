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


def cell_width(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)


class StepTable:
    """Prints the header once, then each row as it is added, in fixed columns."""

    def __init__(self, console: Console, columns: Sequence[Column]) -> None:
        self.console = console
        self.widths = _widths(columns, console.width)
        self.columns = columns
        self._style_codes: dict[str, tuple[str, str]] = {}
        self._blanks = [" " * width for width in self.widths]

    def print_header(self) -> None:
        self._rule("┏", "━", "┳", "┓")
        line = Text()
        for index, (column, width) in enumerate(zip(self.columns, self.widths, strict=True)):
            line.append("┃" if index == 0 else " ┃ ")
            line.append(_pad(column.header, width, column.right), style="bold")
        line.append(" ┃")
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
            out.append("│" + " │ ".join(parts) + " │\n")
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
            fill * (width + (1 if i == 0 else 2)) for i, width in enumerate(self.widths)
        )
        self.console.print(left + inner + right, soft_wrap=True, highlight=False, markup=False)


def _widths(columns: Sequence[Column], total: int) -> list[int]:
    """Fixed widths as given; the rest of `total` shared by ratio (each at least 8)."""
    borders = 3 * len(columns)
    fixed = sum(max(c.width, len(c.header)) for c in columns if not c.share)
    left = max(0, total - borders - fixed)
    shares = sum(c.share for c in columns)
    return [
        max(8, len(c.header), left * c.share // shares) if c.share else max(c.width, len(c.header))
        for c in columns
    ]


def _pad(text: str, width: int, right: bool) -> str:
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
    if cell_width(text) <= width:
        return [text]
    parts, part = [], ""
    for char in text:
        if cell_width(part + char) > width:
            parts.append(part)
            part = ""
        part += char
    return [*parts, part] if part else parts
