"""Traces and helpers for the TUI tests: real recordings, and the screen as text."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import io
import json
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from functools import cache
from pathlib import Path
from typing import Any

from conftest import REPO
from rich.console import Console
from rich.text import Text
from stepscope.engine import StepRecord
from stepscope.engine.workload import parse_workload
from stepscope.tui.widgets.rows_view import RowsView
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import DataTable
from traces import damage_table_block, decode_workload, record

STORM = REPO / "examples" / "preemption_storm" / "workload.json"


@cache
def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="stepscope-tui-tests-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _storm(change: dict[str, Any] | None = None, eos_early: str | None = None) -> str:
    raw = json.loads(STORM.read_text())
    raw["config"].update(change or {})
    for request in raw["requests"]:
        if request["id"] == eos_early:
            request["output_token_ids"][5] = request["eos_token_id"]
    return json.dumps(raw)


@cache
def trace(name: str) -> Path:
    """A recorded trace, made once per test run.

    storm: the preemption-storm example. storm_fewer_seqs: the same with max_num_seqs
    18 (decisions diverge at step 2). storm_early_eos: chat-05 samples EOS early (inputs
    diverge). incomplete: a recording interrupted at step 50. broken: a file that is
    not a trace. damaged_requests (or any table): the storm with one byte damaged in a
    block that only that table's rows use.
    """
    path = _folder() / f"{name}.duckdb"
    if name == "storm":
        record(parse_workload(_storm(), source="storm"), path)
    elif name == "storm_fewer_seqs":
        record(parse_workload(_storm({"max_num_seqs": 18}), source="storm"), path)
    elif name == "storm_early_eos":
        record(parse_workload(_storm(eos_early="chat-05"), source="storm"), path)
    elif name == "long":
        record(decode_workload(2, 3000), path, flush_every_steps=1024)
    elif name == "incomplete":
        _record_interrupted(path)
    elif name == "broken":
        path.write_bytes(b"this is not a DuckDB file\n" * 200)
    elif name.startswith("damaged"):
        damage_table_block(trace("storm"), path, name.removeprefix("damaged"))
    else:
        raise KeyError(name)
    return path


def _record_interrupted(path: Path) -> None:
    class Interrupt:
        def on_step(self, record_: StepRecord, scheduler: object) -> None:
            if record_.step == 50:
                raise KeyboardInterrupt

    with contextlib.suppress(KeyboardInterrupt):
        record(decode_workload(4, 1000), path, sinks=[Interrupt()], flush_every_steps=8)


async def settle(pilot: Pilot[Any], rounds: int = 6) -> None:
    """Let every worker finish and every message it posted be handled, `rounds` deep.

    `pause(0)` rather than `pause()`: the latter waits for the CPU to go idle,
    which on a shared machine can take a second each time.
    """
    app = pilot.app
    for _ in range(rounds):
        await app.workers.wait_for_complete()
        await pilot.pause(0)


async def until(pilot: Pilot[Any], condition: Callable[[], bool], rounds: int = 500) -> None:
    """Settle until `condition` holds (a safety bound on rounds, never a timing assertion)."""
    for _ in range(rounds):
        if condition():
            return
        await settle(pilot, 1)
        await asyncio.sleep(0.01)
    raise AssertionError("the screen never reached the expected state")


async def steady(pilot: Pilot[Any], rounds: int = 500) -> None:
    """Settle until two looks at the screen, a settle apart, show the same thing.

    Before a snapshot: some widgets finish on idle (a DataTable sizes its columns to
    new cells only then), so "every worker done" can still leave a stale frame.
    """
    previous = None
    for _ in range(rounds):
        await settle(pilot, 1)
        await asyncio.sleep(0.01)
        current = screen_text(pilot.app)
        if current == previous:
            return
        previous = current
    raise AssertionError("the screen never stopped changing")


async def loaded(pilot: Pilot[Any]) -> None:
    """Settle until the timeline has its first page and the cursor step's detail.

    Under a loaded machine a fixed number of settle rounds can end before the
    first page arrives; a snapshot taken then would show an empty timeline.
    """
    from stepscope.tui.widgets.step_detail import StepDetailView
    from stepscope.tui.widgets.step_table import StepTable

    def ready() -> bool:
        screen = pilot.app.screen
        tables = screen.query(StepTable)
        details = screen.query(StepDetailView)
        return (
            bool(tables)
            and all(t.has_first_page for t in tables)
            and all(d.detail is not None for d in details)
        )

    await until(pilot, ready)
    await settle(pilot)


def cells(table: DataTable[Any] | RowsView) -> list[list[str]]:
    """The rows a table shows, as plain text."""
    rows = (
        table.rows
        if isinstance(table, RowsView)
        else [table.get_row_at(i) for i in range(table.row_count)]
    )
    return [[str(cell.plain if isinstance(cell, Text) else cell) for cell in row] for row in rows]


def screen_text(app: App[Any]) -> str:
    """What the terminal shows now, as plain text."""
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), color_system=None, record=True
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""C0 controls, DEL and C1 controls: none of them may be drawn."""


def drawn_controls(app: App[Any]) -> list[str]:
    """Every text segment of the screen Textual would write that holds a control character
    or a link (the TUI draws none: one comes only from markup in a trace's string).

    The strips are what the driver writes between its own cursor moves and colours, so
    a control in one reaches the terminal raw.
    """
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    return [
        segment.text
        for line in update.strips
        for strip in line
        for segment in strip
        if segment.control is None
        and (_CONTROL.search(segment.text) or (segment.style and segment.style.link))
    ]


def drive(
    app: App[Any],
    scenario: Callable[[Pilot[Any]], Awaitable[None]],
    size: tuple[int, int] = (140, 40),
) -> None:
    """Run the real app headless, let it load, then play `scenario` with the pilot."""

    async def run() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await scenario(pilot)

    asyncio.run(run())


async def press(pilot: Pilot[Any], *keys: str) -> str:
    """Press keys, wait for the work they start, and return the screen as text."""
    await pilot.press(*keys)
    await settle(pilot)
    return screen_text(pilot.app)
