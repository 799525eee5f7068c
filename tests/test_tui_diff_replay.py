"""Diff view and replay mode: the per-step comparison, its classification, and the screens."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from stepscope.engine import RequestFinish, load_workload
from stepscope.replay.diff import Classification
from stepscope.schema import TraceError
from stepscope.tui import replay_session
from stepscope.tui.app import StepscopeApp
from stepscope.tui.diffing import diff_traces
from stepscope.tui.replay_session import BreakPredicate, ReplaySession, workload_from_trace
from stepscope.tui.screens.replay import ReplayScreen
from stepscope.tui.screens.timeline import TimelineScreen
from stepscope.tui.trace_source import TraceSource
from stepscope.tui.widgets.diff_banner import DiffBanner
from stepscope.tui.widgets.rows_view import RowsView
from stepscope.tui.widgets.step_detail import StepDetailView
from stepscope.tui.widgets.step_table import StepTable
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static
from tui_support import STORM, cells, drive, press, screen_text, trace, until

import stepscope


def test_a_trace_does_not_diverge_from_itself() -> None:
    source = TraceSource(trace("storm"))
    diff = diff_traces(source, source)
    assert diff.first_decision_step is None and not diff.divergent_steps
    assert diff.headline == ("identical: every step decided the same", "")


def test_another_config_is_a_decision_divergence() -> None:
    diff = diff_traces(TraceSource(trace("storm")), TraceSource(trace("storm_fewer_seqs")))
    assert diff.classification is Classification.DECISION
    assert diff.config_differences == {"max_num_seqs": (24, 18)}
    assert diff.first_decision_step == 2
    assert list(diff.divergent_steps[:2]) == [2, 3]
    assert diff.headline[1] == "decision — same inputs, a different choice"
    assert diff.next_divergence(3, forward=True) == diff.divergent_steps[2]
    assert diff.next_divergence(2, forward=False) is None
    assert diff.is_divergent(3) and not diff.is_divergent(4)


def test_other_sampled_tokens_earlier_are_an_input_divergence() -> None:
    diff = diff_traces(TraceSource(trace("storm")), TraceSource(trace("storm_early_eos")))
    assert diff.classification is Classification.INPUT
    assert diff.first_decision_step == 6
    assert diff.headline[1] == "input — sampled tokens (step 5) differed first, at step 6"


def test_other_arrivals_are_an_input_divergence() -> None:
    diff = diff_traces(TraceSource(trace("storm")), TraceSource(trace("incomplete")))
    assert diff.classification is Classification.INPUT
    assert diff.headline[1].startswith("input — arrivals or aborts differed first, at step ")


def test_the_workload_comes_back_out_of_the_trace() -> None:
    original = load_workload(STORM)
    rebuilt = workload_from_trace(TraceSource(trace("storm")))
    assert rebuilt.config == original.config
    for ours, theirs in zip(rebuilt.requests, original.requests, strict=True):
        assert (ours.request_id, ours.arrival_step, ours.arrival_time, ours.priority) == (
            theirs.request_id,
            theirs.arrival_step,
            theirs.arrival_time,
            theirs.priority,
        )
        assert ours.prompt_token_ids == theirs.prompt_token_ids
        assert ours.sampling_params == theirs.sampling_params
        # The recorded outputs are the tape up to where the request stopped.
        assert ours.output_token_ids == theirs.output_token_ids[: len(ours.output_token_ids)]


def recorded_session(name: str, knobs: dict[str, Any] | None = None) -> ReplaySession:
    session = ReplaySession(trace(name), knobs)
    session.record()
    return session


def test_an_exact_replay_never_diverges_and_a_what_if_does() -> None:
    exact = recorded_session("storm")
    steps, stopped = exact.run(None)
    assert stopped == "end" and exact.num_divergent == 0 and exact.complete
    assert steps[-1].step == 379 and exact.step() is None
    exact.close()

    what_if = recorded_session("storm", {"max_num_seqs": 18})
    steps, stopped = what_if.run(None)
    assert stopped == "condition" and steps[-1].step == 2
    assert steps[-1].differences == ("num_free_blocks", "scheduled", "block_ids", "sampled")
    recorded, replayed = what_if.sides(2)
    assert len(recorded.scheduled) == 20 and len(replayed.scheduled) == 18
    what_if.close()


def test_the_tui_replay_agrees_with_stepscope_replay_and_diff(tmp_path: Any) -> None:
    """The session's comparison is exact replay's: a what-if replay kept by the CLI and
    diffed with the trace marks the same steps with the same fields."""
    from stepscope.replay.diff import compare_steps
    from stepscope.replay.whatif import replay_whatif

    session = recorded_session("storm", {"max_num_seqs": 18})
    kept = replay_whatif(trace("storm"), tmp_path / "what_if.duckdb", {"max_num_seqs": 18})
    with stepscope.open(trace("storm")) as a, stepscope.open(kept.output) as b:
        diff = compare_steps(a, b)
    decisions = [
        (step, tuple(f for f in fields if f != "sampled"))
        for step, fields in zip(session.differences.steps, session.differences.fields, strict=True)
    ]
    assert [(s, f) for s, f in decisions if f] == list(
        zip(diff.divergent_steps, diff.divergent_fields, strict=True)
    )
    session.close()


def test_a_replay_session_keeps_no_request_endings(monkeypatch: Any) -> None:
    """The trace has every ending: the recording's loop keeps none (a long replay would
    hold one per request, its output tokens included: 21 by the end here with the default)."""
    monkeypatch.setattr(replay_session, "PROGRESS_EVERY", 50)  # the storm ends at step 379
    alive = []

    def count(step: int) -> None:
        alive.append(sum(isinstance(o, RequestFinish) for o in gc.get_objects()))

    session = ReplaySession(trace("storm"))
    session.record(on_progress=count)
    session.close()
    assert len(alive) >= 7 and max(alive) == 0


def test_break_predicates_over_the_replayed_step() -> None:
    session = recorded_session("storm")
    preempted = BreakPredicate("list_contains(preempted_ids, 'chat-18')")
    steps, stopped = session.run(preempted)
    assert stopped == "condition" and steps[-1].step == 3
    assert steps[-1].columns is not None and "chat-18" in steps[-1].columns["preempted_ids"]
    tight = BreakPredicate("num_free_blocks_after_schedule = 0 AND admission_stop = 'kv_full'")
    steps, stopped = session.run(tight)
    assert stopped == "end" and steps[-1].step == 379
    with pytest.raises(TraceError, match="nope"):
        BreakPredicate("nope > 1")
    session.close()


def test_a_condition_reads_what_the_step_holds() -> None:
    """Each column a condition reads agrees with the step's own rows."""
    session = recorded_session("storm")
    first = session.step()
    assert first is not None and first.columns is not None
    _, replayed = session.sides(0)
    assert first.columns["scheduled_ids"] == [
        row["request_id"] for row in replayed.scheduled.dicts()
    ]
    assert first.columns["arrived_ids"] == replayed.request_ids("arrive")
    assert replayed.row is not None
    assert first.columns["num_scheduled_tokens"] == replayed.row["num_scheduled_tokens"]
    steps, stopped = session.run(BreakPredicate("num_finished > 0"))
    finishing = steps[-1].columns
    assert stopped == "condition" and finishing is not None
    assert len(finishing["finished_ids"]) == finishing["num_finished"] > 0
    _, replayed = session.sides(steps[-1].step)
    assert finishing["finished_ids"] == replayed.request_ids("finish")
    session.close()


