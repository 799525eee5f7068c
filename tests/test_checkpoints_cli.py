"""`--from-step` / `--to-step` and checkpoints through the real CLI: the output a user reads,
and bad input as one line, exit 2, nothing written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from conftest import REPO
from test_cli import stepscope
from test_hardening_errors import assert_one_line_error

STORM = REPO / "examples" / "preemption_storm" / "workload.json"


def _recorded(folder: Path, every: int) -> Path:
    path = folder / "storm.duckdb"
    result = stepscope("record", str(STORM), "-o", str(path), "--checkpoint-every", str(every))
    assert result.returncode == 0, result.stderr
    return path


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _recorded(tmp_path_factory.mktemp("cp"), 10)


@pytest.fixture(scope="module")
def without_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _recorded(tmp_path_factory.mktemp("none"), 0)


def test_info_lists_the_checkpoints(trace: Path, without_checkpoints: Path) -> None:
    report = json.loads(stepscope("info", str(trace), "--json").stdout)
    assert report["checkpoints"] == list(range(10, report["summary"]["num_steps"], 10))
    assert "checkpoints" in stepscope("info", str(trace)).stdout
    none = stepscope("info", str(without_checkpoints)).stdout
    assert re.search(r"checkpoints +none\n", none)


def test_a_replay_from_a_step_says_where_it_started(trace: Path) -> None:
    result = stepscope("replay", str(trace), "--from-step", "25", "--to-step", "40")
    assert result.returncode == 0, result.stderr
    assert "identical: steps 25..40 (16 compared, from the checkpoint at step 20)" in " ".join(
        result.stdout.split()
    )
    data = json.loads(stepscope("replay", str(trace), "--from-step", "25", "--json").stdout)
    assert data["identical"] and data["checkpoint_step"] == 20 and data["from_step"] == 25


def test_a_what_if_and_a_diff_take_the_window(trace: Path, tmp_path: Path) -> None:
    output = tmp_path / "what-if.duckdb"
    args = ["--from-step", "30", "--set", "max_num_seqs=4", "-o", str(output), "--json"]
    result = stepscope("replay", str(trace), *args)
    assert result.returncode in (0, 1), result.stderr
    diff = json.loads(result.stdout)["diff"]
    assert diff["first_decision_step"] >= 30
    windowed = stepscope("diff", str(trace), str(output), "--from-step", "30", "--json")
    assert json.loads(windowed.stdout)["first_decision_step"] == diff["first_decision_step"]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--from-step", "-1"], ["--from-step -1", "0 or more"]),
        (["--from-step", "100000"], ["--from-step 100000", "has steps 0.."]),
        (["--from-step", "20", "--to-step", "10"], ["--to-step 10", "before --from-step 20"]),
        (["--from-step", "5", "--engine", "vllm"], ["--engine vllm", "checkpoint"]),
    ],
    ids=["negative", "past-the-end", "to-before-from", "vllm"],
)
def test_a_bad_window_is_one_line(
    trace: Path, tmp_path: Path, args: list[str], names: list[str]
) -> None:
    output = tmp_path / "replay.duckdb"
    assert_one_line_error(stepscope("replay", str(trace), *args, "-o", str(output)), *names)
    assert not output.exists()


def test_a_trace_without_checkpoints_is_one_line(without_checkpoints: Path, tmp_path: Path) -> None:
    output = tmp_path / "replay.duckdb"
    result = stepscope("replay", str(without_checkpoints), "--from-step", "30", "-o", str(output))
    assert_one_line_error(result, "no checkpoints", "without --from-step")
    assert not output.exists()


@pytest.mark.parametrize(
    ("damage", "names"),
    [
        ("UPDATE _checkpoint_blocks SET ref_cnt = NULL WHERE step = 20 AND block_id = 3",
         ["step 20", "ref_cnt is NULL"]),
        ("DELETE FROM _checkpoint_blocks WHERE step = 20 AND block_id = 7",
         ["step 20", "_checkpoint_blocks does not hold blocks"]),
        ("UPDATE _checkpoint_requests SET request_index = 9999 WHERE step = 20",
         ["step 20", "request_id is NULL"]),
        ("UPDATE _checkpoint_blocks SET ref_cnt = ref_cnt + 1 WHERE step = 20 AND block_id = 1",
         ["step 20", "block 1: ref_cnt"]),
    ],
    ids=["null", "missing-block", "unknown-request", "ref-count"],
)  # fmt: skip
def test_a_damaged_checkpoint_is_one_line(
    trace: Path, tmp_path: Path, damage: str, names: list[str]
) -> None:
    damaged = tmp_path / "damaged.duckdb"
    damaged.write_bytes(trace.read_bytes())
    with duckdb.connect(str(damaged)) as con:
        con.execute(damage)
    output = tmp_path / "replay.duckdb"
    result = stepscope("replay", str(damaged), "--from-step", "25", "-o", str(output))
    assert_one_line_error(result, *names)
    assert not output.exists()


def test_record_refuses_checkpoints_it_cannot_take(tmp_path: Path) -> None:
    output = tmp_path / "t.duckdb"
    result = stepscope(
        "record", str(STORM), "-o", str(output), "--redact", "--checkpoint-every", "5"
    )
    assert_one_line_error(result, "--checkpoint-every", "--redact")
    assert not output.exists()
