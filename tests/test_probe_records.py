"""What the scheduler hands a probe: the records the recorder numbers its rows by."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO
from stepscope.engine import EngineLoop, TapeModelRunner, load_workload
from stepscope.engine.probe import (
    AdmissionCall,
    Preemption,
    RefusedRunningCall,
    WaitingSkip,
    WaitingSkipReason,
)
from stepscope.engine.request import RunningGrant
from stepscope.replay.exact import DecisionTap
from stepscope.replay.report import describe_decision

CASES = [
    REPO / "tests" / "conformance" / f"{name}.json"
    for name in ("05_s05_multi_victims_resumed", "07_s07_priority_victim_refund")
]
RECORDS = (RunningGrant, RefusedRunningCall, AdmissionCall, Preemption, WaitingSkip)


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


def test_a_grant_reads_as_granted() -> None:
    assert describe_decision(RunningGrant("r7")) == "r7: running, granted"


def test_a_waiting_skip_reads_with_its_reason() -> None:
    """A divergent step whose decisions held a skip (a grammar still compiling) was an
    AssertionError in the report."""
    skip = WaitingSkip("g1", WaitingSkipReason.GRAMMAR_NOT_READY)
    assert describe_decision(skip) == "g1: waiting, skipped (grammar_not_ready)"