def banner(pilot: Pilot[Any]) -> str:
    return str(pilot.app.screen.query_one(DiffBanner).render())


def test_diff_view_marks_divergent_steps_and_shows_both_sides() -> None:
    app = StepscopeApp(trace("storm"), trace("storm_fewer_seqs"))

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: "divergent" in banner(pilot))
        assert banner(pilot) == (
            "diff storm.duckdb ↔ storm_fewer_seqs.duckdb: configs differ: max_num_seqs 24 -> 18\n"
            "50 divergent steps; first divergence at step 2 (num_free_blocks, scheduled, "
            "block_ids): decision — same inputs, a different choice"
        )
        text = await press(pilot, "d")
        steps = pilot.app.screen.query_one(StepTable)
        assert steps.cursor_step == 2
        marked = [line.split()[1] for line in text.splitlines() if line.startswith("≠")]
        assert marked[:2] == ["2", "3"]
        a = pilot.app.screen.query_one("#detail-a", StepDetailView)
        b = pilot.app.screen.query_one("#detail-b", StepDetailView)
        assert "A step 2 " in str(a.query_one(".detail-summary").render())
        assert "≠ num_free_blocks, scheduled" in str(b.query_one(".detail-summary").render())
        a_ids = [row[0] for row in cells(a.query_one(".detail-scheduled", RowsView))]
        b_ids = [row[0] for row in cells(b.query_one(".detail-scheduled", RowsView))]
        assert a_ids[-4:] == ["chat-16", "chat-17", "chat-18", "chat-19"]
        assert b_ids[-2:] == ["chat-16", "chat-17"]
        await press(pilot, "d")
        assert steps.cursor_step == 3
        await press(pilot, "d")
        assert steps.cursor_step == 98  # the same requests ran; other blocks were handed out
        await until(pilot, lambda: "≠ block_ids" in screen_text(pilot.app))
        await press(pilot, "D", "D")
        assert steps.cursor_step == 2
        await press(pilot, "D")
        assert steps.cursor_step == 2  # none before: stays

    drive(app, scenario, size=(160, 48))


