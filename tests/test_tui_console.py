"""The SQL console: run, see results, pick a view, recall history, cancel a long query."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from stepscope.schema import TraceError
from stepscope.tui.app import StepscopeApp
from stepscope.tui.console_session import ConsoleSession
from stepscope.tui.screens.console import ConsoleScreen
from stepscope.tui.screens.timeline import TimelineScreen
from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList, Static, TextArea
from tui_support import cells, drive, loaded, press, screen_text, trace, until

import stepscope

LONG_QUERY = "SELECT sum(a.range * b.range) FROM range(100000000) a, range(100000000) b"


def status(pilot: Pilot[Any]) -> str:
    return str(pilot.app.screen.query_one("#console-status", Static).render())


def editor(pilot: Pilot[Any]) -> TextArea:
    return pilot.app.screen.query_one("#console-query", TextArea)


def results(pilot: Pilot[Any]) -> DataTable[Any]:
    return pilot.app.screen.query_one("#console-results", DataTable)


def test_run_pick_a_view_recall_history_and_errors() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "s")
        assert isinstance(pilot.app.screen, ConsoleScreen)
        views = pilot.app.screen.query_one("#console-views", OptionList)
        names = [str(views.get_option_at_index(i).prompt) for i in range(views.option_count)]
        assert {"why_preempted", "why_waiting", "request_timeline", "summary"} <= set(names)
        await until(pilot, lambda: "ready" in status(pilot))
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: "rows" in status(pilot))
        assert status(pilot) == "1 rows"
        columns = [str(column.label) for column in results(pilot).columns.values()]
        assert columns[:3] == ["num_steps", "num_idle_steps", "num_requests"]
        assert cells(results(pilot))[0][:3] == ["380", "0", "24"]

        editor(pilot).text = "SELECT step, request_id, needed_by FROM why_preempted ORDER BY step"
        await press(pilot, "ctrl+enter")
        await until(pilot, lambda: status(pilot) == "40 rows")
        assert cells(results(pilot))[0] == ["3", "chat-19", "chat-00"]

        editor(pilot).text = "SELECT nope FROM steps"
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: "error" in status(pilot))
        assert 'column "nope"' in status(pilot)

        history = pilot.app.screen.query_one("#console-history", OptionList)
        assert history.option_count == 3
        history.focus()
        history.highlighted = 1  # the second most recent query
        await press(pilot, "enter")
        assert editor(pilot).text.startswith("SELECT step, request_id, needed_by")

        views.focus()
        views.highlighted = names.index("why_waiting")
        await press(pilot, "enter")
        assert editor(pilot).text == "SELECT * FROM why_waiting LIMIT 100"
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: status(pilot) == "100 rows")

        editor(pilot).text = "SELECT * FROM range(5000)"
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: "showing the first 1,000" in status(pilot))
        assert results(pilot).row_count == 1000

    drive(StepscopeApp(trace("storm")), scenario)


def test_a_long_query_is_cancelled_and_escape_goes_back() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "s")
        await until(pilot, lambda: "ready" in status(pilot))
        editor(pilot).text = LONG_QUERY
        await pilot.press("ctrl+j")
        assert "running" in status(pilot)
        await pilot.press("escape")
        await until(pilot, lambda: status(pilot) == "cancelled")
        assert isinstance(pilot.app.screen, ConsoleScreen)
        editor(pilot).text = "SELECT 42 AS answer"
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: status(pilot) == "1 rows")
        assert cells(results(pilot)) == [["42"]]
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, TimelineScreen)

    drive(StepscopeApp(trace("storm")), scenario)


def test_an_error_replaces_the_result_whole_and_the_editor_keeps_typed_text() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "s")
        await until(pilot, lambda: "ready" in status(pilot))
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: status(pilot) == "1 rows")
        bad = "SELECT " + ", ".join(f"column_{i}" for i in range(40)) + " FROM steps"
        editor(pilot).text = bad
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: "error" in status(pilot))
        error = pilot.app.screen.query_one("#console-error", Static)
        assert error.display and not results(pilot).display
        shown = str(error.render())
        assert shown.startswith("Binder Error") and "Candidate bindings" in shown  # whole
        assert error.region.width > 0 and error.region.height >= 3
        assert "Candidate bindings" in screen_text(pilot.app)

        await press(pilot, "ctrl+a")
        assert editor(pilot).selected_text == bad
        editor(pilot).text = "SELECT count(*) FROM "
        editor(pilot).move_cursor((0, len(editor(pilot).text)))
        views = pilot.app.screen.query_one("#console-views", OptionList)
        names = [str(views.get_option_at_index(i).prompt) for i in range(views.option_count)]
        views.focus()
        views.highlighted = names.index("why_preempted")
        await press(pilot, "enter")
        assert editor(pilot).text == "SELECT count(*) FROM why_preempted"
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: status(pilot) == "1 rows")
        assert results(pilot).display and not error.display

    drive(StepscopeApp(trace("storm")), scenario)


def test_the_run_keys_run_the_editors_query_wherever_the_focus_is() -> None:
    """In the editor it submits its own text; on the views, the screen's binding runs it."""

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "s")
        await until(pilot, lambda: "ready" in status(pilot))
        editor(pilot).text = "SELECT request_id FROM requests"
        pilot.app.screen.query_one("#console-views", OptionList).focus()
        await press(pilot, "ctrl+enter")
        await until(pilot, lambda: status(pilot) == "24 rows")
        editor(pilot).focus()
        await press(pilot, "end", "space", "L", "I", "M", "I", "T", "space", "2", "ctrl+j")
        await until(pilot, lambda: status(pilot) == "2 rows")
        history = pilot.app.screen.query_one("#console-history", OptionList)
        assert history.option_count == 2  # each run remembered once

    drive(StepscopeApp(trace("storm")), scenario)


