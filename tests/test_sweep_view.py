"""A sweep result answers questions: points ranked, the front marked, plotted as text and SVG."""

from __future__ import annotations

import io
import itertools
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from rich.console import Console
from stepscope.engine import InputError
from stepscope.replay.sweep.pareto import Objective
from stepscope.replay.sweep.plot import scatter
from stepscope.replay.sweep.result_reader import SweepError, is_sweep_result, read_sweep
from stepscope.replay.sweep.svg_plot import svg_plot
from stepscope.replay.sweep.table import sweep_table
from stepscope.replay.sweep.text_plot import FRONT_MARK, OTHER_MARK, text_plot
from stepscope.replay.sweep.view import render_sweep, wrap_name
from sweep_results import write_sweep
from tui_support import trace

GRID = {"num_blocks": [24, 32, 48], "max_num_batched_tokens": [64, 256]}
SVG = "{http://www.w3.org/2000/svg}"


def _metrics(num_blocks: int, budget: int) -> dict[str, Any]:
    """Made-up but shaped like a capacity sweep: more blocks, fewer preemptions."""
    preemptions = max(0, (48 - num_blocks) * 5 - budget // 64)
    return {
        "num_blocks": num_blocks,
        "max_num_batched_tokens": budget,
        "num_steps": 1000 + preemptions,
        "num_preemptions": preemptions,
        "ttft_p99_steps": 900.0 - budget + preemptions * 2.5,
        "tokens_per_step": 10.0 + budget / 64 - preemptions / 40,
        "ttft_p99_s": 2.0 + preemptions / 100,
        "num_finished": 200,
    }


@pytest.fixture
def result(tmp_path: Path) -> Path:
    points = [_metrics(b, t) for b, t in itertools.product(*GRID.values())]
    return write_sweep(tmp_path / "sweep.duckdb", "trace.duckdb", GRID, points)


def _render(path: Path, **options: Any) -> str:
    console = Console(file=io.StringIO(), width=100, color_system=None)
    render_sweep(path, options.pop("sort", None), options.pop("plot", None),
                 options.pop("out", None), console=console, **options)  # fmt: skip
    output = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(output, str)
    return output


def _table_points(output: str) -> list[tuple[bool, int]]:
    """(on the front, point) for each table row, in the order printed."""
    rows = re.findall(rf"^({FRONT_MARK}|\s)\s+(\d+)\s+\d+\s+\d+\s", output, re.MULTILINE)
    return [(mark == FRONT_MARK, int(point)) for mark, point in rows]


def test_the_table_is_ranked_by_the_objective_with_the_front_marked(result: Path) -> None:
    output = _render(result, sort="num_preemptions", pareto="num_blocks:num_preemptions")
    points = _table_points(output)
    preemptions = [_metrics(b, t)["num_preemptions"] for b, t in itertools.product(*GRID.values())]
    assert [p for _, p in points] == sorted(range(6), key=lambda p: (preemptions[p], p))
    # Fewest blocks for each count of preemptions: the larger budget at each block count.
    assert {p for on_front, p in points if on_front} == {1, 3, 4, 5}
    assert "Pareto front of min:num_blocks, min:num_preemptions: 4 of 6 points" in output
    assert "sorted by min:num_preemptions, best first (lower is better)" in output


def test_without_a_sort_the_table_is_in_grid_order_and_the_front_is_latency_against_throughput(
    result: Path,
) -> None:
    output = _render(result)
    assert [p for _, p in _table_points(output)] == list(range(6))
    assert "Pareto front of min:ttft_p99_steps, max:tokens_per_step" in output
    assert "points in grid order" in output


def test_max_sorts_the_largest_first(result: Path) -> None:
    table = sweep_table(read_sweep(result), "max:num_blocks")
    assert [row["num_blocks"] for row in table.rows] == [48, 48, 32, 32, 24, 24]
    assert [row["point"] for row in table.rows[:2]] == [4, 5]


def test_the_svg_parses_and_has_one_mark_per_point(result: Path, tmp_path: Path) -> None:
    out = tmp_path / "plot.svg"
    output = _render(result, plot="ttft_p99_steps:tokens_per_step", out=out)
    assert f"plot written to {out}" in output
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    marks = [c for c in root.iter(f"{SVG}circle") if "point" in c.get("class", "").split()]
    assert sorted(int(c.get("data-point", "")) for c in marks) == list(range(6))
    front = {int(c.get("data-point", "")) for c in marks if "front" in c.get("class", "")}
    drawn = scatter(read_sweep(result), [Objective("ttft_p99_steps", maximize=False),
                                         Objective("tokens_per_step", maximize=True)])  # fmt: skip
    assert front == {p.point for p in drawn.points if p.on_front} and front
    titles = [c.findtext(f"{SVG}title") or "" for c in marks]
    assert any(t.startswith("point 5: num_blocks=48, max_num_batched_tokens=256;") for t in titles)


def test_svg_labels_are_escaped(tmp_path: Path) -> None:
    points = [
        {"policy": "<fcfs>", "ttft_p99_steps": 1.0, "tokens_per_step": 2.0},
        {"policy": "a&b", "ttft_p99_steps": 2.0, "tokens_per_step": 3.0},
    ]
    grid = {"policy": ["<fcfs>", "a&b"]}
    path = write_sweep(tmp_path / "s.duckdb", "t.duckdb", grid, points, {"policy": "VARCHAR"})
    drawn = scatter(read_sweep(path), [Objective("ttft_p99_steps", maximize=False),
                                       Objective("tokens_per_step", maximize=True)])  # fmt: skip
    root = ET.fromstring(svg_plot(drawn, "<title & more>"))
    assert root.findtext(f"{SVG}title") == "<title & more>"
    titles = [c.findtext(f"{SVG}title") for c in root.iter(f"{SVG}circle")]
    assert "point 0: policy=<fcfs>; ttft_p99_steps=1, tokens_per_step=2" in titles
    assert "point 1: policy=a&b; ttft_p99_steps=2, tokens_per_step=3" in titles


def test_the_terminal_plot_marks_the_front_and_the_rest(result: Path) -> None:
    drawn = scatter(read_sweep(result), [Objective("ttft_p99_steps", maximize=False),
                                         Objective("tokens_per_step", maximize=True)])  # fmt: skip
    text = text_plot(drawn, width=80, height=16).plain
    front = sum(p.on_front for p in drawn.points)
    assert text.count(FRONT_MARK) == front + 1  # and the legend's
    assert text.count(OTHER_MARK) == len(drawn.points) - front + 1
    assert "ttft_p99_steps (lower is better) →" in text
    assert "↑ tokens_per_step (higher is better)" in text
    assert max(len(line) for line in text.splitlines()[:-1]) <= 80


def test_a_plot_in_the_terminal_follows_the_table(result: Path) -> None:
    output = _render(result, plot="num_blocks:num_preemptions")
    assert "Pareto front of min:num_blocks, min:num_preemptions: 4 of 6 points" in output
    assert "num_blocks (lower is better) →" in output


def test_seconds_without_a_good_fit_say_why(tmp_path: Path) -> None:
    points = [{k: v for k, v in _metrics(b, t).items() if k != "ttft_p99_s"}
              for b, t in itertools.product(*GRID.values())]  # fmt: skip
    path = write_sweep(tmp_path / "s.duckdb", "t.duckdb", GRID, points, fit_problem="R² 0.12")
    with pytest.raises(SweepError, match=r"ttft_p99_s has no value at any point; no seconds: "
                       r"the step-time fit is poor \(R² 0.12\)"):  # fmt: skip
        _render(path, plot="ttft_p99_s:tokens_per_step")
    assert "no seconds: the step-time fit is poor (R² 0.12)" in _render(path)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"out": Path("p.svg")}, "--plot-out needs --plot X:Y"),
        ({"plot": "num_blocks:num_preemptions", "out": Path("p.png")}, "name the file \\*.svg"),
        ({"plot": "num_blocks"}, "--plot takes two objectives, X:Y; got 1"),
        ({"sort": "num_blocks:num_steps"}, "--sort 'num_blocks:num_steps': one objective"),
        ({"sort": "kept_trace"}, "no numeric column 'kept_trace'"),
    ],
)
def test_a_bad_option_is_one_line(result: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        _render(result, **options)


def test_what_is_not_a_sweep_result_is_one_line(tmp_path: Path) -> None:
    storm = trace("storm")
    assert not is_sweep_result(storm)
    with pytest.raises(SweepError, match="a stepscope trace, not a sweep result"):
        read_sweep(storm)
    with pytest.raises(SweepError, match="no such file"):
        read_sweep(tmp_path / "missing.duckdb")
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(SweepError, match="not a sweep result \\(not a DuckDB file\\)"):
        read_sweep(text)
    newer = write_sweep(tmp_path / "v2.duckdb", "t.duckdb", GRID, [])
    import duckdb

    with duckdb.connect(str(newer)) as con:
        con.execute("UPDATE sweep_meta SET value = '2' WHERE key = 'sweep_schema_version'")
    assert is_sweep_result(newer)
    with pytest.raises(SweepError, match="sweep schema version '2'; this release reads 1"):
        read_sweep(newer)


def test_long_column_names_break_after_underscores() -> None:
    assert wrap_name("max_num_batched_tokens", 3) == "max_num_\nbatched_\ntokens"
    assert wrap_name("ttft_p99_s", 4) == "ttft_p99_s"
    assert wrap_name("point", 2) == "point"


def test_kept_points_are_marked_and_listed_relative_to_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = tmp_path / "sweep.points" / "point-1.duckdb"
    points = [{**_metrics(24, 64)}, {**_metrics(24, 256), "kept_trace": str(kept)}]
    path = write_sweep(tmp_path / "sweep.duckdb", tmp_path / "t.duckdb", GRID, points)
    monkeypatch.chdir(tmp_path)
    output = _render(path)
    assert re.search(rf"^[{FRONT_MARK} ]\s+1\s+24\s+256\s.*\byes\s*$", output, re.MULTILINE)
    assert "kept traces: point 1 sweep.points/point-1.duckdb" in output
    assert "sweep of t.duckdb: 2 points" in output
