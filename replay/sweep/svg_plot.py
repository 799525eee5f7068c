"""A scatter written as a standalone SVG file: one `circle.point` per point, the front joined.

Written with ElementTree, so every label is escaped; each mark carries its point's
number (`data-point`) and a `<title>` a browser shows on hover.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

from stepscope.tracer.export.output import atomic_file

from .plot import PlotPoint, Scatter

WIDTH, HEIGHT = 720, 480
LEFT, RIGHT, TOP, BOTTOM = 72, 24, 48, 64
FRONT_COLOUR, OTHER_COLOUR, GRID_COLOUR = "#d62728", "#1f77b4", "#dddddd"
_STYLE = f"""
text {{ font-family: sans-serif; font-size: 12px; fill: #222222; }}
.title {{ font-size: 14px; font-weight: bold; }}
.grid {{ stroke: {GRID_COLOUR}; stroke-width: 1; }}
.axis {{ stroke: #444444; stroke-width: 1; }}
.point.front {{ fill: {FRONT_COLOUR}; }}
.point.other {{ fill: {OTHER_COLOUR}; fill-opacity: 0.6; }}
.front-line {{ fill: none; stroke: {FRONT_COLOUR}; stroke-width: 1.5; stroke-dasharray: 4 3; }}
.point-label {{ font-size: 10px; fill: {FRONT_COLOUR}; }}
"""


def svg_plot(plot: Scatter, title: str) -> str:
    """The scatter as an SVG document."""
    root = ET.Element(
        "svg",
        xmlns="http://www.w3.org/2000/svg",
        width=str(WIDTH),
        height=str(HEIGHT),
        viewBox=f"0 0 {WIDTH} {HEIGHT}",
    )
    ET.SubElement(root, "title").text = title
    ET.SubElement(root, "style").text = _STYLE
    ET.SubElement(root, "rect", width=str(WIDTH), height=str(HEIGHT), fill="white")
    _text(root, LEFT, 20, title, "title")
    _grid(root, plot)
    front = plot.front
    if len(front) > 1:
        path = " ".join(f"{_x(plot, p):.1f},{_y(plot, p):.1f}" for p in front)
        ET.SubElement(root, "polyline", {"class": "front-line", "points": path})
    for point in plot.points:
        _mark(root, plot, point)
    _front_labels(root, plot)
    _legend(root, plot)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_svg(plot: Scatter, title: str, out: Path) -> None:
    """The plot written under a temporary name beside `out`, then renamed onto it."""
    with atomic_file(out) as temporary:
        temporary.write_text(svg_plot(plot, title), encoding="utf-8")


def _x(plot: Scatter, point: PlotPoint) -> float:
    return LEFT + plot.x_axis.fraction(point.x) * (WIDTH - LEFT - RIGHT)


def _y(plot: Scatter, point: PlotPoint) -> float:
    return HEIGHT - BOTTOM - plot.y_axis.fraction(point.y) * (HEIGHT - TOP - BOTTOM)


def _grid(root: ET.Element, plot: Scatter) -> None:
    """Tick lines and labels on both axes, the axes themselves and their titles."""
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    for tick, label in zip(plot.x_axis.ticks, plot.x_axis.labels(), strict=True):
        x = LEFT + plot.x_axis.fraction(tick) * (right - LEFT)
        _line(root, x, TOP, x, bottom, "grid")
        _text(root, x, bottom + 16, label, anchor="middle")
    for tick, label in zip(plot.y_axis.ticks, plot.y_axis.labels(), strict=True):
        y = bottom - plot.y_axis.fraction(tick) * (bottom - TOP)
        _line(root, LEFT, y, right, y, "grid")
        _text(root, LEFT - 6, y + 4, label, anchor="end")
    _line(root, LEFT, bottom, right, bottom, "axis")
    _line(root, LEFT, TOP, LEFT, bottom, "axis")
    _text(
        root, (LEFT + right) / 2, HEIGHT - 28, f"{plot.x.column} ({plot.x.better})", anchor="middle"
    )
    y_title = _text(
        root, 16, (TOP + bottom) / 2, f"{plot.y.column} ({plot.y.better})", anchor="middle"
    )
    y_title.set("transform", f"rotate(-90 16 {(TOP + bottom) / 2:.1f})")


def _mark(root: ET.Element, plot: Scatter, point: PlotPoint) -> None:
    kind = "front" if point.on_front else "other"
    x, y = _x(plot, point), _y(plot, point)
    attributes = {"class": f"point {kind}", "data-point": str(point.point)}
    attributes |= {"cx": f"{x:.1f}", "cy": f"{y:.1f}", "r": "4"}
    circle = ET.SubElement(root, "circle", attributes)
    ET.SubElement(
        circle, "title"
    ).text = f"{point.label}; {plot.x.column}={point.x:g}, {plot.y.column}={point.y:g}"


def _front_labels(root: ET.Element, plot: Scatter) -> None:
    """Each front point's number beside it; points drawn at one place share one label."""
    at: dict[tuple[float, float], list[int]] = {}
    for point in plot.front:
        at.setdefault((_x(plot, point), _y(plot, point)), []).append(point.point)
    for (x, y), numbers in at.items():
        _text(root, x + 6, y - 6, ", ".join(map(str, sorted(numbers))), "point-label")


def _legend(root: ET.Element, plot: Scatter) -> None:
    """Under the title: the front's mark and objectives at the left, the others' at the right."""
    y = TOP - 12
    _dot(root, LEFT + 4, y - 4, FRONT_COLOUR)
    _text(root, LEFT + 12, y, plot.legend)
    if len(plot.front) == len(plot.points) and not plot.num_unplotted:
        return
    note = "other points"
    if plot.num_unplotted:
        note += f" ({plot.num_unplotted} without a value not drawn)"
    _text(root, WIDTH - RIGHT, y, note, anchor="end")
    _dot(root, WIDTH - RIGHT - 8 - 6.5 * len(note), y - 4, OTHER_COLOUR)


def _dot(root: ET.Element, x: float, y: float, colour: str) -> None:
    ET.SubElement(root, "circle", {"cx": f"{x:.1f}", "cy": f"{y:.1f}", "r": "4", "fill": colour})


def _line(root: ET.Element, x1: float, y1: float, x2: float, y2: float, kind: str) -> None:
    ET.SubElement(
        root,
        "line",
        {"class": kind, "x1": f"{x1:.1f}", "y1": f"{y1:.1f}", "x2": f"{x2:.1f}", "y2": f"{y2:.1f}"},
    )


def _text(
    root: ET.Element, x: float, y: float, text: str, kind: str = "", anchor: str = "start"
) -> ET.Element:
    attributes = {"x": f"{x:.1f}", "y": f"{y:.1f}", "text-anchor": anchor}
    if kind:
        attributes["class"] = kind
    element = ET.SubElement(root, "text", attributes)
    element.text = text
    return element
