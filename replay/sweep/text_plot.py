"""A scatter drawn in character cells, for the terminal and the TUI: ◆ on the front, ○ off it.

One cell per mark keeps the picture readable at any font and colour setting;
a cell that holds several points shows the front's mark if any of them is on it.
"""

from __future__ import annotations

from rich.text import Text

from .plot import Scatter

FRONT_MARK = "◆"
OTHER_MARK = "○"
FRONT_STYLE = "bold yellow"
OTHER_STYLE = "cyan"
MIN_WIDTH = 30
MIN_HEIGHT = 6


def text_plot(plot: Scatter, width: int = 80, height: int = 16) -> Text:
    """The scatter in `width` × `height` cells of plot area plus axes, title and legend."""
    y_labels = plot.y_axis.labels()
    margin = max(len(label) for label in y_labels) + 1
    columns = max(MIN_WIDTH, width - margin - 1)
    rows = max(MIN_HEIGHT, height)
    grid = _marks(plot, columns, rows)
    ticks = zip(plot.y_axis.ticks, y_labels, strict=True)
    label_at = {_row(plot.y_axis.fraction(tick), rows): label for tick, label in ticks}
    text = Text(f"↑ {plot.y.column} ({plot.y.better})\n", style="bold")
    for row in range(rows):
        label = label_at.get(row)
        text.append(" " * margin + "│" if label is None else label.rjust(margin - 1) + " ┤")
        for mark in grid[row]:
            text.append(mark or " ", style=FRONT_STYLE if mark == FRONT_MARK else OTHER_STYLE)
        text.append("\n")
    text.append(" " * margin + "└" + "─" * columns + "\n")
    text.append(" " * (margin + 1) + _x_labels(plot, columns) + "\n")
    x_title = f"{plot.x.column} ({plot.x.better}) →"
    text.append(x_title.rjust(margin + 1 + columns) + "\n", style="bold")
    text.append(f"{FRONT_MARK} ", style=FRONT_STYLE)
    text.append(plot.legend + "   ")
    text.append(f"{OTHER_MARK} ", style=OTHER_STYLE)
    text.append("other points")
    if plot.num_unplotted:
        text.append(f"   ({plot.num_unplotted} without a value not drawn)")
    return text


def _marks(plot: Scatter, columns: int, rows: int) -> list[list[str]]:
    grid = [[""] * columns for _ in range(rows)]
    for point in plot.points:
        row = _row(plot.y_axis.fraction(point.y), rows)
        column = round(plot.x_axis.fraction(point.x) * (columns - 1))
        if grid[row][column] != FRONT_MARK:
            grid[row][column] = FRONT_MARK if point.on_front else OTHER_MARK
    return grid


def _row(fraction: float, rows: int) -> int:
    return round((1 - fraction) * (rows - 1))


def _x_labels(plot: Scatter, columns: int) -> str:
    """Tick labels under their columns; one that would touch the previous one is left out."""
    line = [" "] * columns
    end = -2
    for tick, label in zip(plot.x_axis.ticks, plot.x_axis.labels(), strict=True):
        centre = round(plot.x_axis.fraction(tick) * (columns - 1))
        start = max(0, min(centre - len(label) // 2, len(line) - len(label)))
        if start > end + 1:
            line[start : start + len(label)] = label
            end = start + len(label)
    return "".join(line).rstrip()
