"""Sparklines of budget use and free KV blocks over the whole trace, the cursor's step marked."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from ..models import PlotSeries

_LEVELS = "▁▂▃▄▅▆▇█"
_LABEL = 8


def resample(values: tuple[float, ...], width: int, reduce: str) -> list[float]:
    """`values` stretched or squeezed into `width` points ('mean' or 'min' of each span)."""
    count = len(values)
    if count == 0 or width <= 0:
        return []
    points = []
    for column in range(width):
        start = column * count // width
        end = max((column + 1) * count // width, start + 1)
        span = values[start:end]
        points.append(min(span) if reduce == "min" else sum(span) / len(span))
    return points


def sparkline(points: list[float], top: float) -> str:
    if top <= 0:
        return _LEVELS[0] * len(points)
    return "".join(
        _LEVELS[min(int(max(point, 0.0) / top * (len(_LEVELS) - 1) + 0.5), len(_LEVELS) - 1)]
        for point in points
    )


def _runs(text: str, styles: list[Style]) -> list[Segment]:
    """Segments of `text`, one per run of characters with the same style."""
    segments: list[Segment] = []
    start = 0
    for index in range(1, len(text) + 1):
        if index == len(text) or styles[index] != styles[start]:
            segments.append(Segment(text[start:index], styles[start]))
            start = index
    return segments


class StepPlot(Widget):
    """Budget use (mean per column) and free blocks (least per column) over all steps."""

    HELP = """
## Plot

Top: share of the token budget scheduled (mean over the steps of each column).
Bottom: free KV blocks after `schedule()` (least in each column), red where
preemptions happened. `▲` marks the cursor's step.
"""

    series: reactive[PlotSeries | None] = reactive(None)
    cursor_step: reactive[int] = reactive(0, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._lines: tuple[Strip, Strip] | None = None
        self._lines_width = 0
        """The two sparkline rows for a width, kept while only the cursor moves."""

    def watch_series(self) -> None:
        self._lines = None

    def watch_cursor_step(self) -> None:
        self.refresh(Region(0, 2, self.size.width, 1))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        series = self.series
        if series is None or series.num_steps == 0 or width <= _LABEL:
            label = ("budget", "free", "")[y] if y < 3 else ""
            return Strip([Segment(label.ljust(width), Style(dim=True))])
        if y == 2:
            return self._marker(series, width)
        if y > 2:
            return Strip.blank(width)
        if self._lines is None or self._lines_width != width:
            self._lines = self._sparklines(series, width - _LABEL)
            self._lines_width = width
        return self._lines[y]

    def _sparklines(self, series: PlotSeries, width: int) -> tuple[Strip, Strip]:
        bold = Style(bold=True)
        budget = sparkline(resample(series.budget_use, width, "mean"), 1.0)
        free_points = resample(tuple(map(float, series.num_free_blocks)), width, "min")
        preempted = resample(tuple(map(float, series.preempted)), width, "mean")
        free = sparkline(free_points, series.num_usable_blocks)
        red, blue = Style(color="red"), Style(color="blue")
        return (
            Strip([Segment("budget".ljust(_LABEL), bold), Segment(budget, Style(color="green"))]),
            Strip(
                [
                    Segment("free".ljust(_LABEL), bold),
                    *_runs(free, [red if hit > 0 else blue for hit in preempted]),
                ]
            ),
        )

    def _marker(self, series: PlotSeries, width: int) -> Strip:
        columns = width - _LABEL
        column = min(self.cursor_step * columns // series.num_steps, columns - 1)
        label = f"▲ step {self.cursor_step:,}"
        start = column
        if column + len(label) > columns:
            label = f"step {self.cursor_step:,} ▲"
            start = max(column - len(label) + 1, 0)
        text = (" " * (_LABEL + start) + label).ljust(width)[:width]
        return Strip([Segment(text, Style(color="yellow", bold=True))])
