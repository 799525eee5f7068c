"""`stepscope sql` streams: a result of any length prints in bounded memory, a closed pipe
stops the reading, and Ctrl-C during a query is one line and exit 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from traces import case, record

from stepscope.sql_table import COUNTED_ROWS_AT_MOST

CLI = [sys.executable, "-m", "stepscope", "sql"]
ENV = {"COLUMNS": "160", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
TEN_MILLION = "SELECT range AS i, 'x' || range AS s FROM range(10000000)"
MANY_STEPS = "SELECT r.range AS copy, s.* FROM steps s, range(1000000) r"
"""A view crossed with a range: 13,000,000 rows of every column of `steps`."""
MAX_RSS_BYTES = 500 << 20
"""Far above what streaming holds, far below what holding 10,000,000 rows takes."""
MEASURED = (
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); "
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
    "sys.exit(code)"
)
"""Runs its command as a child and writes that child's peak RSS (KiB) to a file. A process
forked from pytest starts with pytest's whole RSS as its peak (Linux keeps the peak across
`exec`), so the CLI is the child of this small process, whose RSS is all it inherits."""
ENDLESS = "SELECT count(*) FROM range(100000000) a, range(100000) b"
"""A query that runs for hours on any trace."""


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stream") / "run.duckdb"
    record(case("03"), path)
    return path


def measured(*command: str) -> tuple[list[str], Path]:
    """`command` run under `MEASURED`, and the file its peak RSS is written to."""
    handle, name = tempfile.mkstemp(prefix="rss-")
    os.close(handle)
    return [sys.executable, "-c", MEASURED, name, *command], Path(name)


def peak_rss_bytes(path: Path) -> int:
    try:
        return int(path.read_text()) * 1024
    finally:
        path.unlink()


class Streamed:
    """What a run of the CLI wrote, read as it came: lines, the first and last, stderr."""

    def __init__(self, process: subprocess.Popen[bytes], rss: Path) -> None:
        assert process.stdout is not None and process.stderr is not None
        self.num_lines, self.first, self.last, tail = 0, b"", b"", b""
        while chunk := process.stdout.read(1 << 20):
            self.num_lines += chunk.count(b"\n")
            lines = (tail + chunk).split(b"\n")
            self.first = self.first or lines[0]
            tail = lines[-1]
            self.last = lines[-2] if len(lines) > 1 else self.last
        process.wait()
        self.returncode = process.returncode
        self.max_rss_bytes = peak_rss_bytes(rss)
        self.stderr = process.stderr.read().decode()


def streamed(trace: Path, query: str, *options: str) -> Streamed:
    """Run `stepscope sql` and read its output as it comes, holding none of it."""
    command, rss = measured(*CLI, str(trace), query, *options)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    ) as process:
        return Streamed(process, rss)


@pytest.mark.parametrize(
    ("option", "first", "last"),
    [
        ("--csv", b"i,s", b"9999999,x9999999"),
        ("--json", b'{"i": 0, "s": "x0"}', b'{"i": 9999999, "s": "x9999999"}'),
    ],
)
def test_ten_million_rows_print_in_bounded_memory(
    trace: Path, option: str, first: bytes, last: bytes
) -> None:
    run = streamed(trace, TEN_MILLION, option)
    assert run.returncode == 0, run.stderr
    assert (run.first, run.last) == (first, last)
    assert run.num_lines == 10_000_000 + (option == "--csv")
    assert run.max_rss_bytes < MAX_RSS_BYTES


@pytest.mark.parametrize("query", [TEN_MILLION, MANY_STEPS])
def test_the_table_holds_what_it_shows_and_stops_counting(trace: Path, query: str) -> None:
    run = streamed(trace, query)
    assert run.returncode == 0, run.stderr
    assert run.last.decode() == (
        f"200 rows shown; more than {COUNTED_ROWS_AT_MOST:,} in all "
        "(stopped counting; --csv or --json for all)"
    )
    assert run.max_rss_bytes < MAX_RSS_BYTES


def test_the_table_counts_the_rows_it_does_not_show(trace: Path) -> None:
    run = streamed(trace, "SELECT * FROM range(123456)", "--limit", "5")
    assert run.returncode == 0, run.stderr
    assert run.last == b"5 rows shown of 123,456 (--limit, --csv or --json for all)"
    everything = streamed(trace, "SELECT * FROM range(5)", "--limit", "5")
    assert everything.last == b"5 rows"


@pytest.mark.parametrize("option", ["--csv", "--json"])
def test_a_closed_pipe_stops_the_reading(trace: Path, option: str) -> None:
    """As `| head -2` leaves it; rows past the first few million would fail the query."""
    query = (
        "SELECT range AS i, CASE WHEN range < 5000000 THEN 'x' "
        "ELSE error('read past the closed pipe') END AS s FROM range(10000000)"
    )
    command, rss = measured(*CLI, str(trace), query, option)
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        head = [process.stdout.readline(), process.stdout.readline()]
        process.stdout.close()
        process.wait()
        stderr = process.stderr.read().decode()
    assert all(head)
    assert process.returncode == 0, stderr
    assert stderr == ""
    assert peak_rss_bytes(rss) < MAX_RSS_BYTES


def _wait_until_open(process: subprocess.Popen[bytes], path: Path) -> None:
    """Until the process has the trace open: past its start, its Ctrl-C handler set."""
    fds = Path(f"/proc/{process.pid}/fd")
    while process.poll() is None:
        try:
            targets = {os.readlink(fd) for fd in fds.iterdir()}
        except OSError:  # a descriptor closed while listed
            continue
        if str(path.resolve()) in targets:
            return
        time.sleep(0.05)
    pytest.fail("the command ended before it opened the trace")


@pytest.mark.parametrize(
    ("query", "options", "as_set"),
    [
        (ENDLESS, [], False),
        (ENDLESS, ["--csv"], False),
        (ENDLESS, ["--json"], False),
        (ENDLESS, [], True),
        ("SELECT range FROM range(1000000000000)", ["--csv"], False),
    ],
    ids=["table", "csv", "json", "set", "while-rows-stream"],
)
def test_ctrl_c_during_a_query_is_one_line_and_exit_130(
    trace: Path, query: str, options: list[str], *, as_set: bool
) -> None:
    with subprocess.Popen(
        [*CLI, str(trace.parent if as_set else trace), query, *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as process:
        try:
            _wait_until_open(process, trace)
            time.sleep(1)  # most often, into the query (the outcome is the same before it)
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=120)
        finally:
            process.kill()
    assert process.returncode == 130
    assert stderr.decode() == "interrupted\n"
