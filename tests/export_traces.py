"""Traces for the export tests: preemptions of every kind, an abort, idle steps, no timings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
from conftest import REPO
from stepscope.engine.workload import parse_workload
from traces import case, record

STORM = REPO / "examples" / "preemption_storm" / "workload.json"
CASES = {
    "storm": STORM,
    "refund": case("07"),
    "self_preempt_abort": case("22"),
}
"""Whole batches preempted; a refunded priority victim; self-preemption and an abort."""


def idle_steps_workload() -> str:
    """Two requests arriving eight steps apart: the engine idles between them."""
    requests = [
        {
            "id": name,
            "arrival_step": arrival,
            "prompt_token_ids": list(range(10, 18)),
            "output_token_ids": [5, 6, 7],
            "max_tokens": 3,
        }
        for name, arrival in (("early", 0), ("late", 8))
    ]
    config = {"block_size": 4, "num_blocks": 16, "max_num_batched_tokens": 64, "max_num_seqs": 4}
    return json.dumps({"config": config, "requests": requests, "max_steps": 20})


def record_traces(folder: Path) -> dict[str, Path]:
    """Record each case into `folder`, plus the idle one and a copy without timings."""
    traces = {}
    for name, workload in CASES.items():
        traces[name] = folder / f"{name}.duckdb"
        record(workload, traces[name])
    traces["idle"] = folder / "idle.duckdb"
    record(parse_workload(idle_steps_workload(), source="idle"), traces["idle"])
    traces["untimed"] = without_timings(traces["storm"], folder / "untimed.duckdb")
    return traces


def without_timings(trace: Path, copy: Path) -> Path:
    """A copy of the trace as a recorder without step timings writes it."""
    shutil.copy(trace, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute(
            "UPDATE _steps SET schedule_ns = NULL, model_ns = NULL, update_ns = NULL, "
            "ended_at_ns = NULL"
        )
    return copy
