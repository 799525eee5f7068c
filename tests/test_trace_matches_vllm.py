"""A recorded trace holds exactly the decisions real vLLM made, on every conformance case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS, read_jsonl
from traces import record

import stepscope

CASES = sorted((TESTS / "conformance").glob("*.json"))


def _trace_lines(path: Path) -> dict[int, dict[str, Any]]:
    with stepscope.open(path) as trace:
        steps = {
            step: {"idle": idle, "num_free_blocks": free}
            for step, idle, free in trace.sql(
                "SELECT step, idle, num_free_blocks_after_schedule FROM steps"
            ).fetchall()
        }
        for step, request_id, num_tokens, kind, blocks, token in trace.sql(
            "SELECT step, request_id, num_tokens, kind, new_block_ids, sampled_token_id "
            "FROM scheduled ORDER BY step, position"
        ).fetchall():
            line = steps[step]
            line.setdefault("num_scheduled_tokens", {})[request_id] = num_tokens
            line.setdefault("kinds", {})[request_id] = str(kind)
            line.setdefault("new_block_ids", {})[request_id] = list(blocks)
            if token is not None:
                line.setdefault("sampled", {})[request_id] = [token]
        for step, request_id in trace.sql("SELECT step, request_id FROM preemptions").fetchall():
            steps[step].setdefault("preempted", set()).add(request_id)
    return steps


@pytest.mark.parametrize("workload", CASES, ids=[c.stem for c in CASES])
def test_trace_equals_vllm_decisions(workload: Path, tmp_path: Path) -> None:
    trace_path = tmp_path / "trace.duckdb"
    record(workload, trace_path)
    recorded = _trace_lines(trace_path)
    expected = read_jsonl(workload.with_name(workload.stem + ".expected.jsonl"))[:-1]
    assert sorted(recorded) == [line["step"] for line in expected]
    for line in expected:
        mine = recorded[line["step"]]
        assert mine["idle"] == bool(line.get("idle")), line["step"]
        if line.get("idle"):
            continue
        where = f"step {line['step']}"
        scheduled = mine.get("num_scheduled_tokens", {})
        assert list(scheduled.items()) == list(line["num_scheduled_tokens"].items()), where
        kinds = mine.get("kinds", {})
        assert [r for r, k in kinds.items() if k == "new"] == line["new_req_ids"], where
        assert [r for r, k in kinds.items() if k == "resumed"] == line["resumed_req_ids"], where
        assert mine.get("new_block_ids", {}) == line["new_block_ids"], where
        assert mine.get("sampled", {}) == line["sampled"], where
        assert mine.get("preempted", set()) == set(line["preempted_req_ids"]), where
        assert mine["num_free_blocks"] == line["num_free_blocks"], where
