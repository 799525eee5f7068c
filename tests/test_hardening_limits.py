"""Hostile input through the real CLI: size knobs beyond what a run can hold, non-finite
numbers, ids that hide or rewrite text, and trace strings that reach the terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import TESTS

CASE = TESTS / "conformance" / "03_s03_fcfs_tail_victim_recompute.json"
TITLE = "\x1b]0;pwned\x07"
HOSTILE_IDS = [f"{TITLE}\x1b[31mr{i}[bold]" for i in range(3)]

TOML = """
num_requests = {num_requests}
[config]
block_size = 16
num_blocks = 1000
max_num_batched_tokens = 2048
max_num_seqs = 64
[arrivals]
process = "constant"
interval = 1
[prompt_len]
distribution = "fixed"
value = 100
[output_len]
distribution = "{output_distribution}"
{output_len}
"""


def stepscope(
    *args: str, cwd: Path | None = None, memory_limit: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    if memory_limit is not None:
        env["STEPSCOPE_MEMORY_LIMIT"] = memory_limit
    return subprocess.run(
        [sys.executable, "-m", "stepscope", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def assert_refused(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2, one line on stderr naming what is wrong, no traceback, nothing on stdout."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def workload(tmp_path: Path, change: Any = None, name: str = "workload.json") -> Path:
    raw = json.loads(CASE.read_text())
    if change is not None:
        change(raw)
    path = tmp_path / name
    path.write_text(json.dumps(raw))
    return path


def toml(tmp_path: Path, num_requests: int, output_len: str = "value = 100") -> Path:
    distribution = "lognormal" if "mean" in output_len else "fixed"
    path = tmp_path / "synthetic.toml"
    path.write_text(
        TOML.format(
            num_requests=num_requests, output_distribution=distribution, output_len=output_len
        )
    )
    return path


# ----- resource limits ----------------------------------------------------------------


def test_num_blocks_beyond_a_trace_integer_is_refused(tmp_path: Path) -> None:
    path = workload(tmp_path, lambda w: w["config"].update(num_blocks=10**12))
    assert_refused(stepscope("run", str(path)), "config.num_blocks", "at most 2147483647")


def test_set_num_blocks_beyond_the_memory_limit_is_refused() -> None:
    result = stepscope("run", str(CASE), "--set", "num_blocks=10000000", memory_limit="1G")
    assert_refused(result, "config.num_blocks", "10,000,000", "GB", "STEPSCOPE_MEMORY_LIMIT")


def test_synthetic_num_requests_beyond_the_memory_limit_is_refused(tmp_path: Path) -> None:
    result = stepscope("record", str(toml(tmp_path, 100_000_000)), "-o", str(tmp_path / "t.duckdb"))
    assert_refused(result, "synthetic.toml:2: num_requests", "100,000,000 requests", "at most")
    assert not (tmp_path / "t.duckdb").exists()


def test_synthetic_output_len_beyond_the_memory_limit_is_refused(tmp_path: Path) -> None:
    path = toml(tmp_path, 1, "mean = 2000000000.0\nsigma = 0.1")
    assert_refused(stepscope("run", str(path), memory_limit="1G"), "output_len", "tokens")


def test_a_lognormal_minimum_counts_in_the_estimate(tmp_path: Path) -> None:
    path = toml(tmp_path, 8, "mean = 8.0\nsigma = 0.5\nmin = 100000000")
    assert_refused(stepscope("run", str(path), memory_limit="1G"), "output_len", "tokens")


def test_a_workload_file_too_big_to_parse_is_refused_before_reading(tmp_path: Path) -> None:
    path = workload(tmp_path, lambda w: w.update(description="x" * 200_000))
    assert_refused(stepscope("run", str(path), memory_limit="1M"), str(path), "would need")


def test_a_run_within_the_limit_is_untouched() -> None:
    assert stepscope("run", str(CASE), memory_limit="64M").returncode == 0


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda w: w.update(max_steps=2**31), "max_steps: must be at most 2147483647"),
        (lambda w: w["requests"][0].update(max_tokens=2**40), "max_tokens: must be at most"),
        (lambda w: w["requests"][0].update(priority=-(2**40)), "priority: must be at least"),
        (lambda w: w["requests"][0].update(arrival_step=10**30), "arrival_step: must be at most"),
    ],
)
def test_counts_beyond_a_trace_integer_are_refused(
    tmp_path: Path, change: Any, needle: str
) -> None:
    assert_refused(stepscope("run", str(workload(tmp_path, change))), needle)


def test_json_nested_too_deeply_or_an_endless_integer_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert_refused(stepscope("run", str(deep)), "deep.json", "nested too deeply")
    huge = tmp_path / "huge.json"
    huge.write_text('{"max_steps": ' + "9" * 5000 + "}")
    assert_refused(stepscope("run", str(huge)), "huge.json", "invalid JSON")


# ----- non-finite numbers -------------------------------------------------------------


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_arrival_time_is_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / "workload.json"
    raw = json.loads(CASE.read_text())
    raw["requests"][1]["arrival_time"] = "PLACEHOLDER"
    path.write_text(json.dumps(raw).replace('"PLACEHOLDER"', value))
    assert_refused(stepscope("run", str(path)), "requests[1] (id 'r1'): arrival_time", "finite")


def test_non_finite_knobs_are_refused(tmp_path: Path) -> None:
    assert_refused(stepscope("run", str(CASE), "--set", "watermark=NaN"), "watermark")
    assert_refused(stepscope("run", str(CASE), "--set", "max_num_seqs=Infinity"), "max_num_seqs")
    path = toml(tmp_path, 4, "mean = inf\nsigma = 0.1")
    assert_refused(stepscope("run", str(path)), "output_len.mean", "finite")


# ----- request ids ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_id", "needle"),
    [
        ("a\x00b", "character 1 is a NUL (U+0000)"),
        ("abc\u202edcba", "character 3 is a bidi control (U+202E)"),
        ("x\u2066y", "character 1 is a bidi control (U+2066)"),
    ],
)
def test_nul_and_bidi_controls_in_ids_are_refused(
    tmp_path: Path, request_id: str, needle: str
) -> None:
    path = workload(tmp_path, lambda w: w["requests"][2].update(id=request_id))
    result = stepscope("run", str(path))
    assert_refused(result, "requests[2]", ": id: ", needle)
    assert "\x00" not in result.stderr and "\u202e" not in result.stderr


def test_an_absurdly_long_id_is_refused_in_one_short_line(tmp_path: Path) -> None:
    path = workload(tmp_path, lambda w: w["requests"][0].update(id="a" * 5_000_000))
    result = stepscope("run", str(path))
    assert_refused(result, "requests[0]", "5,000,000 characters long; at most 1024")
    assert len(result.stderr) < 400


# ----- terminal safety ----------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a workload whose ids hold escape sequences, and its recorded trace."""
    folder = tmp_path_factory.mktemp("hostile")

    def ids(raw: dict[str, Any]) -> None:
        for request, request_id in zip(raw["requests"], HOSTILE_IDS, strict=True):
            request["id"] = request_id

    workload(folder, ids, name="hostile.json")
    result = stepscope("record", "hostile.json", "-o", "a.duckdb", cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder


def assert_safe(result: subprocess.CompletedProcess[str], *, expect_ids: bool = True) -> None:
    """No escape sequence reaches the terminal; the ids are shown with theirs written out."""
    assert "Traceback" not in result.stderr, result.stderr
    assert "\x1b" not in result.stdout + result.stderr
    assert "\x07" not in result.stdout + result.stderr
    if expect_ids:
        assert "\\x1b]0;pwned\\x07\\x1b[31mr" in result.stdout + result.stderr


def test_run_table_escapes_ids(hostile: Path) -> None:
    result = stepscope("run", "hostile.json", cwd=hostile)
    assert result.returncode == 0
    assert_safe(result)


@pytest.mark.parametrize("vertical", [False, True])
def test_sql_escapes_what_it_prints(hostile: Path, *, vertical: bool) -> None:
    args = ["-x"] if vertical else []
    result = stepscope("sql", "a.duckdb", "SELECT request_id FROM requests", *args, cwd=hostile)
    assert result.returncode == 0
    assert_safe(result)
    assert "[bold]" in result.stdout  # shown as typed, not taken for markup


def test_sql_json_output_escapes_control_characters(hostile: Path) -> None:
    result = stepscope("sql", "a.duckdb", "SELECT request_id FROM requests", "--json", cwd=hostile)
    assert result.returncode == 0
    assert_safe(result, expect_ids=False)
    assert [json.loads(line)["request_id"] for line in result.stdout.splitlines()] == HOSTILE_IDS


def test_info_escapes_the_trace_strings(hostile: Path) -> None:
    trace = hostile / "meta.duckdb"
    trace.write_bytes((hostile / "a.duckdb").read_bytes())
    with duckdb.connect(str(trace)) as connection:
        connection.execute("UPDATE _meta SET value = ? WHERE key = 'model'", [HOSTILE_IDS[0]])
    result = stepscope("info", "meta.duckdb", cwd=hostile)
    assert result.returncode == 0, result.stderr
    assert_safe(result)


def test_what_if_and_diff_reports_escape_ids(hostile: Path) -> None:
    whatif = stepscope("replay", "a.duckdb", "--set", "num_blocks=8", "-o", "b.duckdb", cwd=hostile)
    assert whatif.returncode == 0, whatif.stderr
    assert_safe(whatif)
    diff = stepscope("diff", "a.duckdb", "b.duckdb", cwd=hostile)
    assert diff.returncode == 1, diff.stderr  # the decisions differ
    assert_safe(diff)
    check = stepscope("check", "a.duckdb", "--set", "num_blocks=8", "-v", cwd=hostile)
    assert check.returncode == 1, check.stderr
    assert_safe(check)


def test_exact_replay_divergence_escapes_ids(hostile: Path) -> None:
    trace = hostile / "edited.duckdb"
    trace.write_bytes((hostile / "a.duckdb").read_bytes())
    with duckdb.connect(str(trace)) as connection:
        connection.execute("UPDATE _steps SET num_free_blocks_after_schedule = 99 WHERE step = 3")
    result = stepscope("replay", "edited.duckdb", cwd=hostile)
    assert result.returncode == 1, result.stderr
    assert_safe(result)


def test_an_error_quoting_a_hostile_name_is_escaped(tmp_path: Path) -> None:
    result = stepscope("run", f"{TITLE}missing.json", cwd=tmp_path)
    assert_refused(result, "\\x1b]0;pwned\\x07missing.json")
    assert_safe(result, expect_ids=False)


def test_the_memory_limit_env_must_parse() -> None:
    env = {**os.environ, "STEPSCOPE_MEMORY_LIMIT": "lots"}
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "run", str(CASE)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert_refused(result, "STEPSCOPE_MEMORY_LIMIT='lots'")


def test_tui_draws_long_and_hostile_ids_escaped_and_elided(hostile: Path) -> None:
    from stepscope.tui.app import StepscopeApp
    from stepscope.tui.widgets.rows_view import RowsView
    from stepscope.tui.widgets.step_detail import StepDetailView
    from textual.pilot import Pilot
    from tui_support import cells, drive, loaded, press, screen_text

    trace = hostile / "long_id.duckdb"
    trace.write_bytes((hostile / "a.duckdb").read_bytes())
    with duckdb.connect(str(trace)) as connection:
        connection.execute(
            "UPDATE _requests SET request_id = ? WHERE request_index = 1", ["y" * 5_000_000]
        )

    async def scenario(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        screen = await press(pilot, "down", "down", "down", "down", "down", "down")
        view = pilot.app.screen.query_one("#detail-a", StepDetailView)
        drawn = [
            cell
            for which in ("scheduled", "allocations", "preemptions")
            for row in cells(view.query_one(f".detail-{which}", RowsView))
            for cell in row
        ]
        assert any(cell.startswith("yyy") and "…" in cell for cell in drawn)
        assert any(cell.startswith("\\x1b]0;pwned\\x07") for cell in drawn)
        assert max(map(len, drawn)) <= 64
        assert "\x1b" not in screen + screen_text(pilot.app)

    drive(StepscopeApp(trace), scenario)
