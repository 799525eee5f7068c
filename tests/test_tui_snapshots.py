"""Snapshots of the main screens (pytest-textual-snapshot); `--snapshot-update` re-records them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from stepscope.tui.app import StepscopeApp
from textual.pilot import Pilot
from textual.widgets import Static, TextArea
from tui_support import loaded, screen_text, settle, steady, trace, until

SIZE = (140, 40)


def storm() -> StepscopeApp:
    return StepscopeApp(trace("storm"))


def keys(*pressed: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    """Load, press the keys, and let everything they start finish."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        await pilot.press(*pressed)
        await steady(pilot)

    return run_before


def test_timeline_at_a_preemption(snap_compare: Any) -> None:
    assert snap_compare(storm(), terminal_size=SIZE, run_before=keys("colon", "3", "enter"))


def test_request_life(snap_compare: Any) -> None:
    assert snap_compare(storm(), terminal_size=SIZE, run_before=keys("slash", *"chat-18", "enter"))


def test_diff_view_at_the_first_divergence(snap_compare: Any) -> None:
    async def diffed(pilot: Pilot[Any]) -> None:
        banner = pilot.app.screen.query_one("#diff-banner", Static)
        await until(pilot, lambda: "divergent" in str(banner.render()))
        await pilot.press("d")
        await steady(pilot)

    app = StepscopeApp(trace("storm"), trace("storm_fewer_seqs"))
    assert snap_compare(app, terminal_size=(160, 48), run_before=diffed)


def test_sql_console_with_results(snap_compare: Any) -> None:
    async def queried(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        editor = pilot.app.screen.query_one("#console-query", TextArea)
        editor.cursor_blink = False
        editor.text = "SELECT step, request_id, needed_by, why FROM why_preempted"
        await pilot.press("ctrl+j")
        status = pilot.app.screen.query_one("#console-status", Static)
        await until(pilot, lambda: "rows" in str(status.render()))
        # DataTable sizes its columns to their cells when the app next goes idle.
        await until(pilot, lambda: "needed 1 block(s)" in screen_text(pilot.app))
        await steady(pilot)

    assert snap_compare(storm(), terminal_size=SIZE, run_before=queried)


def test_replay_mode_after_a_few_steps(snap_compare: Any) -> None:
    async def replayed(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("p")
        status = pilot.app.screen.query_one("#replay-status", Static)
        await until(pilot, lambda: str(status.render()).startswith("ready"))
        for step in range(4):
            await pilot.press("space")
            await until(pilot, lambda s=step: f"through step {s} " in str(status.render()))
        await steady(pilot)

    assert snap_compare(storm(), terminal_size=SIZE, run_before=replayed)


def test_help_panel(snap_compare: Any) -> None:
    assert snap_compare(storm(), terminal_size=SIZE, run_before=keys("question_mark"))


def test_incomplete_trace_notice(snap_compare: Any) -> None:
    app = StepscopeApp(trace("incomplete"))
    assert snap_compare(app, terminal_size=SIZE, run_before=keys())
