"""The TUI on a sweep result: its points, the front marked, a point opening its trace diffed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from stepscope.replay.sweep.text_plot import FRONT_MARK
from stepscope.tui.app import StepscopeApp
from stepscope.tui.screens.sweep import SweepScreen
from stepscope.tui.screens.sweep_point import SweepPointScreen
from stepscope.tui.widgets.diff_banner import DiffBanner
from sweep_results import write_sweep
from test_cli import stepscope
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from tui_support import cells, drive, loaded, press, screen_text, trace, until
from typer.testing import CliRunner

from stepscope import tui as tui_package
from stepscope.cli import app

GRID = {"max_num_seqs": [24, 18, 12]}


def _sweep(folder: Path) -> Path:
    """The storm swept over max_num_seqs; point 1 kept (the storm recorded with 18 seqs)."""
    points: list[dict[str, Any]] = [
        {"max_num_seqs": 24, "num_preemptions": 40, "ttft_p99_steps": 300.0,
         "tokens_per_step": 27.0},
        {"max_num_seqs": 18, "num_preemptions": 25, "ttft_p99_steps": 320.0,
         "tokens_per_step": 28.0, "kept_trace": str(trace("storm_fewer_seqs"))},
        {"max_num_seqs": 12, "num_preemptions": 10, "ttft_p99_steps": 340.0,
         "tokens_per_step": 30.0},
    ]  # fmt: skip
    return write_sweep(folder / "sweep.duckdb", trace("storm"), GRID, points)


def _table(pilot: Pilot[Any]) -> list[list[str]]:
    return cells(pilot.app.screen.query_one("#sweep-points", DataTable))


def test_a_sweep_opens_as_its_points_and_a_point_as_its_diff(tmp_path: Path) -> None:
    path = _sweep(tmp_path)

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: bool(_table(pilot)))
        rows = _table(pilot)
        assert [row[1] for row in rows] == ["0", "1", "2"]
        # ttft against tokens per step: each point trades one for the other.
        assert [row[0] for row in rows] == [FRONT_MARK] * 3
        text = screen_text(pilot.app)
        assert "3 points over max_num_seqs (24, 18, 12)" in text
        assert "Pareto front of min:ttft_p99_steps, max:tokens_per_step: 3 of 3 points" in text
        await press(pilot, "down", "enter")
        screen = pilot.app.screen
        assert isinstance(screen, SweepPointScreen)
        assert (screen.path, screen.other_path) == (trace("storm"), trace("storm_fewer_seqs"))
        await loaded(pilot)
        await until(pilot, lambda: screen.diff is not None)
        banner = screen.query_one(DiffBanner)
        assert "decision" in str(banner.render())
        assert "point 1:" in screen.sub_title
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, SweepScreen)

    drive(StepscopeApp(path), scenario)


def test_a_point_without_a_kept_trace_says_how_to_keep_it(tmp_path: Path) -> None:
    path = _sweep(tmp_path)

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: bool(_table(pilot)))
        await press(pilot, "enter")
        assert isinstance(pilot.app.screen, SweepScreen)
        notice = str(pilot.app.screen.query_one("#sweep-notice", Static).render())
        assert notice.startswith("point 0 has no kept trace:")
        assert f"stepscope replay {trace('storm')} --set max_num_seqs=24 -o point0.duckdb" in notice

    drive(StepscopeApp(path), scenario)


def test_sorting_and_another_front_reorder_and_remark(tmp_path: Path) -> None:
    path = _sweep(tmp_path)

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: bool(_table(pilot)))
        await press(pilot, "s", *"num_preemptions", "enter")
        await until(pilot, lambda: [row[1] for row in _table(pilot)] == ["2", "1", "0"])
        await press(pilot, "f", *"max_num_seqs:num_preemptions", "enter")
        await until(
            pilot, lambda: "min:max_num_seqs, min:num_preemptions" in screen_text(pilot.app)
        )
        assert [row[0] for row in _table(pilot)] == [FRONT_MARK, "", ""]
        assert "max_num_seqs (lower is better) →" in screen_text(pilot.app)
        await press(pilot, "s", *"num_steps:ttft_p99_steps", "enter")
        notice = str(pilot.app.screen.query_one("#sweep-notice", Static).render())
        assert "give 1 objective(s)" in notice
        assert [row[1] for row in _table(pilot)] == ["2", "1", "0"]

    drive(StepscopeApp(path), scenario, size=(140, 50))


def test_the_tui_command_opens_a_sweep_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _sweep(tmp_path)
    opened: list[Path] = []

    def run_tui(path: Path, other: Path | None = None, **_: bool) -> None:
        opened.append(path)

    monkeypatch.setattr(tui_package, "run_tui", run_tui)
    assert CliRunner().invoke(app, ["tui", str(path)]).exit_code == 0
    assert opened == [path]
    result = stepscope("tui", str(path), "--diff", str(trace("storm")))
    assert result.returncode == 2
    assert "a sweep result opens alone" in result.stderr
    other = tmp_path / "other.duckdb"
    other.write_bytes(path.read_bytes())
    import duckdb

    with duckdb.connect(str(other)) as con:
        con.execute("UPDATE sweep_meta SET value = '9' WHERE key = 'sweep_schema_version'")
    result = stepscope("tui", str(other))
    assert result.returncode == 2
    assert "sweep schema version '9'; this release reads 1" in result.stderr
