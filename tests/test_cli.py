"""`stepscope run`: the per-step table, the oracle-format JSON lines, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import TESTS, read_jsonl
from oracle_compare import first_difference

CASE = TESTS / "conformance" / "03_s03_fcfs_tail_victim_recompute.json"


def stepscope(*args: str, columns: int = 160) -> subprocess.CompletedProcess[str]:
    env = {"COLUMNS": str(columns), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, env=env
    )


def test_jsonl_is_the_oracle_format_line_for_line() -> None:
    result = stepscope("run", str(CASE), "--jsonl")
    assert result.returncode == 0, result.stderr
    ours = [json.loads(line) for line in result.stdout.splitlines()]
    expected = read_jsonl(CASE.with_name(CASE.stem + ".expected.jsonl"))
    assert first_difference(ours, expected) is None


def test_table_shows_admissions_preemptions_and_finishes() -> None:
    result = stepscope("run", str(CASE))
    assert result.returncode == 0, result.stderr
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│" in line}
    assert "+r0:7" in rows["0"] and "+r1:7" in rows["0"]
    assert rows["6"].split("│")[4].strip() == "r1"  # the tail is preempted at step 6
    assert "preempted_this_step" in rows["6"]
    assert "kv_full_sequence" in rows["7"]
    assert "^r1:13" in rows["9"] and "+r2:3" in rows["9"]  # resumed, recomputing 13 tokens
    assert "r0 stop" in rows["8"]
    assert "13 steps (0 idle)" in result.stdout
    assert "1 preemptions" in result.stdout


def test_set_overrides_a_knob() -> None:
    result = stepscope("run", str(CASE), "--jsonl", "--set", "num_blocks=64")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert not any(line.get("preempted_req_ids") for line in lines[:-1])
    assert lines[-1]["effective_config"]["num_blocks"] == 64


def test_default_workload_runs() -> None:
    result = stepscope("run")
    assert result.returncode == 0, result.stderr
    assert "default.json" in result.stdout and "preemptions" in result.stdout


def test_the_title_line_is_whole_however_long_the_path(tmp_path: Path) -> None:
    workload = tmp_path / ("a_workload_at_a_long_path_" * 4) / CASE.name
    workload.parent.mkdir()
    workload.write_text(CASE.read_text())
    result = stepscope("run", str(workload), columns=80)
    assert result.returncode == 0, result.stderr
    title = result.stdout.splitlines()[0]
    assert title.startswith(str(workload)) and title.endswith("; model tape)")


def _assert_clean_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr


def test_bad_workload_is_one_line_and_exit_2(tmp_workload: Any) -> None:
    bad = json.loads(CASE.read_text())
    bad["requests"][2]["max_tokens"] = -1
    path = tmp_workload(bad)
    _assert_clean_error(stepscope("run", str(path), "--jsonl"), str(path), "'r2'", "max_tokens")


def test_bad_knob_is_one_line_and_exit_2() -> None:
    _assert_clean_error(stepscope("run", str(CASE), "--set", "policy=lifo"), "config.policy")
    _assert_clean_error(stepscope("run", str(CASE), "--set", "nonsense"), "KNOB=VALUE")


def test_missing_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    _assert_clean_error(stepscope("run", str(tmp_path / "nope.json")), "cannot read")
