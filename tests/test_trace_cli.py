"""`stepscope record`, `info` and `sql` from the command line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from test_cli import stepscope
from traces import case


def test_record_then_info_then_sql(tmp_path: Path) -> None:
    trace = tmp_path / "run.duckdb"
    result = stepscope("record", str(case("03")), "-o", str(trace))
    assert result.returncode == 0, result.stderr
    assert "recorded 13 steps of 3 requests" in result.stderr and "complete" in result.stderr

    info = json.loads(stepscope("info", str(trace), "--json").stdout)
    assert info["complete"] is True
    assert info["summary"]["num_preemptions"] == 1
    assert info["summary"]["finish_reasons"] == {"stop": 3}
    assert info["config"]["num_blocks"] == 7
    text = stepscope("info", str(trace)).stdout
    assert "complete" in text and "num preemptions" in text

    listing = stepscope("sql", str(trace)).stdout
    for view in ("why_preempted", "why_waiting", "budget_spent", "request_timeline"):
        assert view in listing

    rows = stepscope("sql", str(trace), "SELECT step, request_id FROM preemptions", "--json")
    assert [json.loads(line) for line in rows.stdout.splitlines()] == [
        {"step": 6, "request_id": "r1"}
    ]
    table = stepscope("sql", str(trace), "SELECT step, needed_by FROM why_preempted", "--csv")
    assert list(csv.reader(io.StringIO(table.stdout))) == [["step", "needed_by"], ["6", "r0"]]
    pretty = stepscope("sql", str(trace), "SELECT step, request_id FROM preemptions").stdout
    assert "r1" in pretty and "1 rows" in pretty


def test_record_refuses_to_overwrite(tmp_path: Path) -> None:
    trace = tmp_path / "run.duckdb"
    assert stepscope("record", str(case("01")), "-o", str(trace)).returncode == 0
    again = stepscope("record", str(case("01")), "-o", str(trace))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_record_with_knobs_and_redaction(tmp_path: Path) -> None:
    trace = tmp_path / "run.duckdb"
    result = stepscope(
        "record", str(case("03")), "-o", str(trace), "--set", "num_blocks=64", "--redact"
    )
    assert result.returncode == 0, result.stderr
    info = json.loads(stepscope("info", str(trace), "--json").stdout)
    assert info["summary"]["num_preemptions"] == 0
    assert info["meta"]["redacted"] == "true"
