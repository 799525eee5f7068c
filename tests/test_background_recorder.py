"""Rows built on a background thread are the rows the recorder builds inline.

A live vLLM engine hands its records to `BackgroundRecorder`; stepscope's own
engine drives it here the same way, so the two traces can be compared table by table.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import REPO
from stepscope.engine import EngineLoop, TapeModelRunner, Workload, load_workload
from stepscope.schema import open_trace
from stepscope.tracer.background import BackgroundRecorder
from stepscope.tracer.record_workload import record_workload, trace_meta
from stepscope.tracer.recorder import TraceRecorder
from vllm_env import table_differences

CASES = sorted((REPO / "tests" / "conformance").glob("*.json"))


def tapes(workload: Workload) -> TapeModelRunner:
    return TapeModelRunner({spec.request_id: spec.output_token_ids for spec in workload.requests})


def record_in_background(workload: Workload, path: Path) -> BackgroundRecorder:
    recorder = BackgroundRecorder(TraceRecorder(path, workload, trace_meta(workload)))
    loop = EngineLoop(workload, tapes(workload), probe=recorder)
    for record in loop.run():
        recorder.record_step(record, loop.core.scheduler)
    return recorder


@pytest.mark.parametrize("case", [CASES[2], CASES[15], CASES[29]], ids=lambda p: p.stem)
def test_background_rows_equal_inline_rows(tmp_path: Path, case: Path) -> None:
    workload = load_workload(case)
    inline, background = tmp_path / "inline.duckdb", tmp_path / "background.duckdb"
    record_workload(workload, tapes(workload), inline)
    record_in_background(workload, background).close(complete=True)
    assert table_differences(inline, background) == []
    with open_trace(background) as trace:
        assert trace.meta["complete"] == "true"


def test_a_builder_failure_reaches_the_engine_thread_once(tmp_path: Path) -> None:
    workload = load_workload(CASES[0])
    path = tmp_path / "t.duckdb"
    recorder = BackgroundRecorder(TraceRecorder(path, workload, trace_meta(workload)))

    def fail(spec: object) -> None:
        raise ValueError("no room for this row")

    recorder.recorder.register_request = fail  # type: ignore[method-assign]
    spec = workload.requests[0]
    recorder.register_request(spec)  # fails on the builder thread
    with pytest.raises(ValueError, match="no room"):  # ... and on a later call here
        for _ in range(500):
            recorder.register_request(spec)
            time.sleep(0.01)
    recorder.register_request(spec)  # reported once; later calls go on
    recorder.close(complete=True)  # closing never raises for the builder
    with open_trace(path) as trace:
        assert trace.meta["complete"] == "false"
