"""`replay` and `check` show a progress line on a terminal and nothing when stderr is piped."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from pseudo_terminal import everything_drawn
from test_cli import stepscope
from traces import prefill_heavy_workload, record


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "heavy.duckdb"
    record(prefill_heavy_workload(), path)
    return path


def on_a_terminal(*args: str) -> tuple[int, str]:
    """Run stepscope with stderr on a pseudo-terminal; returns the exit code and what it drew."""
    leader, follower = pty.openpty()
    env = {"PATH": "/usr/bin:/bin", "TERM": "xterm", "COLUMNS": "120", "LINES": "40"}
    with tempfile.TemporaryFile() as stdout:
        process = subprocess.Popen(
            [sys.executable, "-m", "stepscope", *args], stdout=stdout, stderr=follower, env=env
        )
        os.close(follower)
        return process.wait(), everything_drawn(leader).decode(errors="replace")


def test_replay_shows_progress_on_a_terminal(trace: Path) -> None:
    code, drawn = on_a_terminal("replay", str(trace))
    assert code == 0
    assert "replay heavy.duckdb" in drawn and "steps" in drawn


def test_what_if_shows_progress_on_a_terminal(trace: Path) -> None:
    code, drawn = on_a_terminal("replay", str(trace), "--set", "max_num_batched_tokens=512")
    assert code == 0
    assert "what-if heavy.duckdb" in drawn


def test_check_shows_progress_on_a_terminal(trace: Path, tmp_path: Path) -> None:
    shutil.copy(trace, tmp_path / "heavy.duckdb")
    code, drawn = on_a_terminal("check", str(tmp_path))
    assert code == 0
    assert "[1/1] heavy.duckdb" in drawn


def test_nothing_but_the_result_when_piped(trace: Path, tmp_path: Path) -> None:
    assert stepscope("replay", str(trace)).stderr == ""
    whatif = stepscope("replay", str(trace), "--set", "max_num_batched_tokens=512")
    assert whatif.stderr == ""
    shutil.copy(trace, tmp_path / "heavy.duckdb")
    assert stepscope("check", str(tmp_path)).stderr == ""
