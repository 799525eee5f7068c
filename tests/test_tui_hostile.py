"""Every TUI screen over a trace whose strings are hostile: nothing it draws holds a control
character, and a `[` is drawn as typed, never taken for markup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hostile_traces import HOSTILE_IDS, PAYLOAD, SHOWN_PAYLOAD, hostile_sweep, hostile_traces
from stepscope.tui.app import StepscopeApp
from stepscope.tui.screens.console import ConsoleScreen
from stepscope.tui.screens.pick_request import PickRequestScreen
from stepscope.tui.screens.replay import ReplayScreen
from stepscope.tui.screens.request_life import RequestLifeScreen
from stepscope.tui.screens.sweep import SweepScreen
from stepscope.tui.screens.sweep_point import SweepPointScreen
from stepscope.tui.widgets.diff_banner import DiffBanner
from stepscope.tui.widgets.step_detail import StepDetailView
from textual.pilot import Pilot
from textual.widgets import DataTable, Static, TextArea
from tui_support import drawn_controls, drive, loaded, press, screen_text, settle, until

SHOWN_C1 = "EVIL\\x9b31mC1"
SHOWN_MARKUP = "[bold red]EVIL[/]"


async def shows_no_control(pilot: Pilot[Any]) -> str:
    """The screen as text, once no segment Textual would write holds a control character."""
    await settle(pilot)
    assert drawn_controls(pilot.app) == []
    return screen_text(pilot.app)


def _status(pilot: Pilot[Any]) -> str:
    return str(pilot.app.screen.query_one("#console-status", Static).render())


def test_the_timeline_step_detail_and_palette_draw_ids_escaped() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        text = await shows_no_control(pilot)
        assert SHOWN_PAYLOAD[:40] in text and SHOWN_C1 in text and SHOWN_MARKUP in text
        for _ in range(12):  # the storm's first preemptions and blocked heads
            await press(pilot, "down")
            await shows_no_control(pilot)
        await press(pilot, "ctrl+p")
        await pilot.press(*"request passwd")
        await settle(pilot)
        text = await shows_no_control(pilot)  # a hit's `[link=...]` is no link
        assert "request [link=file:///etc/passwd]EVIL[/link]" in text

    drive(StepscopeApp(hostile_traces().trace), scenario, size=(160, 50))


def test_a_trace_whose_columns_hold_other_types_draws_them_escaped() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        text = await shows_no_control(pilot)
        assert "  \\x1b[2J\\x1b" in text  # the timeline's admission column
        detail = pilot.app.screen.query_one("#detail-a", StepDetailView)
        summary = str(detail.query_one(".detail-summary", Static).render())
        assert f"running pass ended: {SHOWN_PAYLOAD}" in summary
        await press(pilot, "down", "down")
        await shows_no_control(pilot)

    drive(StepscopeApp(hostile_traces().retyped), scenario, size=(160, 50))


def test_finding_a_request_its_suggestion_picker_and_life_draw_ids_escaped() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        await press(pilot, "slash", *"EVI")
        text = await shows_no_control(pilot)  # the suggestion completes a hostile id
        assert SHOWN_C1 in text
        await press(pilot, "backspace", "backspace", "backspace", *"EVIL", "enter")
        assert isinstance(pilot.app.screen, PickRequestScreen)
        text = await shows_no_control(pilot)
        assert "6 requests match 'EVIL'" in text
        assert SHOWN_PAYLOAD in text and SHOWN_C1 in text and SHOWN_MARKUP in text
        assert "[link=file:///etc/passwd]EVIL[/link]" in text
        await press(pilot, "enter")
        screen = pilot.app.screen
        # Ids starting with the text come first.
        assert isinstance(screen, RequestLifeScreen) and screen.request_id == HOSTILE_IDS[1]
        await until(pilot, lambda: screen.life is not None)
        text = await shows_no_control(pilot)
        assert SHOWN_C1 in text
        facts = str(screen.query_one("#life-facts", Static).render())
        assert f"finished at step 99 ({SHOWN_PAYLOAD}" in facts  # a tampered finish reason

    drive(StepscopeApp(hostile_traces().trace), scenario, size=(160, 50))


def test_the_escaped_form_a_suggestion_shows_finds_the_request() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        await press(pilot, "slash", *SHOWN_C1, "enter")
        screen = pilot.app.screen
        assert isinstance(screen, RequestLifeScreen) and screen.request_id == HOSTILE_IDS[1]

    drive(StepscopeApp(hostile_traces().trace), scenario)


def test_console_results_columns_and_errors_draw_escaped() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        await press(pilot, "s")
        assert isinstance(pilot.app.screen, ConsoleScreen)
        await until(pilot, lambda: "ready" in _status(pilot))
        editor = pilot.app.screen.query_one("#console-query", TextArea)
        queries = {
            "SELECT request_id FROM requests": "24 rows",
            # columns named by the trace's data
            "PIVOT (SELECT request_id FROM requests WHERE request_id LIKE '%EVIL%') "
            "ON request_id USING count(*)": "1 rows",
            "SELECT model, description FROM (PIVOT _meta ON key USING first(value))": "1 rows",
        }
        for query, rows in queries.items():
            editor.text = query
            await press(pilot, "ctrl+j")
            await until(pilot, lambda rows=rows: _status(pilot) == rows)
            text = await shows_no_control(pilot)
            assert SHOWN_PAYLOAD[:20] in text
        results = pilot.app.screen.query_one("#console-results", DataTable)
        assert results.row_count == 1
        editor.text = "SELECT CAST(request_id AS INTEGER) FROM requests"  # DuckDB quotes the id
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: "error" in _status(pilot))
        text = await shows_no_control(pilot)
        assert "\\x1b[2J" in text

    drive(StepscopeApp(hostile_traces().trace), scenario, size=(160, 50))


def test_the_diff_banner_and_both_sides_draw_escaped() -> None:
    traces = hostile_traces()
    for other in (traces.what_if, traces.other_inputs, traces.config):

        async def scenario(pilot: Pilot[Any]) -> None:
            await loaded(pilot)
            banner = pilot.app.screen.query_one(DiffBanner)
            await until(pilot, lambda: "comparing" not in str(banner.render()))
            text = await shows_no_control(pilot)
            assert "diff hostile.duckdb" in text
            for _ in range(5):
                await press(pilot, "d")
                await shows_no_control(pilot)

        drive(StepscopeApp(traces.trace, other), scenario, size=(160, 50))
    assert "\\x1b[2J" in _banner_text(traces.trace, traces.other_inputs)
    assert "vllm_version 0.33.0 -> \\x1b[2J" in _banner_text(traces.trace, traces.config)


def _banner_text(a: Path, b: Path) -> str:
    shown: list[str] = []

    async def scenario(pilot: Pilot[Any]) -> None:
        banner = pilot.app.screen.query_one(DiffBanner)
        await until(pilot, lambda: "comparing" not in str(banner.render()))
        shown.append(str(banner.render()))

    drive(StepscopeApp(a, b), scenario, size=(160, 50))
    return shown[0]


def test_replay_draws_ids_escaped_and_its_errors_too() -> None:
    traces = hostile_traces()

    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        await press(pilot, "p")
        assert isinstance(pilot.app.screen, ReplayScreen)
        status = pilot.app.screen.query_one("#replay-status", Static)
        await until(pilot, lambda: "ready" in str(status.render()))
        for _ in range(8):
            await press(pilot, "space")
        text = await shows_no_control(pilot)
        assert SHOWN_C1 in text

    drive(StepscopeApp(traces.trace), scenario, size=(160, 50))

    async def refused(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        await press(pilot, "p")
        status = pilot.app.screen.query_one("#replay-status", Static)
        await until(pilot, lambda: "replay:" in str(status.render()))
        await shows_no_control(pilot)
        assert "unknown vLLM version '\\x1b[2J" in str(status.render())

    drive(StepscopeApp(traces.config), refused, size=(160, 50))


def test_a_hostile_sweep_its_notices_and_a_point_draw_escaped() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        assert isinstance(pilot.app.screen, SweepScreen)
        table = pilot.app.screen.query_one("#sweep-points", DataTable)
        await until(pilot, lambda: table.row_count == 2)
        text = await shows_no_control(pilot)
        assert "scheduler \\x1b[2J" in text
        await press(pilot, "enter")  # point 0: its kept path is the payload
        text = await shows_no_control(pilot)
        assert "point 0: " in text and "\\x1b[2J" in text
        await press(pilot, "down", "enter")
        assert isinstance(pilot.app.screen, SweepPointScreen)
        await loaded(pilot)
        await shows_no_control(pilot)

    drive(StepscopeApp(hostile_sweep()), scenario, size=(160, 50))


def test_a_trace_named_with_escapes_that_cannot_open_draws_its_name_escaped(
    tmp_path: Path,
) -> None:
    broken = tmp_path / f"{PAYLOAD}.duckdb"
    broken.write_bytes(b"not a trace\n" * 100)

    async def scenario(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        text = await shows_no_control(pilot)
        assert "Cannot open this trace" in text and SHOWN_PAYLOAD[:20] in text

    drive(StepscopeApp(broken), scenario, size=(160, 50))
