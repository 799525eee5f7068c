"""Requests aborted in one step free their blocks in the order the engine applied the aborts.

vLLM's `finish_requests` walks a set of ids, so a live engine's order depends on the
string hash seed; the trace records it (the abort events' order) and a replay follows it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import duckdb
from stepscope.engine import TapeModelRunner, Workload, parse_workload
from stepscope.replay.exact import replay_exact
from stepscope.replay.inputs import workload_from_trace
from stepscope.schema import open_trace
from stepscope.tracer.record_workload import record_workload

WORKLOAD = {
    "config": {
        "block_size": 4,
        "num_blocks": 12,
        "max_num_batched_tokens": 64,
        "max_num_seqs": 4,
        "max_model_len": 64,
        "enable_prefix_caching": False,
    },
    "requests": [
        {"id": "a", "prompt_token_ids": [5, 6, 7, 8, 9, 10, 11], "output_token_ids": [1] * 10,
         "max_tokens": 10, "abort_step": 2},
        {"id": "b", "prompt_token_ids": [15, 16, 17, 18, 19, 20, 21], "output_token_ids": [1] * 10,
         "max_tokens": 10, "abort_step": 2},
        {"id": "c", "arrival_step": 2, "prompt_token_ids": list(range(30, 42)),
         "output_token_ids": [1, 1, 1], "max_tokens": 3},
    ],
    "max_steps": 50,
}  # fmt: skip


def record(tmp_path: Path, abort_order: tuple[str, ...]) -> Path:
    workload = dataclasses.replace(parse_workload(json.dumps(WORKLOAD)), abort_order=abort_order)
    path = tmp_path / f"aborts-{'-'.join(abort_order) or 'listed'}.duckdb"
    record_workload(workload, tapes(workload), path)
    return path


def tapes(workload: Workload) -> TapeModelRunner:
    return TapeModelRunner({spec.request_id: spec.output_token_ids for spec in workload.requests})


def abort_events(path: Path) -> list[int]:
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.sql("SELECT request_index FROM _events WHERE kind = 'abort' ORDER BY step, seq")
        return [index for (index,) in rows.fetchall()]


def blocks_of_c(path: Path) -> list[int]:
    with duckdb.connect(str(path), read_only=True) as con:
        rows = con.sql(
            "SELECT block_id FROM _block_ids WHERE request_index = 2 ORDER BY step, slot"
        )
        return [block_id for (block_id,) in rows.fetchall()]


def test_the_order_of_aborts_in_one_step_decides_block_ids(tmp_path: Path) -> None:
    listed, reversed_ = record(tmp_path, ()), record(tmp_path, ("b", "a"))
    assert abort_events(listed) == [0, 1]
    assert abort_events(reversed_) == [1, 0]
    assert blocks_of_c(listed) != blocks_of_c(reversed_)


def test_a_replay_aborts_in_the_recorded_order(tmp_path: Path) -> None:
    path = record(tmp_path, ("b", "a"))
    with open_trace(path) as trace:
        assert workload_from_trace(trace).abort_order == ("b", "a")
    replay = replay_exact(path)
    assert replay.divergence is None
    assert replay.num_compared_steps == replay.num_recorded_steps
