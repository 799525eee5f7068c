"""`stepscope sql` on a terminal: no control character from a trace (or from a query's own
column names) reaches it, in any output; to a pipe or a file, `--csv` stays byte-exact."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from pseudo_terminal import everything_drawn
from stepscope.engine.workload import parse_workload
from traces import case, record

EVIL = "\x1b[2J\x1b[31mEVIL\x1b]0;pwned\x07\x1b[0m"
"""Clears the screen, draws red text and sets the terminal's title."""
C1 = "\x9b2J\x9d0;c1\x9c"
"""The same, in the 8-bit control characters some terminals obey."""
RUBOUT = "r2\x7f\x08\x08"
HOSTILE_IDS = [EVIL, C1, RUBOUT]
ENV = {"PATH": "/usr/bin:/bin", "TERM": "xterm-256color", "COLUMNS": "400", "LINES": "50"}
COLOUR = re.compile(rb"\x1b\[[0-9;]*m")
"""The one escape sequence stepscope itself writes: rich's colours (SGR)."""
C1_IN_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a trace whose request ids are escape sequences, and a folder holding
    a copy of it whose file name and `_meta` engine are one too."""
    folder = tmp_path_factory.mktemp("terminal")
    raw = json.loads(case("03").read_text())
    for request, request_id in zip(raw["requests"], HOSTILE_IDS, strict=True):
        request["id"] = request_id
    record(parse_workload(json.dumps(raw), source="hostile.json"), folder / "a.duckdb")
    fleet = folder / "fleet"
    fleet.mkdir()
    copy = fleet / f"{EVIL}.duckdb"
    shutil.copy(folder / "a.duckdb", copy)
    with duckdb.connect(str(copy)) as connection:
        connection.execute("UPDATE _meta SET value = ? WHERE key = 'engine'", [EVIL])
    return folder


def on_a_terminal(cwd: Path, *args: str) -> tuple[int, bytes]:
    """Run `stepscope sql` with stdout and stderr on a pseudo-terminal: its exit code and the
    bytes that reached the terminal."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "stepscope", "sql", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=ENV,
        cwd=cwd,
    )
    os.close(follower)
    return process.wait(), everything_drawn(leader)


def piped(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run `stepscope sql` with its output to a pipe."""
    return subprocess.run(
        [sys.executable, "-m", "stepscope", "sql", *args], capture_output=True, env=ENV, cwd=cwd
    )


def assert_nothing_raw(drawn: bytes) -> None:
    """No control character of the trace's reached the terminal: no escape sequence but
    colours, no BEL, DEL or backspace, no 8-bit control; each is shown escaped instead."""
    for payload in (b"\x1b[2J", b"\x1b]0;", b"\x1b[31mEVIL"):
        assert payload not in drawn
    plain = COLOUR.sub(b"", drawn)
    assert b"\x1b" not in plain and C1_IN_UTF8.search(plain) is None
    for control in (b"\x07", b"\x7f", b"\x08"):
        assert control not in plain
    assert b"Traceback" not in drawn


IDS = "SELECT request_id FROM requests"
RENAMED = f'SELECT request_id AS "{EVIL}", 1 AS "{C1}" FROM requests'


@pytest.mark.parametrize(
    "args",
    [
        ["a.duckdb", IDS],
        ["a.duckdb", IDS, "-x"],
        ["a.duckdb", IDS, "--csv"],
        ["a.duckdb", IDS, "--json"],
        ["a.duckdb", RENAMED],
        ["a.duckdb", RENAMED, "-x"],
        ["a.duckdb", RENAMED, "--csv"],
        ["a.duckdb", RENAMED, "--json"],
        ["fleet", "SELECT trace, request_id FROM requests"],
        ["fleet", "SELECT trace, request_id FROM requests", "--csv"],
    ],
    ids=["table", "vertical", "csv", "json", "names", "names-x", "names-csv", "names-json",
         "set", "set-csv"],
)  # fmt: skip
def test_no_control_character_reaches_the_terminal(hostile: Path, args: list[str]) -> None:
    code, drawn = on_a_terminal(hostile, *args)
    assert code == 0, drawn
    assert_nothing_raw(drawn)
    shown = (b"\\u001b[2J" if "--json" in args else b"\\x1b[2J", b"EVIL")
    assert all(part in drawn for part in shown), drawn
    if "--json" not in args:
        assert b"\\x9b2J\\x9d0;c1\\x9c" in drawn and b"r2\\x7f\\x08" in drawn


@pytest.mark.parametrize("args", [["a.duckdb"], ["fleet"]], ids=["views", "set-traces"])
def test_the_listings_reach_the_terminal_escaped(hostile: Path, args: list[str]) -> None:
    code, drawn = on_a_terminal(hostile, *args)
    assert code == 0, drawn
    assert_nothing_raw(drawn)
    assert b"why_preempted" in drawn
    if args == ["fleet"]:
        assert drawn.count(b"\\x1b[2J\\x1b[31mEVIL\\x1b]0;pwned\\x07\\x1b[0m") >= 2


def test_an_error_quoting_a_trace_string_reaches_the_terminal_escaped(hostile: Path) -> None:
    code, drawn = on_a_terminal(hostile, "a.duckdb", "SELECT request_id::INT FROM requests")
    assert code == 2
    assert_nothing_raw(drawn)


def test_json_escapes_every_control_character(hostile: Path) -> None:
    query = (
        "SELECT string_agg(chr(c::INTEGER), '' ORDER BY c) AS s "
        "FROM (SELECT unnest(range(0, 32) || [127] || range(128, 160)) AS c)"
    )
    result = piped(hostile, "a.duckdb", query, "--json")
    assert result.returncode == 0, result.stderr
    assert re.search(rb"[\x00-\x1f\x7f]", result.stdout.removesuffix(b"\n")) is None
    assert C1_IN_UTF8.search(result.stdout) is None
    every = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0)]))
    assert json.loads(result.stdout) == {"s": every}


def test_csv_to_a_pipe_is_byte_exact(hostile: Path) -> None:
    result = piped(hostile, "a.duckdb", IDS, "--csv")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().split("\n") == ["request_id", *HOSTILE_IDS, ""]