def test_diff_against_a_shorter_trace_shows_its_missing_steps() -> None:
    app = StepscopeApp(trace("incomplete"), trace("storm"))

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: "divergent" in banner(pilot))
        assert "input — arrivals or aborts differed first, at step 0" in banner(pilot)
        text = await press(pilot, "G")
        assert pilot.app.screen.query_one(StepTable).cursor_step == 379
        assert "(only in the other trace)" in text

    drive(app, scenario)


def replay_status(pilot: Pilot[Any]) -> str:
    return str(pilot.app.screen.query_one("#replay-status", Static).render())


def test_replay_mode_steps_continues_breaks_and_returns_to_the_step() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "p")
        assert isinstance(pilot.app.screen, ReplayScreen)
        await until(pilot, lambda: replay_status(pilot).startswith("ready"))
        assert "24 requests and 380 recorded steps, 380 replayed, 0 divergent" in replay_status(
            pilot
        )
        await press(pilot, "space")
        await until(pilot, lambda: "through step 0" in replay_status(pilot))
        await press(pilot, "s")
        await until(pilot, lambda: "through step 1" in replay_status(pilot))
        log = pilot.app.screen.query_one("#replay-log", DataTable)
        assert cells(log) == [
            ["0", "240", "8", "", "24", "="],
            ["1", "248", "16", "", "8", "="],
        ]
        text = screen_text(pilot.app)
        assert "recorded  step 1" in text and "replayed  step 1" in text

        await press(pilot, "b")
        field = pilot.app.screen.query_one("#replay-break", Input)
        assert field.display and field.has_focus
        await press(pilot, *"list_contains(preempted_ids, 'chat-16')", "enter")
        await until(pilot, lambda: "condition holds" in replay_status(pilot))
        assert replay_status(pilot).startswith("replayed through step 3 · the condition holds")

        await press(pilot, "b", *"nope(", "enter")
        await until(pilot, lambda: "bad condition" in replay_status(pilot))

        await press(pilot, "c")
        await until(pilot, lambda: "ended" in replay_status(pilot))
        assert replay_status(pilot) == (
            "replayed through step 379 · the replay has ended · 0 divergent steps so far"
        )
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, TimelineScreen)
        assert pilot.app.screen.query_one(StepTable).cursor_step == 379

    drive(StepscopeApp(trace("storm")), scenario)


