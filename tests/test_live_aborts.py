"""Aborts a live engine learns only when they land: the trace's request rows still say them.

A live vLLM engine registers each request as it arrives, before anyone knows it will
be aborted; replay reads a request's abort from its `_requests` row. The recorder is
fed here as a live engine feeds it (requests registered without their aborts), by
stepscope's own engine loop running the workload that does abort them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
import pytest
from conftest import TESTS
from stepscope.engine import EngineLoop, TapeModelRunner, Workload, parse_workload
from stepscope.replay.exact import replay_exact
from stepscope.tracer.record_workload import record_workload, trace_meta
from stepscope.tracer.recorder import TraceRecorder

WORKLOAD = TESTS / "conformance_async" / "04_async_aborts_before_update.json"


def tapes(workload: Workload) -> TapeModelRunner:
    return TapeModelRunner({spec.request_id: spec.output_token_ids for spec in workload.requests})


def record_live(workload: Workload, path: Path, flush_every_steps: int) -> None:
    """Record as a live engine does: requests registered at arrival, aborts as they land."""
    unknown = tuple(
        dataclasses.replace(spec, abort_step=None, abort_before_update=False)
        for spec in workload.requests
    )
    recorder = TraceRecorder(
        path,
        Workload(workload.config, ()),
        trace_meta(workload),
        flush_every_steps=flush_every_steps,
    )
    by_id = {spec.request_id: spec for spec in unknown}
    loop = EngineLoop(workload, tapes(workload), probe=recorder)
    for record in loop.run():
        for request_id in (*record.arrived, *record.rejected):
            recorder.register_request(by_id[request_id])
        recorder.record_step(record, loop.core.scheduler)
    recorder.close(complete=True)


@pytest.mark.parametrize("async_scheduling", [True, False])
@pytest.mark.parametrize("flush_every_steps", [1, 256])
def test_aborts_learned_late_reach_the_request_rows(
    tmp_path: Path, *, async_scheduling: bool, flush_every_steps: int
) -> None:
    workload = parse_workload(WORKLOAD.read_text(), source=str(WORKLOAD))
    workload = workload.with_config(
        dataclasses.replace(workload.config, async_scheduling=async_scheduling)
    )
    scripted, live = tmp_path / "scripted.duckdb", tmp_path / "live.duckdb"
    record_workload(workload, tapes(workload), scripted)
    record_live(workload, live, flush_every_steps)
    query = (
        "SELECT request_id, abort_step, abort_before_update FROM _requests ORDER BY request_index"
    )
    with duckdb.connect(str(scripted), read_only=True) as a:
        expected = a.sql(query).fetchall()
    with duckdb.connect(str(live), read_only=True) as b:
        assert b.sql(query).fetchall() == expected
    assert sum(step is not None for _, step, _ in expected) == 3
    replay = replay_exact(live)
    assert replay.divergence is None
    assert replay.num_compared_steps == replay.num_recorded_steps
