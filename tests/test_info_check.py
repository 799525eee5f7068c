"""`stepscope info` says whether it read every block; `--check` reads them and finds the damage.

DuckDB checks a block only when a query reads it, and `info` reads only what it shows:
a trace with one damaged block in `_requests` still shows as complete, so `info` must
say its blocks were not checked, and `info --check` must find that block.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_cli import stepscope
from traces import damage_table_block, record

STORM = REPO / "examples" / "preemption_storm" / "workload.json"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The storm example, whole and with one byte damaged in a block of `_requests` alone."""
    folder = tmp_path_factory.mktemp("info")
    whole, damaged = folder / "whole.duckdb", folder / "damaged.duckdb"
    record(STORM, whole)
    damage_table_block(whole, damaged, "_requests")
    return whole, damaged


def test_info_says_the_blocks_were_not_checked(traces: tuple[Path, Path]) -> None:
    _, damaged = traces
    result = stepscope("info", str(damaged))
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert "complete" in first and "blocks not checked (--check reads them)" in first
    shown = json.loads(stepscope("info", str(damaged), "--json").stdout)
    assert shown["complete"] is True and shown["blocks_checked"] is False


def test_info_check_finds_the_damaged_block(traces: tuple[Path, Path]) -> None:
    _, damaged = traces
    result = stepscope("info", "--check", str(damaged))
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {damaged}: a damaged trace, its table _requests cannot be ")


def test_info_check_on_a_whole_trace_says_every_block_was_read(traces: tuple[Path, Path]) -> None:
    whole, _ = traces
    result = stepscope("info", "--check", str(whole))
    assert result.returncode == 0, result.stderr
    assert "every block read" in result.stdout.splitlines()[0]
    shown = json.loads(stepscope("info", "--check", "--json", str(whole)).stdout)
    assert shown["blocks_checked"] is True


def test_a_trace_another_process_writes_is_not_called_damaged(
    traces: tuple[Path, Path], tmp_path: Path
) -> None:
    """DuckDB lets no reader beside a writing process: every command says the trace is
    being written, by which process, not that it is damaged; the file is left as it was."""
    trace = tmp_path / "recording.duckdb"
    trace.write_bytes(traces[0].read_bytes())
    holds_it = "import sys, duckdb; c = duckdb.connect(sys.argv[1]); print(flush=True); input()"
    writer = subprocess.Popen(
        [sys.executable, "-c", holds_it, str(trace)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "\n"
        for command in (["info"], ["sql", "SELECT count(*) FROM steps"], ["replay"]):
            result = stepscope(command[0], str(trace), *command[1:])
            assert result.returncode == 2, result.stdout + result.stderr
            (line,) = result.stderr.splitlines()
            assert f"a trace being written: process {writer.pid} holds it open" in line, line
            assert "damaged" not in line
    finally:
        writer.communicate("\n", timeout=30)
    assert trace.read_bytes() == traces[0].read_bytes()