def test_when_diffing_the_console_queries_b_as_schema_b() -> None:
    with stepscope.open(trace("storm_fewer_seqs")) as b:
        (b_preemptions,) = b.sql("SELECT count(*) FROM why_preempted").fetchall()[0]

    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "s")
        await until(pilot, lambda: "ready" in status(pilot))
        editor(pilot).text = (
            "SELECT (SELECT max_num_seqs FROM config) AS a_seqs, "
            "(SELECT max_num_seqs FROM b.config) AS b_seqs, "
            "(SELECT count(*) FROM b.why_preempted) AS b_why, (SELECT count(*) FROM b._steps)"
        )
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: status(pilot) == "1 rows")
        assert cells(results(pilot)) == [["24", "18", str(b_preemptions), "380"]]
        editor(pilot).text = "SELECT * FROM read_csv('/etc/passwd')"
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: "error" in status(pilot))  # as sandboxed as one trace

    drive(StepscopeApp(trace("storm"), trace("storm_fewer_seqs")), scenario)


def test_the_console_is_open_the_moment_it_shows() -> None:
    """Its connection opens in the background once the timeline has drawn: `s` then
    `ctrl+j` runs at once, however loaded the machine."""

    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        timeline = pilot.app.screen
        assert isinstance(timeline, TimelineScreen)
        await until(pilot, lambda: timeline.console_session.session is not None)
        for _ in range(2):  # and again after going back: the same connection
            await pilot.press("s")
            screen = pilot.app.screen
            assert isinstance(screen, ConsoleScreen)
            assert screen.session is timeline.console_session.session
            assert status(pilot).startswith("ready")
            await press(pilot, "ctrl+j")
            await until(pilot, lambda: status(pilot) == "1 rows")
            await press(pilot, "escape")

    drive(StepscopeApp(trace("storm")), scenario)


def test_a_query_run_while_the_console_opens_runs_once_it_has() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        pilot.app.push_screen(ConsoleScreen(trace("storm")))  # it opens its own connection
        await pilot.press("ctrl+j")
        await until(pilot, lambda: status(pilot) == "1 rows")
        assert cells(results(pilot))[0][:3] == ["380", "0", "24"]

    drive(StepscopeApp(trace("storm")), scenario)
    # Every connection the app and its console opened is closed once it exits (DuckDB
    # refuses a second configuration of a file this process still holds open).
    duckdb.connect(str(trace("storm")), read_only=True).close()


@pytest.mark.parametrize("other", [None, "storm_fewer_seqs"])
def test_the_console_answers_queries_only_as_stepscope_sql_does(other: str | None) -> None:
    """A statement that would drop a view or make a table is refused, alone and diffing."""
    session = ConsoleSession(trace("storm"), None if other is None else trace(other))
    try:
        for statement in ("DROP VIEW summary", "CREATE TEMP TABLE t AS SELECT 1", "  "):
            with pytest.raises(TraceError, match=r"not a query|empty"):
                session.run(statement)
        assert session.run("SELECT num_steps FROM summary").rows == ((380,),)
        with pytest.raises(TraceError, match="LINE 1"):  # DuckDB's whole parser error
            session.run("SELEC 1")
    finally:
        session.close()
