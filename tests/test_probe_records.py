"""What the scheduler hands a probe: the records the recorder numbers its rows by."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import REPO, TESTS
from rich.console import Console
from stepscope.engine import EngineLoop, TapeModelRunner, load_workload
from stepscope.engine.probe import (
    AdmissionCall,
    Decision,
    Preemption,
    RefusedRunningCall,
    ScheduleEnd,
    ScheduleStart,
    WaitingSkip,
)
from stepscope.engine.request import RunningGrant
from stepscope.replay.exact import replay_exact
from stepscope.replay.report import exact_to_json, print_exact
from traces import record as record_trace

CASES = [
    REPO / "tests" / "conformance" / f"{name}.json"
    for name in ("05_s05_multi_victims_resumed", "07_s07_priority_victim_refund")
]
RECORDS = (RunningGrant, RefusedRunningCall, AdmissionCall, Preemption, WaitingSkip)


class DecisionTap:
    """A probe that keeps the scheduler's decisions of the current step only."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []

    def on_schedule_start(self, record: ScheduleStart) -> None:
        self.decisions = []

    def on_schedule_end(self, record: ScheduleEnd) -> None:
        pass


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_running_grants_are_the_output_running_rows(case: Path) -> None:
    """Grants not undone by a preemption are the output's running rows, in order."""
    workload = load_workload(case)
    probe = DecisionTap()
    tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
    loop = EngineLoop(workload, TapeModelRunner(tapes), probe=probe)
    num_preempted_steps = 0
    for record in loop.run():
        if record.engine_step is None:
            continue
        assert all(type(d) in RECORDS for d in probe.decisions), probe.decisions
        preempted = {d.request_id for d in probe.decisions if type(d) is Preemption}
        num_preempted_steps += bool(preempted)
        grants = [d.request_id for d in probe.decisions if type(d) is RunningGrant]
        cached = record.engine_step.scheduler_output.scheduled_cached_reqs
        running_rows = [r for r in cached.req_ids if r not in cached.resumed_req_ids]
        assert [r for r in grants if r not in preempted] == running_rows
    assert num_preempted_steps > 0


def test_a_divergent_step_with_a_waiting_skip_is_reported(tmp_path: Path) -> None:
    """A divergent step whose decisions held a skip (a grammar still compiling) was an
    AssertionError in the report; both sides now print, allocation calls and all."""
    (workload,) = (TESTS / "grammar_workloads").glob("01*.json")
    trace, changed = tmp_path / "t.duckdb", tmp_path / "changed.duckdb"
    record_trace(workload, trace)
    shutil.copy(trace, changed)
    with duckdb.connect(str(changed)) as connection:
        (skip_step,) = connection.sql(
            "SELECT min(step) FROM _events WHERE kind = 'skip'"
        ).fetchall()[0]
        connection.execute(
            "UPDATE _steps SET num_free_blocks_after_schedule = 0 WHERE step = ?", [skip_step]
        )
    result = replay_exact(changed)
    assert result.divergence is not None
    assert (result.divergence.step, result.divergence.fields) == (skip_step, ("num_free_blocks",))
    out = io.StringIO()
    print_exact(Console(file=out, width=200), result)
    assert f"diverged at step {skip_step}" in out.getvalue()
    assert "admission" in out.getvalue()
    document = json.loads(json.dumps(exact_to_json(result)))
    assert document["divergence"]["recorded"]["num_free_blocks"] == 0
    assert document["divergence"]["replayed"]["num_free_blocks"] > 0
