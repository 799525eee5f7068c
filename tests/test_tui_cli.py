"""`stepscope tui` and `stepscope demo` from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from stepscope.schema.step_window import WHOLE, StepWindow
from test_cli import stepscope
from tui_support import trace
from typer.testing import CliRunner

import stepscope as stepscope_package
from stepscope import tui as tui_package
from stepscope.cli import app


def test_demo_records_the_bundled_example(tmp_path: Path) -> None:
    output = tmp_path / "demo.duckdb"
    result = stepscope("demo", "--no-tui", "-o", str(output))
    assert result.returncode == 0, result.stderr
    assert f"recorded 380 steps of 24 requests to {output}" in result.stderr
    with stepscope_package.open(output) as opened:
        assert opened.complete
        assert opened.sql("SELECT num_preemptions FROM summary").fetchall() == [(40,)]


def test_demo_rewrites_one_cached_trace_and_leaves_no_temp_folders(tmp_path: Path) -> None:
    home, scratch = tmp_path / "home", tmp_path / "tmp"
    home.mkdir(), scratch.mkdir()
    env = {"HOME": str(home), "TMPDIR": str(scratch), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    outputs = []
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, "-m", "stepscope", "demo", "--no-tui"],
            capture_output=True, text=True, env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        outputs.append(result.stderr.split(" to ")[-1].strip())
    assert outputs[0] == outputs[1] == str(home / ".cache/stepscope/demo/preemption_storm.duckdb")
    assert list(scratch.iterdir()) == []
    with stepscope_package.open(outputs[1]) as opened:
        assert opened.complete


def test_the_bundled_demo_workload_is_the_preemption_storm_example() -> None:
    bundled = REPO / "stepscope" / "workloads" / "preemption_storm.json"
    example = REPO / "examples" / "preemption_storm" / "workload.json"
    assert json.loads(bundled.read_text()) == json.loads(example.read_text())


def test_tui_and_demo_open_the_app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    opened: list[tuple[Path, Path | None, bool, StepWindow]] = []

    def run_tui(
        path: Path,
        other: Path | None = None,
        *,
        ignore_block_ids: bool = False,
        follow: bool = False,
        window: StepWindow = WHOLE,
    ) -> None:
        opened.append((path, other, ignore_block_ids, window))

    monkeypatch.setattr(tui_package, "run_tui", run_tui)
    monkeypatch.setattr(tui_package, "terminal_problem", lambda: None)
    runner = CliRunner()
    storm, other = trace("storm"), trace("storm_fewer_seqs")
    assert runner.invoke(app, ["tui", str(storm)]).exit_code == 0
    assert runner.invoke(app, ["tui", str(storm), "--diff", str(other)]).exit_code == 0
    ignoring = ["tui", str(storm), "--diff", str(other), "--ignore", "block_ids"]
    assert runner.invoke(app, ignoring).exit_code == 0
    windowed = ["tui", str(storm), "--from-step", "5", "--to-step", "9"]
    assert runner.invoke(app, windowed).exit_code == 0
    output = tmp_path / "demo.duckdb"
    assert runner.invoke(app, ["demo", "-o", str(output)]).exit_code == 0
    assert opened == [
        (storm, None, False, WHOLE),
        (storm, other, False, WHOLE),
        (storm, other, True, WHOLE),
        (storm, None, False, StepWindow(5, 9)),
        (output, None, False, WHOLE),
    ]


def test_without_a_terminal_tui_is_a_one_line_error_and_demo_only_records(
    tmp_path: Path,
) -> None:
    def without_terminal(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "stepscope", *args],
            stdin=subprocess.DEVNULL, capture_output=True, text=True,
        )  # fmt: skip

    result = without_terminal("tui", str(trace("storm")))
    assert result.returncode == 2
    assert result.stderr == "error: the TUI needs a terminal, and stdin is not one\n"
    output = tmp_path / "demo.duckdb"
    result = without_terminal("demo", "-o", str(output))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"the TUI needs a terminal, and stdin is not one: open it later with "
        f"`stepscope tui {output}`"
    )
    with stepscope_package.open(output) as opened:
        assert opened.complete


def test_a_terminal_on_stdin_and_stderr_is_enough_for_the_tui() -> None:
    check = "from stepscope.tui import terminal_problem; print(terminal_problem())"
    parent, child = os.openpty()
    try:
        results = [
            subprocess.run(
                [sys.executable, "-c", check], stdin=stdin, stderr=stderr,
                stdout=subprocess.PIPE, text=True,
            ).stdout.strip()
            for stdin, stderr in ((child, child), (child, subprocess.PIPE))
        ]  # fmt: skip
    finally:
        os.close(parent), os.close(child)
    assert results == ["None", "the TUI needs a terminal, and stderr is not one"]


def test_a_missing_trace_is_a_one_line_error(tmp_path: Path) -> None:
    result = stepscope("tui", str(tmp_path / "nope.duckdb"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {tmp_path / 'nope.duckdb'}: no such file"
    result = stepscope("tui", str(trace("storm")), "--diff", str(tmp_path / "other.duckdb"))
    assert result.returncode == 2 and "other.duckdb: no such file" in result.stderr


def test_a_file_that_is_not_a_trace_is_a_one_line_error_before_the_app_starts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "notes.duckdb"
    path.write_text("not a trace\n" * 100)
    result = stepscope("tui", str(path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "not a readable trace" in result.stderr
    result = stepscope("tui", str(trace("storm")), "--diff", str(path))
    assert result.returncode == 2 and "notes.duckdb: not a readable trace" in result.stderr


def test_help_names_the_diff_option() -> None:
    result = stepscope("tui", "--help")
    assert result.returncode == 0 and "--diff" in result.stdout
    assert "--no-tui" in stepscope("demo", "--help").stdout