def test_a_replay_stopped_midway_ends_its_engine_loop_and_compares_what_ran() -> None:
    """The loop keeps the heap it started with frozen (`engine/gc_heap.py`) until it ends."""
    frozen: list[int] = []

    def stop(step: int) -> None:
        frozen.append(gc.get_freeze_count())
        session.stop()

    session = ReplaySession(trace("long"))
    session.record(on_progress=stop)
    assert frozen[0] > 0 and gc.get_freeze_count() == 0
    assert session.stopped and not session.complete
    assert session.num_replayed_steps == 1024 == session.num_steps
    steps, stopped = session.run(None)
    assert stopped == "end" and steps[-1].step == 1023 and session.num_divergent == 0
    session.close()


def test_leaving_the_replay_screen_removes_the_replay() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "p")
        await until(pilot, lambda: replay_status(pilot).startswith("ready"))
        session = pilot.app.screen.session  # type: ignore[attr-defined]
        replay = session.replay.path
        assert replay.exists()
        await press(pilot, "escape")
        await until(pilot, lambda: not replay.exists())

    drive(StepscopeApp(trace("storm")), scenario)


def test_replay_of_a_trace_without_prompts_says_why(tmp_path: Any) -> None:
    # A trace with an unreadable request list is reported, not raised.
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps({"config": {}, "requests": []}))

    async def scenario(pilot: Pilot[Any]) -> None:
        pilot.app.screen.path = bad  # type: ignore[attr-defined]
        await press(pilot, "p")
        await until(pilot, lambda: "replay:" in replay_status(pilot))
        assert "a workload, not a trace" in replay_status(pilot)

    drive(StepscopeApp(trace("storm")), scenario)


def test_a_long_search_reports_progress_and_can_be_stopped(monkeypatch: Any) -> None:
    monkeypatch.setattr(replay_session, "CONDITION_CHUNK", 1024)
    session = recorded_session("long")
    seen: list[int] = []

    def progress(step: int) -> None:
        seen.append(step)
        session.stop()

    never = BreakPredicate("num_scheduled_reqs > 99")
    steps, stopped = session.run(never, on_progress=progress)
    assert stopped == "stopped" and seen == [1023] and steps[-1].step == 1023
    steps, stopped = session.run(never)
    assert stopped == "end" and steps[-1].step == session.num_steps - 1
    session.close()


def test_steps_only_the_longer_trace_has_are_flagged_and_visited() -> None:
    app = StepscopeApp(trace("incomplete"), trace("storm"))
    with stepscope.open(trace("incomplete")) as shorter:
        last = shorter.num_steps - 1

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: "divergent" in banner(pilot))
        steps = pilot.app.screen.query_one(StepTable)
        await press(pilot, "colon", *str(last), "enter")
        assert steps.cursor_step == last
        text = await press(pilot, "d")
        assert steps.cursor_step == last + 1
        flagged = {int(line.split()[1]) for line in text.splitlines() if line.startswith("≠")}
        assert last + 1 in flagged
        await press(pilot, "G", "D")
        assert steps.cursor_step == 378

    drive(app, scenario, size=(160, 48))


def test_replay_help_fits_or_scrolls_at_160_by_45() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await press(pilot, "p")
        await until(pilot, lambda: replay_status(pilot).startswith("ready"))
        await press(pilot, "question_mark")
        help_text = pilot.app.screen.query_one("#widget-help")
        fits = help_text.virtual_size.height <= help_text.scrollable_content_region.height
        assert fits or help_text.show_vertical_scrollbar
        help_text.scroll_end(animate=False)
        assert "back to the timeline at this step" in await press(pilot)

    drive(StepscopeApp(trace("storm")), scenario, size=(160, 45))
