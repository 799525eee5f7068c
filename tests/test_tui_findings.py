"""`f` in the TUI: doctor's findings on a real recording, and a jump to one with its
requests marked in the step detail."""

from __future__ import annotations

from typing import Any

from stepscope.tui.app import StepscopeApp
from stepscope.tui.screens.findings import FindingsScreen
from stepscope.tui.widgets.rows_view import RowsView
from stepscope.tui.widgets.step_detail import MARK_STYLE, StepDetailView
from stepscope.tui.widgets.step_table import StepTable
from textual.pilot import Pilot
from textual.widgets import OptionList
from tui_support import drive, press, screen_text, trace, until


def test_f_lists_the_findings_and_jumps_to_one_with_its_requests_marked() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "f")
        await until(pilot, lambda: isinstance(pilot.app.screen, FindingsScreen))
        screen = pilot.app.screen
        assert isinstance(screen, FindingsScreen)
        kinds = [finding.kind for finding in screen.findings]
        assert kinds[0] == "preemption_thrash"
        text = screen_text(pilot.app)
        assert "critical" in text and "preemption_thrash  steps 3..273" in text
        first = screen.findings[0]
        options = screen.query_one(OptionList)
        assert options.option_count == len(kinds)
        await press(pilot, "enter")
        await until(pilot, lambda: not isinstance(pilot.app.screen, FindingsScreen))
        await until(
            pilot, lambda: pilot.app.screen.query_one(StepTable).cursor_step == first.steps[0]
        )
        view = pilot.app.screen.query_one("#detail-a", StepDetailView)
        assert view.highlighted == frozenset(first.requests)
        table = view.query_one(".detail-scheduled", RowsView)
        marked = [row[0] for row in table.rows if MARK_STYLE in str(getattr(row[0], "style", ""))]
        shown = [str(cell) for cell in marked]
        assert shown and set(shown) <= set(first.requests)

    drive(StepscopeApp(trace("storm")), scenario)


def test_escape_leaves_the_findings_without_moving() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "f")
        await until(pilot, lambda: isinstance(pilot.app.screen, FindingsScreen))
        await press(pilot, "escape")
        await until(pilot, lambda: not isinstance(pilot.app.screen, FindingsScreen))
        assert pilot.app.screen.query_one(StepTable).cursor_step == 0
        view = pilot.app.screen.query_one("#detail-a", StepDetailView)
        assert view.highlighted == frozenset()

    drive(StepscopeApp(trace("storm")), scenario)
