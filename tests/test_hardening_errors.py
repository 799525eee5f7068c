"""Bad input and broken files through the real CLI: one line, exit 2; a divergence alone exits 1."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from test_cli import stepscope
from traces import case, decode_workload, record

import stepscope as api

CLI = [sys.executable, "-m", "stepscope"]
ENV = {"COLUMNS": "160", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("t") / "t.duckdb"
    record(case("03"), path)
    return path


@pytest.fixture(scope="module")
def incomplete(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording stopped at step 40 of a longer run (as Ctrl-C leaves one)."""
    path = tmp_path_factory.mktemp("i") / "incomplete.duckdb"

    class StopEarly:
        def on_step(self, record_: object, scheduler: object) -> None:
            if getattr(record_, "step", 0) == 40:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        record(decode_workload(8, 200), path, sinks=[StopEarly()], flush_every_steps=4)
    return path


def assert_one_line_error(result: subprocess.CompletedProcess[str], *names: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for name in names:
        assert name in lines[0], (name, lines[0])


@pytest.mark.parametrize(
    "query",
    ["SELECT request_id::INT FROM requests", "SELECT error('x')", "SELECT 1 / 0 + 'a'::INT"],
)
def test_an_error_while_rows_are_fetched_is_one_line(trace: Path, query: str) -> None:
    assert_one_line_error(stepscope("sql", str(trace), query))


def _report_args(command: str, trace: Path) -> list[str]:
    return ["diff", str(trace), str(trace)] if command == "diff" else ["check", str(trace)]


@pytest.mark.parametrize("command", ["diff", "check"])
@pytest.mark.parametrize("option", ["--junit", "--markdown"])
def test_a_report_into_a_missing_folder_creates_it(
    trace: Path, tmp_path: Path, command: str, option: str
) -> None:
    report = tmp_path / "reports" / "ci" / "report.out"
    result = stepscope(*_report_args(command, trace), option, str(report))
    assert result.returncode == 0, result.stderr
    assert report.read_text().strip()
    assert sorted(p.name for p in report.parent.iterdir()) == ["report.out"]


@pytest.mark.parametrize("command", ["diff", "check"])
@pytest.mark.parametrize("option", ["--junit", "--markdown"])
def test_a_report_path_that_cannot_be_written_is_exit_2_before_the_work(
    trace: Path, tmp_path: Path, command: str, option: str
) -> None:
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("a file, not a folder\n")
    for report in (tmp_path, not_a_folder / "report.out"):
        result = stepscope(*_report_args(command, trace), option, str(report))
        assert_one_line_error(result, option, str(report))
        assert result.stdout == ""  # refused before the traces were compared
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def _with_closed_stdout(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout a pipe whose reader has already gone (as `| head` leaves it)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([*CLI, *args], stdout=write, stderr=subprocess.PIPE, text=True,
                              env=ENV)  # fmt: skip
    finally:
        os.close(write)


def test_a_closed_pipe_keeps_the_exit_status_of_the_work(trace: Path, tmp_path: Path) -> None:
    identical = _with_closed_stdout("replay", str(trace))
    assert identical.returncode == 0, identical.stderr
    assert "Traceback" not in identical.stderr and "Broken pipe" not in identical.stderr
    tampered = tmp_path / "tampered.duckdb"
    shutil.copy(trace, tampered)
    with duckdb.connect(str(tampered)) as con:
        con.execute("UPDATE _steps SET num_free_blocks_after_schedule = 5 WHERE step = 4")
    assert _with_closed_stdout("replay", str(tampered)).returncode == 1
    rows = _with_closed_stdout("sql", str(trace), "SELECT * FROM _scheduled", "--csv")
    assert rows.returncode == 0 and "Traceback" not in rows.stderr


def test_a_file_cut_short_says_so(trace: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.duckdb"
    for size in (20_000, 50_000, 90_000, trace.stat().st_size - 1000):
        cut.write_bytes(trace.read_bytes()[:size])
        result = stepscope("info", str(cut))
        assert_one_line_error(result, str(cut), "truncated", f"ends at byte {size}")


def test_a_trace_without_a_table_names_the_table(trace: Path, tmp_path: Path) -> None:
    edited = tmp_path / "edited.duckdb"
    shutil.copy(trace, edited)
    with duckdb.connect(str(edited)) as con:
        con.execute("DROP TABLE _steps")
    result = stepscope("info", str(edited))
    assert_one_line_error(result, str(edited), "without its _steps table")
    assert "truncated" not in result.stderr


@pytest.mark.parametrize("command", ["tui", "info", "replay"])
def test_a_workload_given_as_a_trace_says_record_it_first(tmp_path: Path, command: str) -> None:
    for workload in (case("03"), Path("examples/workloads/chat_poisson.toml").resolve()):
        copy = tmp_path / workload.name
        shutil.copy(workload, copy)
        result = stepscope(command, str(copy))
        assert_one_line_error(result, str(copy), "a workload, not a trace", "stepscope record")


def test_a_file_that_is_not_duckdb_says_so(tmp_path: Path) -> None:
    notes = tmp_path / "notes.duckdb"
    notes.write_text("hello\n" * 100)
    assert_one_line_error(stepscope("info", str(notes)), str(notes), "not a DuckDB file")
    empty = tmp_path / "empty.duckdb"
    empty.write_bytes(b"")
    assert_one_line_error(stepscope("info", str(empty)), str(empty), "empty file")


def test_check_of_an_incomplete_baseline_agrees_with_replay(incomplete: Path) -> None:
    replayed = stepscope("replay", str(incomplete))
    assert replayed.returncode == 0, replayed.stdout
    checked = stepscope("check", str(incomplete))
    assert checked.returncode == 0, checked.stdout
    assert "FAIL" not in checked.stdout
    assert "incomplete" in checked.stdout and "41 steps it holds" in checked.stdout


def test_check_of_an_incomplete_baseline_still_catches_a_changed_rule(incomplete: Path) -> None:
    checked = stepscope("check", str(incomplete), "--set", "max_num_seqs=4")
    assert checked.returncode == 1, checked.stdout
    assert "FAIL" in checked.stdout


def test_a_trace_with_a_write_ahead_log_counts_it(trace: Path, tmp_path: Path) -> None:
    """A run killed before its last checkpoint leaves rows in the `.wal`: `info` says so."""
    copy = tmp_path / "wal.duckdb"
    shutil.copy(trace, copy)
    con = duckdb.connect(str(copy), config={"checkpoint_threshold": "1GB"})
    con.execute("UPDATE _meta SET value = 'false' WHERE key = 'complete'")
    wal = copy.with_name(copy.name + ".wal")
    shutil.copy(copy, tmp_path / "kept.duckdb")
    shutil.copy(wal, tmp_path / "kept.duckdb.wal")
    con.close()
    kept = tmp_path / "kept.duckdb"
    result = stepscope("info", str(kept), "--json")
    assert result.returncode == 0, result.stderr
    assert f'"wal_bytes": {kept.with_name("kept.duckdb.wal").stat().st_size}' in result.stdout
    shown = stepscope("info", str(kept))
    assert "kept.duckdb.wal" in shown.stdout and "copy both files" in shown.stdout
    with api.open(kept) as opened:
        assert not opened.complete
