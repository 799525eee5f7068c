"""`stepscope tui --follow`: the timeline of a recording folder while it is written.

The recording is written here step by step by a real recorder (flushed, its parts on
disk) while the app, driven by its pilot, follows it: new steps appear, the cursor rides
the last one until the user moves it, and `G` follows again.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stepscope.engine import EngineLoop, StepRecord, TapeModelRunner
from stepscope.tracer.checkpointer import Checkpointer
from stepscope.tracer.record_workload import trace_meta
from stepscope.tracer.recorder import TraceRecorder
from stepscope.tracer.segments import (
    Retention,
    SegmentSettings,
    parse_retention,
    parse_segment_every,
)
from stepscope.tracer.segments import writer as segment_writer
from stepscope.tui.app import StepscopeApp
from stepscope.tui.console_session import ConsoleSession
from stepscope.tui.widgets.step_table import StepTable
from test_segmented_recording import traffic
from textual.pilot import Pilot
from textual.widgets import Static
from tui_support import drive, press, settle, until

FOLLOWED = 3000
"""Rounds of `until` (each at least 10 ms) the screen has to show a step the recorder
wrote: the follower looks every second."""


class Recording:
    """A recording folder written a few steps at a time, as a server would write it."""

    def __init__(self, path: Path, retain: str | None = None) -> None:
        workload = traffic(60)
        retention = Retention() if retain is None else parse_retention(retain, "x")
        settings = SegmentSettings(parse_segment_every("40steps", "x"), retention)
        self.recorder = TraceRecorder(path, workload, trace_meta(workload), segments=settings)
        self.loop = EngineLoop(
            workload, TapeModelRunner.for_workload(workload), probe=self.recorder
        )
        Checkpointer.attach(self.loop, self.recorder, None, settings.every)  # opens segments
        self.steps: Iterator[StepRecord] = iter(self.loop.run())
        self.num_steps = 0

    def write(self, num_steps: int) -> None:
        for _ in range(num_steps):
            self.recorder.record_step(next(self.steps), self.loop.core.scheduler)
            self.num_steps += 1
        self.recorder.flush()
        self.recorder.writer.wait()

    def close(self) -> None:
        for record in self.steps:
            self.recorder.record_step(record, self.loop.core.scheduler)
        self.recorder.close(complete=True)


@pytest.fixture
def recording(tmp_path: Path) -> Iterator[Recording]:
    written = Recording(tmp_path / "live")
    written.write(30)
    yield written
    written.close()


def test_the_tail_follows_the_recording_until_the_user_moves(
    recording: Recording, tmp_path: Path
) -> None:
    app = StepscopeApp(tmp_path / "live", follow=True)

    async def scenario(pilot: Pilot[Any]) -> None:
        table = pilot.app.screen.query_one(StepTable)
        await until(pilot, lambda: table.num_rows == 30)
        assert table.cursor_step == 29
        await asyncio.to_thread(recording.write, 25)
        await until(pilot, lambda: table.num_rows == 55, FOLLOWED)
        await until(pilot, lambda: table.cursor_step == 54)
        assert "recording now" in pilot.app.screen.sub_title
        text = await press(pilot, "k", "k")
        assert table.cursor_step == 52 and "     52 " in text
        await asyncio.to_thread(recording.write, 30)  # into the next segment
        await until(pilot, lambda: table.num_rows == 85, FOLLOWED)
        await settle(pilot)
        assert table.cursor_step == 52, "the user moved: the cursor stays"
        row = table.row(84)
        assert row is not None and row["recorded"]
        await press(pilot, "G")
        await asyncio.to_thread(recording.write, 5)
        await until(pilot, lambda: table.cursor_step == 89, FOLLOWED)

    drive(app, scenario)


def test_the_tail_follows_a_recording_that_retention_trims(tmp_path: Path) -> None:
    """A server's flight recorder deletes its oldest segments as it runs: the timeline's first
    steps go, the cursor keeps riding the tail, and a step that is gone reads as not held."""
    recording = Recording(tmp_path / "trimmed", retain="1B")
    recording.write(30)
    app = StepscopeApp(tmp_path / "trimmed", follow=True)

    async def scenario(pilot: Pilot[Any]) -> None:
        table = pilot.app.screen.query_one(StepTable)
        await until(pilot, lambda: table.num_rows == 30)
        notice = pilot.app.screen.query_one("#notice", Static)
        assert not notice.display, "recorded now, so not incomplete"
        assert pilot.app.screen.sub_title.startswith("following trimmed: 30 steps, recording now")
        await asyncio.to_thread(recording.write, 100)  # segments 0 and 40 close, then go
        await until(pilot, lambda: table.cursor_step == 129, FOLLOWED)
        screen = pilot.app.screen
        await until(
            pilot, lambda: screen.source is not None and screen.source.info.first_step == 80
        )
        await press(pilot, "k")
        assert table.cursor_step == 128
        row = table.row(128)
        assert row is not None and row["recorded"]
        notice = pilot.app.screen.query_one("#notice", Static)
        await until(pilot, lambda: "starts at step 80" in str(notice.render()))
        assert "stopped early" not in str(notice.render())
        await press(pilot, "colon")
        text = await press(pilot, "1", "0", "enter")
        assert table.cursor_step == 10 and "not in this trace" in text

    try:
        drive(app, scenario)
    finally:
        recording.close()


def test_a_timeline_not_following_reads_on_as_the_writer_merges_and_deletes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --follow the screen keeps the steps it opened with, and keeps reading them:
    the writer merging the open segment's parts away (at once here, not after the readers'
    grace) makes a read open the folder again, not fail."""
    monkeypatch.setattr(segment_writer, "READER_GRACE_S", 0.0)
    recording = Recording(tmp_path / "live")
    recording.write(30)
    app = StepscopeApp(tmp_path / "live")

    async def scenario(pilot: Pilot[Any]) -> None:
        table = pilot.app.screen.query_one(StepTable)
        await until(pilot, lambda: table.num_rows == 30)
        notice = str(pilot.app.screen.query_one("#notice", Static).render())
        assert "live is being recorded: the 30 steps it held when opened are shown" in notice
        assert "stopped early" not in notice
        await asyncio.to_thread(recording.write, 30)  # segment 0 closes: its parts go
        await press(pilot, "colon")
        text = await press(pilot, "2", "0", "enter")
        assert table.cursor_step == 20 and "▕ step 20 " in text, "step 20's detail is shown"
        assert "changed while it was read" not in text
        assert table.num_rows == 30, "not following: the screen keeps its steps"

    try:
        drive(app, scenario)
    finally:
        recording.close()


def test_the_console_queries_a_recording_as_it_stands_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segment_writer, "READER_GRACE_S", 0.0)
    recording = Recording(tmp_path / "live")
    recording.write(30)
    session = ConsoleSession(tmp_path / "live")
    try:
        assert session.run("SELECT count(*) FROM steps").rows == ((30,),)
        recording.write(30)  # segment 0 closes: the parts the reader listed are merged away
        assert session.run("SELECT count(*), max(step) FROM steps").rows == ((60, 59),)
    finally:
        session.close()
        recording.close()


def test_follow_needs_a_recording_folder(recording: Recording, tmp_path: Path) -> None:
    for args in ([str(tmp_path / "missing")], [str(tmp_path / "live"), "--diff", "x.duckdb"]):
        result = subprocess.run(
            [sys.executable, "-m", "stepscope", "tui", "--follow", *args],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert result.returncode == 2
        (line,) = result.stderr.strip().splitlines()
        assert "--follow" in line and "follows one recording folder" in line
