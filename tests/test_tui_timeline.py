"""The timeline screen, driven by keys on real recorded traces: what the screen shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import REPO
from export_traces import idle_steps_workload
from recordings import recording
from stepscope.engine.workload import parse_workload
from stepscope.tui.app import StepscopeApp
from stepscope.tui.screens.console import ConsoleScreen
from stepscope.tui.screens.pick_request import PickRequestScreen
from stepscope.tui.screens.request_life import RequestLifeScreen
from stepscope.tui.screens.timeline import TimelineScreen
from stepscope.tui.trace_source import PAGE_SIZE
from stepscope.tui.widgets.rows_view import RowsView
from stepscope.tui.widgets.step_detail import StepDetailView
from stepscope.tui.widgets.step_plot import StepPlot
from stepscope.tui.widgets.step_table import StepTable
from textual.pilot import Pilot
from textual.widgets import DataTable, HelpPanel, OptionList
from traces import record
from tui_support import cells, drive, press, screen_text, trace, until


def storm_app() -> StepscopeApp:
    return StepscopeApp(trace("storm"))


def table(pilot: Pilot[Any]) -> StepTable:
    return pilot.app.screen.query_one(StepTable)


def detail(pilot: Pilot[Any]) -> str:
    view = pilot.app.screen.query_one("#detail-a", StepDetailView)
    return str(view.query_one(".detail-summary").render())


def detail_rows(pilot: Pilot[Any], which: str) -> list[list[str]]:
    view = pilot.app.screen.query_one("#detail-a", StepDetailView)
    return cells(view.query_one(f".detail-{which}", RowsView))


def test_opens_on_step_zero_with_rows_plot_detail_and_keys() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        text = screen_text(pilot.app)
        assert "stepscope — storm.duckdb" in text
        assert "admission" in text and "free" in text
        assert "240/512" in text and "no_waiting" in text
        assert "kv_full_sequence" in text and "chat-20" in text  # step 2 blocks on chat-20
        assert "budget" in text and "▲ step 0" in text
        assert "step 0   240/512 tokens · 8 requests (8 new, 0 resumed)" in detail(pilot)
        assert detail_rows(pilot, "scheduled")[0][:4] == ["chat-00", "new", "30", "0→30"]
        assert detail_rows(pilot, "allocations")[0][-1] == "✓ +[1,2]"
        for key in ("next interesting", "go to step", "find request", "SQL", "replay", "quit"):
            assert key in text

    drive(storm_app(), scenario)


def test_moving_by_one_ten_hundred_a_page_to_the_ends_and_to_a_step() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        steps = table(pilot)
        await press(pilot, "j", "j")
        assert steps.cursor_step == 2
        assert "step 2 " in detail(pilot) and "kv_full_sequence" in detail(pilot)
        assert "▲ step 2" in screen_text(pilot.app)
        await press(pilot, "k")
        assert "step 1 " in detail(pilot)
        await press(pilot, "down", "down", "up")
        assert steps.cursor_step == 2
        visited = []
        for key in ("right_square_bracket", "right_curly_bracket", "left_square_bracket"):
            await press(pilot, key)
            visited.append(steps.cursor_step)
        await press(pilot, "left_curly_bracket", "left_curly_bracket")
        assert [*visited, steps.cursor_step] == [12, 112, 102, 0]
        text = await press(pilot, "G")
        assert steps.cursor_step == 379
        assert "step 379 " in detail(pilot) and "      379 " in text
        await press(pilot, "g", "pagedown")
        page = steps.cursor_step
        assert 10 < page < 60
        await press(pilot, "pagedown", "pageup")
        assert steps.cursor_step == page
        await press(pilot, "end")
        assert steps.cursor_step == 379
        await press(pilot, "home")
        assert steps.cursor_step == 0
        assert "go to step" in await press(pilot, "colon")
        await press(pilot, "1", "9", "0", "enter")
        assert steps.cursor_step == 190
        assert "step 190 " in detail(pilot) and "blocked head chat-17" in detail(pilot)
        await press(pilot, "colon", "9", "9", "9", "9", "enter")
        assert steps.cursor_step == 379  # clamped to the last step
        await press(pilot, "colon", "escape")
        assert steps.cursor_step == 379

    drive(storm_app(), scenario)


def test_interesting_steps_and_what_their_detail_shows() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        found = []
        for _ in range(3):
            await press(pilot, "n")
            found.append(table(pilot).cursor_step)
        assert found == [2, 3, 4]  # KV full at 2, preemptions at 3 and 4
        assert "3 preempted" in detail(pilot)
        victims = [row[0] for row in detail_rows(pilot, "preemptions")]
        assert victims == ["chat-15", "chat-14", "chat-13"]
        await press(pilot, "N")
        assert table(pilot).cursor_step == 3
        assert "4 preempted" in detail(pilot)
        assert "running pass ended: all_visited" in detail(pilot)
        assert "admission stopped: preempted_this_step" in detail(pilot)
        results = [row[-1] for row in detail_rows(pilot, "allocations")]
        assert "✗ slots" in results and "✓ +[40]" in results
        view = pilot.app.screen.query_one("#detail-a", StepDetailView)
        why = str(view.query_one(".detail-why").render()).splitlines()[0]
        assert why.startswith("chat-19: chat-00 needed 1 block(s)")
        assert why.endswith("fcfs takes chat-19 (the newest running request)")
        assert detail_rows(pilot, "scheduled")[0][:4] == ["chat-00", "running", "1", "32→33"]
        await press(pilot, "g", "N")
        assert table(pilot).cursor_step == 0  # nothing before step 0: stays

    drive(storm_app(), scenario)


def test_finding_and_opening_requests_and_jumping_back() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        assert "find a request (24 in this trace)" in await press(pilot, "slash")
        text = await press(pilot, *"chat-18", "enter")
        assert isinstance(pilot.app.screen, RequestLifeScreen)
        assert "arrived at step 2" in text and "preempted 5×" in text
        life = cells(pilot.app.screen.query_one("#life-table", DataTable))
        whats = [row[1] for row in life]
        assert whats[:4] == ["arrive", "admit+prefill", "preempted", "resume+recompute"]
        assert "decode ×55" in whats and whats[-1] == "finish"
        waiting = cells(pilot.app.screen.query_one("#life-waiting", DataTable))
        assert waiting[1][:3] == ["5–18", "behind_blocked_head", "chat-13"]
        await press(pilot, "down", "down", "enter")  # the first preemption
        assert isinstance(pilot.app.screen, TimelineScreen)
        assert table(pilot).cursor_step == 3
        await press(pilot, "slash", *"18", "enter")  # part of an id is enough
        assert pilot.app.screen.request_id == "chat-18"
        await press(pilot, "escape", "slash", *"nobody", "enter")
        assert isinstance(pilot.app.screen, TimelineScreen)
        await press(pilot, "g", "tab", "down", "r")  # the detail's second scheduled request
        assert pilot.app.screen.request_id == "chat-01"

    drive(storm_app(), scenario)


def test_help_palette_and_quit() -> None:
    app = storm_app()

    async def scenario(pilot: Pilot[Any]) -> None:
        text = await press(pilot, "question_mark")
        assert pilot.app.screen.query(HelpPanel)
        assert "Step timeline" in text and "next step" in text
        assert "Step detail" in await press(pilot, "tab")
        await press(pilot, "question_mark", "shift+tab")
        assert not pilot.app.screen.query(HelpPanel)
        await press(pilot, "ctrl+p", *"SQL console")
        await press(pilot, "enter")
        assert isinstance(pilot.app.screen, ConsoleScreen)
        await press(pilot, "escape", "ctrl+p", *"request chat-07")
        await press(pilot, "enter")
        assert pilot.app.screen.request_id == "chat-07"
        await press(pilot, "escape", "q")

    drive(app, scenario, size=(160, 44))
    assert app.return_code == 0


def test_a_recording_that_lost_its_end_opens_with_a_notice(tmp_path: Path) -> None:
    path = tmp_path / "ends-behind"
    storm = REPO / "examples" / "preemption_storm" / "workload.json"
    with recording(storm, path, "1000000steps", gap_at=5):
        pass

    async def scenario(pilot: Pilot[Any]) -> None:
        text = " ".join(screen_text(pilot.app).split())
        assert "ends-behind: the steps from 5 on were not recorded (the recorder fell" in text
        assert "is incomplete" not in text
        await press(pilot, "G")
        assert table(pilot).cursor_step == 4

    drive(StepscopeApp(path), scenario)


def test_a_long_trace_is_paged_not_loaded_whole() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        steps = table(pilot)
        assert steps.num_steps > 20 * PAGE_SIZE
        assert len(steps._pages) <= 2
        text = await press(pilot, "G")
        assert f"{steps.num_steps - 1:,} " in text and "…" not in text
        assert len(steps._pages) <= 4
        assert steps.row(PAGE_SIZE * 10) is None  # never asked for
        assert pilot.app.screen.query_one(StepPlot).series is not None

    drive(StepscopeApp(trace("long")), scenario)


def test_an_incomplete_trace_opens_with_a_notice() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        text = screen_text(pilot.app)
        assert "incomplete.duckdb is incomplete: the recording stopped early" in text
        assert "its 51 flushed steps are shown" in text
        await press(pilot, "G")
        assert table(pilot).cursor_step == 50

    drive(StepscopeApp(trace("incomplete")), scenario)


def test_a_broken_trace_opens_with_a_notice_and_keys_do_no_harm() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        text = screen_text(pilot.app)
        assert "Cannot open this trace" in text and "not a readable trace" in text
        await press(pilot, "j", "G", "n", "r", "s", "p", "d")
        assert isinstance(pilot.app.screen, TimelineScreen)
        await press(pilot, "slash")
        assert isinstance(pilot.app.screen, TimelineScreen)

    drive(StepscopeApp(trace("broken")), scenario)


def test_the_step_detail_is_usable_in_small_terminals() -> None:
    for size in ((80, 24), (100, 30)):

        async def scenario(pilot: Pilot[Any]) -> None:
            text = await press(pilot, "colon", "3", "enter")
            view = pilot.app.screen.query_one("#detail-a", StepDetailView)
            assert view.region.width >= 60 and view.region.height >= 8, view.region
            assert "step 3   16/512 tokens" in text and "preempted_this_step" in text
            assert table(pilot).region.height >= 6

        drive(storm_app(), scenario, size=size)


def test_finding_a_request_that_many_match_offers_a_choice() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        text = await press(pilot, "slash", *"chat", "enter")
        assert isinstance(pilot.app.screen, PickRequestScreen)
        assert "24 requests match 'chat': pick one" in text
        options = pilot.app.screen.query_one(OptionList)
        assert options.option_count == 24
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, TimelineScreen)
        await press(pilot, "slash", *"chat-1", "enter")
        assert pilot.app.screen.query_one(OptionList).option_count == 10  # chat-1, chat-10..19
        await press(pilot, "down", "down", "enter")
        assert isinstance(pilot.app.screen, RequestLifeScreen)
        assert pilot.app.screen.request_id == "chat-12"

    drive(storm_app(), scenario)


def test_a_step_where_the_engine_idled_shows_it_idled(tmp_path: Path) -> None:
    """The cursor on an idle step (nothing to schedule: its counts are NULL) shows it so."""
    path = tmp_path / "idle.duckdb"
    record(parse_workload(idle_steps_workload(), source="idle"), path)

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "j", "j", "j", "j")
        await until(pilot, lambda: "step 4" in detail(pilot))
        assert "idle: nothing to schedule" in detail(pilot)
        await press(pilot, "j", "j", "j", "j")
        await until(pilot, lambda: "step 8" in detail(pilot))
        assert "arrived late" in detail(pilot)

    drive(StepscopeApp(path), scenario)
