"""Every command (but `sql`) on a real pseudo-terminal over hostile traces: what reaches the
terminal holds the payload only escaped, and the reports CI keeps hold no control character."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from xml.etree import ElementTree

import duckdb
import pytest
from hostile_traces import (
    PAYLOAD,
    SHOWN_PAYLOAD,
    hostile_sweep,
    hostile_traces,
    on_terminal,
    raw_payloads,
)

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters a report file must not hold (a tab and line breaks are text)."""

SHOWN = SHOWN_PAYLOAD.encode()


def assert_escaped(args: list[str], cwd: Path, expect: int = 0, *, shown: bool = True) -> bytes:
    """Run the command on a terminal: its exit status, no raw payload, and (`shown`) the
    payload written out where a trace's string is shown."""
    run = on_terminal(*args, cwd=cwd)
    assert b"Traceback" not in run.output, run.output.decode(errors="replace")
    assert run.returncode == expect, run.output.decode(errors="replace")
    assert raw_payloads(run.output) == []
    if shown:
        assert SHOWN[:24] in run.output.replace(b"\r\n", b"")
    return run.output


def assert_clean_report(path: Path) -> str:
    text = path.read_text()
    assert CONTROL.findall(text) == []
    assert "\\x1b[2J" in text
    return text


@pytest.mark.parametrize(
    "command",
    [
        ["run", "hostile.json"],
        ["info", "hostile.duckdb"],
        ["info", "config.duckdb"],
        ["replay", "hostile.duckdb", "--set", "num_blocks=30"],
        ["diff", "hostile.duckdb", "config.duckdb"],
        ["diff", "hostile.duckdb", "other_inputs.duckdb"],
        ["check", "hostile.duckdb", "--set", "num_blocks=30", "-v"],
    ],
    ids=" ".join,
)
def test_commands_print_trace_strings_escaped(command: list[str]) -> None:
    expect = 1 if command[0] in ("diff", "check") or "--set" in command else 0  # what differs
    assert_escaped(command, hostile_traces().folder, expect)


def test_the_diff_of_changed_requests_and_its_reports_are_escaped(tmp_path: Path) -> None:
    traces = hostile_traces()
    markdown, junit = tmp_path / "diff.md", tmp_path / "diff.xml"
    output = assert_escaped(
        ["diff", str(traces.trace), str(traces.what_if), "--markdown", str(markdown),
         "--junit", str(junit)],
        tmp_path,
        expect=1,
    )  # fmt: skip
    assert b"[bold red]EVIL[/]" in output  # drawn as typed, not as markup
    report = assert_clean_report(markdown)
    assert "| [bold red]EVIL[/] |" in report
    assert_valid_junit(junit)


def test_check_reports_are_escaped(tmp_path: Path) -> None:
    traces = hostile_traces()
    baseline = tmp_path / f"{PAYLOAD}.duckdb"  # a baseline's name is its file's
    shutil.copyfile(traces.config, baseline)
    markdown, junit = tmp_path / "check.md", tmp_path / "check.xml"
    assert_escaped(
        ["check", str(tmp_path), "--set", "num_blocks=30", "--markdown", str(markdown),
         "--junit", str(junit)],
        tmp_path,
        expect=2,  # the baseline's config no longer loads
        shown=True,
    )  # fmt: skip
    shutil.copyfile(traces.trace, baseline)
    assert_escaped(
        ["check", str(tmp_path), "--set", "num_blocks=30", "--markdown", str(markdown),
         "--junit", str(junit)],
        tmp_path,
        expect=1,
    )  # fmt: skip
    assert_clean_report(markdown)
    assert_valid_junit(junit)


def assert_valid_junit(path: Path) -> None:
    assert CONTROL.findall(path.read_text()) == []
    root = ElementTree.parse(path).getroot()  # well-formed XML 1.0
    assert root.tag == "testsuites"


def test_an_exact_replay_divergence_is_escaped(tmp_path: Path) -> None:
    edited = tmp_path / "edited.duckdb"
    shutil.copyfile(hostile_traces().trace, edited)
    with duckdb.connect(str(edited)) as connection:
        connection.execute("UPDATE _steps SET num_free_blocks_after_schedule = 99 WHERE step = 3")
    output = assert_escaped(["replay", str(edited)], tmp_path, expect=1)
    assert b"[bold red]EVIL[/]" in output


def test_record_export_and_sweep_print_escaped(tmp_path: Path) -> None:
    traces = hostile_traces()
    out = tmp_path / f"{PAYLOAD}.duckdb"
    assert_escaped(["record", str(traces.workload), "-o", str(out)], tmp_path)
    assert_escaped(["export", str(out), "--perfetto", str(tmp_path / f"{PAYLOAD}.pftrace")],
                   tmp_path)  # fmt: skip
    assert_escaped(["export", str(out), "--parquet", str(tmp_path / "parquet")], tmp_path)
    assert_escaped(
        ["sweep", str(out), "--grid", "num_blocks=30,41", "--jobs", "1",
         "-o", str(tmp_path / f"{PAYLOAD}-sweep.duckdb")],
        tmp_path,
    )  # fmt: skip
    assert_escaped(["demo", "--no-tui", "-o", str(tmp_path / f"{PAYLOAD}-demo.duckdb")], tmp_path)


@pytest.mark.parametrize(
    "extra", [[], ["--plot", "num_steps:num_preemptions"]], ids=["table", "plot"]
)
def test_a_hostile_sweep_result_shows_escaped(extra: list[str]) -> None:
    result = hostile_sweep()
    output = assert_escaped(["sweep", "--show", str(result), *extra], result.parent)
    assert b"scheduler " + SHOWN[:12] in output.replace(b"\r\n", b"")


def test_the_tui_on_a_terminal_writes_ids_and_console_cells_escaped() -> None:
    """The issue's own case: `s`, a query of the ids, `ctrl+j`; then back and quit.

    `ctrl+a`, the query and `ctrl+j` reach the editor in one read, as a paste does: the
    editor acts on them in turn (as bindings, the query ran without its end, or lost its
    start to the selection)."""
    query = b"SELECT request_id FROM requests"
    run = on_terminal(
        "tui",
        "hostile.duckdb",
        cwd=hostile_traces().folder,
        keys=(
            (b"EVIL\\x9b31mC1", b"s"),  # the step detail shows an id: the timeline is up
            (b"ready: ctrl+enter", b"\x01" + query + b"\n"),  # select all, type over, run
            (b"24 rows", b"\x1b"),
            (b"find request", b"q"),  # the timeline's keys again
        ),
    )
    assert run.unsent == () and run.returncode == 0, run.output[-2000:]
    assert b"24 rows" in run.output
    assert raw_payloads(run.output) == []
    assert b"\\x1b[2J\\x1b[31mEVIL" in run.output
