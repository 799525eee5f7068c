"""The step loops hand out a workload's requests in arrival order, list order within a step."""

from __future__ import annotations

import json

from stepscope.engine import parse_workload
from stepscope.engine.arrivals import WorkloadArrivals


def _workload(arrivals: dict[str, int]) -> str:
    requests = [
        {"id": rid, "arrival_step": step, "prompt_token_ids": [5, 6], "output_token_ids": [1],
         "max_tokens": 1, "abort_step": step + 1, "abort_before_update": rid == "r2"}
        for rid, step in arrivals.items()
    ]  # fmt: skip
    config = {
        "block_size": 4,
        "num_blocks": 8,
        "max_num_batched_tokens": 16,
        "max_num_seqs": 4,
        "max_model_len": 32,
    }
    return json.dumps({"config": config, "requests": requests, "max_steps": 10})


def test_due_in_arrival_order_then_list_order() -> None:
    arrivals = WorkloadArrivals(parse_workload(_workload({"r0": 2, "r1": 0, "r2": 2, "r3": 1})))
    assert [spec.request_id for spec in arrivals.due(0)] == ["r1"]
    assert not arrivals.all_arrived()
    assert [spec.request_id for spec in arrivals.due(1)] == ["r3"]
    assert arrivals.due(1) == []
    assert [spec.request_id for spec in arrivals.due(2)] == ["r0", "r2"]
    assert arrivals.all_arrived()
    assert arrivals.aborts == {3: ["r0"], 1: ["r1"], 2: ["r3"]}
    assert arrivals.aborts_before_update == {3: ["r2"]}


def test_a_late_call_hands_out_everything_due_by_then() -> None:
    arrivals = WorkloadArrivals(parse_workload(_workload({"a": 3, "b": 0, "c": 5})))
    assert [spec.request_id for spec in arrivals.due(4)] == ["b", "a"]
    assert [spec.request_id for spec in arrivals.due(9)] == ["c"]
    assert arrivals.all_arrived()
