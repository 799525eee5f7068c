"""A run with a real model replays exactly with no model, and a live rerun diffs as identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import stepscope
from traces import case

pytest.importorskip("torch")


def test_model_trace_replays_without_a_model_and_reruns_identically(tmp_path: Path) -> None:
    live, rerun = tmp_path / "live.duckdb", tmp_path / "rerun.duckdb"
    workload = str(case("06"))
    assert stepscope("record", workload, "-o", str(live), "--model", "tiny").returncode == 0
    info = json.loads(stepscope("info", str(live), "--json").stdout)
    assert info["meta"]["model"] == "tiny" and info["meta"]["device"] == "cpu"
    assert "torch_version" in info["meta"]

    replayed = stepscope("replay", str(live), "--json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert json.loads(replayed.stdout)["identical"] is True

    result = stepscope("record", "--from", str(live), "-o", str(rerun), "--model", "tiny")
    assert result.returncode == 0, result.stderr
    diff = stepscope("diff", str(live), str(rerun), "--json")
    assert diff.returncode == 0, diff.stdout
    assert json.loads(diff.stdout)["classification"] == "identical"


def test_record_from_refuses_a_workload_too(tmp_path: Path) -> None:
    live = tmp_path / "live.duckdb"
    assert stepscope("record", str(case("01")), "-o", str(live)).returncode == 0
    both = stepscope("record", str(case("01")), "--from", str(live), "-o", str(tmp_path / "x"))
    assert both.returncode == 2 and "not both" in both.stderr
