"""Sparklines of budget use and free KV blocks over the whole trace, the cursor's step marked."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
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


class StepPlot(Widget):
    """Budget use (mean per column) and free blocks (least per column) over all steps."""

    HELP = """
## Plot

Top: share of the token budget scheduled (mean over the steps of each column).
Bottom: free KV blocks after `schedule()` (least in each column), red where
preemptions happened. `▲` marks the cursor's step.
"""

    series: reactive[PlotSeries | None] = reactive(None)
    cursor_step: reactive[int] = reactive(0)

    def render(self) -> Text:
        width = self.size.width - _LABEL
        series = self.series
        if series is None or width <= 0 or series.num_steps == 0:
            return Text("budget\nfree\n", style="dim")
        budget = resample(series.budget_use, width, "mean")
        free = resample(tuple(map(float, series.num_free_blocks)), width, "min")
        preempted = resample(tuple(map(float, series.preempted)), width, "mean")
        text = Text()
        text.append("budget".ljust(_LABEL), style="bold")
        text.append(sparkline(budget, 1.0), style="green")
        text.append("\n")
        text.append("free".ljust(_LABEL), style="bold")
        for char, hit in zip(sparkline(free, series.num_usable_blocks), preempted, strict=True):
            text.append(char, style="red" if hit > 0 else "blue")
        text.append("\n")
        column = min(self.cursor_step * width // series.num_steps, width - 1)
        label = f"▲ step {self.cursor_step:,}"
        if column + len(label) > width:
            label = f"step {self.cursor_step:,} ▲"
            start = max(column - len(label) + 1, 0)
        else:
            start = column
        text.append(" " * (_LABEL + start) + label, style="bold yellow")
        return text
