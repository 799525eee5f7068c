"""A trace with one damaged block, in the TUI: one message on screen, and `stepscope tui` exits 2.

DuckDB finds a damaged block only when a query reads it, so the TUI opens such a
trace and meets the damage while it runs: in the step rows (which name requests),
in `/` (which lists every request id), in a console query.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path
from typing import Any

from stepscope.tui.app import StepscopeApp
from stepscope.tui.screens.console import ConsoleScreen
from stepscope.tui.screens.timeline import TimelineScreen
from test_hardening_errors import CLI, ENV
from test_tui_console import editor, status
from textual.pilot import Pilot
from tui_support import drive, press, screen_text, trace, until

NOTICE = "Cannot read all of this trace"
WAIT_S = 120.0
"""How long the terminal test waits for the screen or the exit (a bound, not a pace)."""


def test_the_timeline_says_once_what_it_cannot_read_and_keeps_running() -> None:
    path = trace("damaged_requests")

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: NOTICE in screen_text(pilot.app))
        assert isinstance(pilot.app, StepscopeApp)
        assert pilot.app.failure is not None
        assert pilot.app.failure.startswith(f"{path}: a damaged trace, it cannot be read (")
        assert pilot.app.failure.endswith("); record or copy it again")
        text = await press(pilot, "slash")  # every request id: the damaged block again
        assert isinstance(pilot.app.screen, TimelineScreen)
        assert text.count(NOTICE) == 1
        assert "budget" in text  # the plot, which reads no request, is drawn
        await press(pilot, "j", "j")
        assert screen_text(pilot.app).count(NOTICE) == 1

    drive(StepscopeApp(path), scenario)


def test_a_console_query_on_a_damaged_block_fails_the_run_and_a_bad_query_does_not() -> None:
    """Preemptions are read only by steps that have some: step 0 and the plot read fine."""
    path = trace("damaged_preemptions")

    async def scenario(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, StepscopeApp)
        await press(pilot, "s")
        assert isinstance(app.screen, ConsoleScreen)
        await until(pilot, lambda: "ready" in status(pilot))
        editor(pilot).text = "SELECT nope FROM steps"
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: "error" in status(pilot))
        assert app.failure is None  # the user's query, not the trace, was at fault
        editor(pilot).text = "SELECT * FROM _preemptions"
        await press(pilot, "ctrl+j")
        await until(pilot, lambda: "damaged trace" in status(pilot))
        assert app.failure is not None
        assert app.failure.startswith(f"{path}: a damaged trace, it cannot be read (")

    drive(StepscopeApp(path), scenario)


def _read_until(master: int, output: bytearray, done: Any) -> None:
    """Read the terminal's output until `done(output)` (or the end of it, or the bound)."""
    deadline = time.monotonic() + WAIT_S
    while not done(output) and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:  # the other end is closed: the process has exited
                return
            if not chunk:
                return
            output += chunk


def _plain(output: bytes) -> str:
    """The terminal's output with its escape sequences taken out."""
    text = output.decode("utf-8", "replace")
    return re.sub(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])", "", text)


def test_stepscope_tui_on_a_damaged_trace_exits_2_with_one_line(tmp_path: Path) -> None:
    """On a real terminal: once the damage shows, `/` and `q` are pressed; the exit status
    is 2 and the error is the last thing written, with no traceback."""
    path = trace("damaged_requests")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    process = subprocess.Popen(
        [*CLI, "tui", str(path)], stdin=slave, stdout=slave, stderr=slave,
        env={**ENV, "TERM": "xterm-256color"}, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    output = bytearray()
    try:
        _read_until(master, output, lambda out: b"Corrupt" in out)  # DuckDB's word for it
        assert b"Corrupt" in output, _plain(bytes(output))[-2000:]
        os.write(master, b"/")
        os.write(master, b"q")
        _read_until(master, output, lambda out: False)
        returncode = process.wait(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    shown = _plain(bytes(output))
    assert "Traceback" not in shown
    assert returncode == 2, shown[-2000:]
    error = rf"error: {re.escape(str(path))}: a damaged trace, it cannot be read \([^\n]*\); "
    assert re.search(error + r"record or copy it again\s*$", shown), shown[-2000:]
