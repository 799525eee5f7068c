"""`stepscope tui --from-step/--to-step`: the timeline, the console and the findings of a window."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from stepscope.schema.step_window import StepWindow
from stepscope.tui.app import StepscopeApp
from stepscope.tui.diffing import diff_traces
from stepscope.tui.screens.console import ConsoleScreen
from stepscope.tui.trace_source import TraceSource
from stepscope.tui.widgets.diff_banner import DiffBanner
from stepscope.tui.widgets.step_table import StepTable
from textual.pilot import Pilot
from textual.widgets import DataTable, Static, TextArea
from tui_support import cells, drive, loaded, press, settle, trace, until


def test_the_timeline_and_console_hold_the_windows_steps() -> None:
    app = StepscopeApp(trace("storm"), window=StepWindow(100, 149))

    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        table = pilot.app.screen.query_one(StepTable)
        assert table.cursor_step == 100
        assert table.top == 100, "the window's first step heads the table"
        assert table.num_rows == 150, "steps before the window are rows not held"
        notice = str(pilot.app.screen.query_one("#notice", Static).render())
        assert "steps 100..149 of 0..379 are shown (--from-step/--to-step)" in notice
        assert "deleted" not in notice
        await press(pilot, "s")
        assert isinstance(pilot.app.screen, ConsoleScreen)
        status = pilot.app.screen.query_one("#console-status", Static)
        await until(pilot, lambda: "ready" in str(status.render()))
        await press(pilot, "ctrl+j")  # the console's first query: the summary
        await until(pilot, lambda: "rows" in str(status.render()))
        results = pilot.app.screen.query_one("#console-results", DataTable)
        assert cells(results)[0][0] == "50"

    drive(app, scenario)


def test_the_steps_before_the_window_are_outside_it() -> None:
    app = StepscopeApp(trace("storm"), window=StepWindow(100, 149))

    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        await press(pilot, "up")
        text = await press(pilot, "up")
        table = pilot.app.screen.query_one(StepTable)
        assert table.cursor_step == 98
        assert "98   outside the window" in text and "not recorded" not in text

    drive(app, scenario)


def test_the_cursor_stays_on_screen_when_the_table_shrinks() -> None:
    app = StepscopeApp(trace("storm"))

    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        table = pilot.app.screen.query_one(StepTable)
        await press(pilot, "G")
        assert table.cursor_step == 379
        await pilot.resize_terminal(140, 24)
        await settle(pilot)
        assert table.top <= 379 < table.top + table.visible_rows

    drive(app, scenario)


def test_a_diff_of_a_window_compares_and_shows_its_steps_only() -> None:
    app = StepscopeApp(trace("storm"), trace("storm_fewer_seqs"), window=StepWindow(100, 149))

    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        screen = pilot.app.screen
        await until(pilot, lambda: screen.diff is not None)
        diff = screen.diff
        assert diff.divergent_steps, "max_num_seqs 24 against 18 diverges in these steps"
        assert diff.divergent_steps[0] >= 100 and diff.divergent_steps[-1] <= 149
        assert diff.first_decision_step == diff.divergent_steps[0]
        banner = str(screen.query_one(DiffBanner).render())
        assert f"first divergence at step {diff.first_decision_step}" in banner
        table = screen.query_one(StepTable)
        assert (table.cursor_step, table.top) == (100, 100)
        await press(pilot, "s")
        status = pilot.app.screen.query_one("#console-status", Static)
        await until(pilot, lambda: "ready" in str(status.render()))
        console = pilot.app.screen.query_one("#console-query", TextArea)
        console.text = "SELECT (SELECT count(*) FROM steps), (SELECT count(*) FROM b.steps)"
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: "rows" in str(status.render()))
        results = pilot.app.screen.query_one("#console-results", DataTable)
        assert cells(results)[0][:2] == ["50", "50"], "both sides hold the window's steps only"

    drive(app, scenario)


def test_a_diff_of_the_whole_traces_finds_the_divergence_before_the_window() -> None:
    whole = diff_traces(TraceSource(trace("storm")), TraceSource(trace("storm_fewer_seqs")))
    assert whole.first_decision_step == 2, "the window above starts past the first divergence"


def test_a_window_the_trace_does_not_hold_or_with_follow_is_one_line() -> None:
    storm, short = str(trace("storm")), str(trace("incomplete"))
    for args, words in [
        ([storm, "--from-step", "5000"], "--from-step 5000: "),
        ([storm, "--from-step", "9", "--follow"], "--from-step/--to-step with --follow"),
        ([storm, "--from-step", "100", "--diff", short], f"--from-step 100: {short} has steps"),
    ]:
        result = subprocess.run(
            [sys.executable, "-m", "stepscope", "tui", *args],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert words in line, args
