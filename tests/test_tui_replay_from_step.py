"""Replay mode from the timeline's step: it starts at the nearest checkpoint, shows that
step first, and `:` jumps within the replay or replays again from an earlier step."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from stepscope.engine import TapeModelRunner, load_workload
from stepscope.tracer.record_workload import record_workload
from stepscope.tui.app import StepscopeApp
from stepscope.tui.replay_session import ReplaySession
from stepscope.tui.screens.replay import ReplayScreen
from stepscope.tui.screens.timeline import TimelineScreen
from stepscope.tui.widgets.step_table import StepTable
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from tui_support import STORM, cells, drawn_controls, drive, loaded, press, until


@cache
def storm(checkpoint_every: int) -> Path:
    """The preemption storm (380 steps), a checkpoint every `checkpoint_every` steps (0: none)."""
    folder = Path(tempfile.mkdtemp(prefix="stepscope-tui-from-step-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / f"storm-every-{checkpoint_every}.duckdb"
    workload = load_workload(STORM)
    record_workload(
        workload, TapeModelRunner.for_workload(workload), path, checkpoint_every=checkpoint_every
    )
    return path


def status(pilot: Pilot[Any]) -> str:
    return str(pilot.app.screen.query_one("#replay-status", Static).render())


def start_line(pilot: Pilot[Any]) -> str:
    line = pilot.app.screen.query_one("#replay-start", Static)
    return str(line.render()) if line.display else ""


def logged_steps(pilot: Pilot[Any]) -> list[int]:
    log = pilot.app.screen.query_one("#replay-log", DataTable)
    return [int(row[0].replace(",", "")) for row in cells(log)]


def session(pilot: Pilot[Any]) -> ReplaySession:
    screen = pilot.app.screen
    assert isinstance(screen, ReplayScreen) and screen.session is not None
    return screen.session


async def replay_at(pilot: Pilot[Any], step: int) -> None:
    """Put the timeline's cursor on `step`, press `p`, and wait until the replay is ready."""
    await loaded(pilot)
    await press(pilot, "colon", *str(step), "enter")
    assert pilot.app.screen.query_one(StepTable).cursor_step == step
    await press(pilot, "p")
    assert isinstance(pilot.app.screen, ReplayScreen)
    await until(pilot, lambda: status(pilot).startswith("ready") and bool(logged_steps(pilot)))


def assert_alike(replay: ReplaySession, steps: range) -> None:
    """The replay decided each of `steps` as the recording did, row for row."""
    for step in steps:
        recorded, replayed = replay.sides(step)
        assert recorded.row is not None and replayed.row is not None
        for name in ("scheduled", "preempted"):
            if hasattr(recorded, name):
                assert list(getattr(recorded, name).dicts()) == list(
                    getattr(replayed, name).dicts()
                )
        assert (
            recorded.row["num_free_blocks_after_schedule"]
            == (replayed.row["num_free_blocks_after_schedule"])
        )


def test_p_at_a_step_replays_from_its_checkpoint_and_shows_that_step_first() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await replay_at(pilot, 102)
        assert logged_steps(pilot) == [102]
        where = "replaying from step 102 (checkpoint 100, then 2 steps run silently)"
        assert start_line(pilot) == where
        assert where in pilot.app.screen.sub_title
        assert "278 replayed (steps 102..379), 0 divergent" in status(pilot)
        text = await press(pilot)
        assert "recorded  step 102" in text and "replayed  step 102" in text
        replay = session(pilot)
        assert replay.first_step == 102 and replay.complete and replay.num_divergent == 0
        assert replay.replay is not None and replay.replay.num_steps == 278
        assert_alike(replay, range(102, 380, 23))

        await press(pilot, "space")
        await until(pilot, lambda: "through step 103" in status(pilot))
        assert logged_steps(pilot) == [102, 103]
        assert cells(pilot.app.screen.query_one("#replay-log", DataTable))[-1][-1] == "="
        assert drawn_controls(pilot.app) == []
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, TimelineScreen)
        assert pilot.app.screen.query_one(StepTable).cursor_step == 103

    drive(StepscopeApp(storm(5)), scenario)


def test_p_on_a_checkpoint_starts_there() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await replay_at(pilot, 300)
        assert start_line(pilot) == "replaying from step 300 (checkpoint 300)"
        assert logged_steps(pilot) == [300]
        assert session(pilot).num_divergent == 0

    drive(StepscopeApp(storm(5)), scenario)


def test_colon_in_replay_mode_moves_within_the_replay_and_replays_again_before_it() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await replay_at(pilot, 102)
        first = session(pilot)
        await press(pilot, "colon", *"250", "enter")
        await until(pilot, lambda: "through step 250" in status(pilot))
        assert logged_steps(pilot) == [102, 250]
        assert session(pilot) is first and first.cursor == 250
        await press(pilot, "space")
        await until(pilot, lambda: "through step 251" in status(pilot))

        await press(pilot, "colon", *"999", "enter")
        assert "no step 999: the steps are 0..379" in status(pilot)

        await press(pilot, "colon", *"37", "enter")  # before step 102: replayed again
        await until(pilot, lambda: status(pilot).startswith("ready") and bool(logged_steps(pilot)))
        again = session(pilot)
        assert again is not first
        assert again.first_step == 37 and again.num_divergent == 0
        assert logged_steps(pilot) == [37]
        where = "replaying from step 37 (checkpoint 35, then 2 steps run silently)"
        assert start_line(pilot) == where
        assert "343 replayed (steps 37..379)" in status(pilot)
        assert_alike(again, range(37, 102, 16))

        await press(pilot, "colon", *"40", "enter")  # within the new replay
        await until(pilot, lambda: "through step 40" in status(pilot))
        assert logged_steps(pilot) == [37, 40] and session(pilot) is again

    drive(StepscopeApp(storm(5)), scenario)


def test_a_trace_without_checkpoints_replays_from_step_0_and_says_why() -> None:
    async def scenario(pilot: Pilot[Any]) -> None:
        await replay_at(pilot, 102)
        line = start_line(pilot)
        assert line.splitlines() == [
            "replaying from step 0",
            "storm-every-0.duckdb has no checkpoints (recorded with --checkpoint-every 0, "
            "redacted, or too short): replaying from step 0",
        ]
        replay = session(pilot)
        assert replay.first_step == 0 and replay.num_replayed_steps == 380
        assert replay.num_divergent == 0 and replay.notice is not None
        assert logged_steps(pilot) == [102]  # still shown first
        assert "380 replayed, 0 divergent" in status(pilot)

        await press(pilot, "colon", *"5", "enter")  # the replay holds step 5: no new replay
        await until(pilot, lambda: "through step 5" in status(pilot))
        assert session(pilot) is replay and logged_steps(pilot) == [102, 5]
        assert drawn_controls(pilot.app) == []

    drive(StepscopeApp(storm(0)), scenario)
