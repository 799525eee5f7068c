"""Structured-output waits: a request is skipped until its grammar has compiled, as in vLLM.

A request with `grammar_ready_step` arrives in WAITING_FOR_STRUCTURED_OUTPUT_GRAMMAR;
each waiting pass that reaches it before that step passes it over (put back at the
head, in order) and the first one after promotes it to WAITING. The oracle does not
script grammars, so the workloads here are recorded through vLLM's own scheduler
(0.33.0 and 0.32.0, with a grammar set at that step) and the engine, and every
recorded table must agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS
from oracle_compare import run_lines
from stepscope.engine import load_workload
from stepscope.replay.exact import replay_exact
from test_vllm_recorder import VERSIONS, Recorded, _assert_same_as_engine, _copy
from traces import record

import stepscope

WORKLOADS = sorted((TESTS / "grammar_workloads").glob("*.json"))
MODES = {"sync": {}, "async": {"async_scheduling": True}}
"""Async too: vLLM defers sampling a batch whose structured-output request still has output
in flight (`pending_structured_output_tokens`) until the previous batch's update, which is
the order the batch queue of two runs them in anyway."""


def _workload(prefix: str) -> Path:
    (path,) = (p for p in WORKLOADS if p.name.startswith(prefix))
    return path


def _rows(trace: Path, query: str) -> list[tuple[Any, ...]]:
    with stepscope.open(trace) as opened:
        return opened.sql(query).fetchall()


def test_a_request_is_skipped_until_its_grammar_is_ready(tmp_path: Path) -> None:
    """B's grammar compiles until step 3: C, behind it, is admitted first; B then as new."""
    trace = record(_workload("01"), tmp_path / "t.duckdb").path
    events = _rows(
        trace,
        "SELECT step, kind, detail FROM events WHERE request_id = 'B' ORDER BY step, seq",
    )
    assert events == [
        (0, "arrive", None),
        (0, "skip", "grammar_not_ready"),
        (1, "skip", "grammar_not_ready"),
        (2, "skip", "grammar_not_ready"),
        (3, "admit", None),
        *[e for e in events if e[0] > 3],
    ]
    admitted = _rows(trace, "SELECT step FROM events WHERE request_id = 'C' AND kind = 'admit'")
    assert admitted == [(1,)]
    waiting = _rows(
        trace, "SELECT step, reason, detail FROM why_waiting WHERE request_id = 'B' ORDER BY step"
    )
    detail = "grammar still compiling (ready at step 3)"
    assert waiting == [(step, "grammar_wait", detail) for step in range(3)]


def test_skipped_requests_go_back_to_the_head_in_order() -> None:
    """G and X are skipped step after step and keep their order; C, preempted, goes before."""
    lines = run_lines(_workload("05"))
    assert [line["waiting"] for line in lines[1:4]] == [["G", "X"]] * 3
    assert lines[5]["preempted_req_ids"] == ["C"]
    assert lines[5]["waiting"] == ["C", "G"]
    assert (lines[8]["resumed_req_ids"], lines[8]["new_req_ids"]) == (["C"], ["G"])


def test_the_pass_stops_at_the_seq_limit_before_it_looks_at_the_grammar(tmp_path: Path) -> None:
    """max_num_seqs 2: G is never reached while two run, so it is never skipped."""
    trace = record(_workload("04"), tmp_path / "t.duckdb").path
    assert _rows(trace, "SELECT count(*) FROM events WHERE kind = 'skip'") == [(0,)]
    reasons = {r for (r,) in _rows(trace, "SELECT reason FROM why_waiting WHERE request_id = 'G'")}
    assert "max_num_seqs" in reasons


def test_priority_keeps_a_waiting_grammar_at_the_top(tmp_path: Path) -> None:
    """H (priority 0) waits for its grammar; L (2) is admitted past it; H goes first when ready."""
    trace = record(_workload("02"), tmp_path / "t.duckdb").path
    admitted = dict(_rows(trace, "SELECT request_id, step FROM events WHERE kind = 'admit'"))
    assert admitted["L"] < 4 <= admitted["H"]
    skipped = _rows(trace, "SELECT DISTINCT request_id FROM events WHERE kind = 'skip'")
    assert ("H",) in skipped


@pytest.mark.parametrize("workload", WORKLOADS, ids=lambda p: p.stem)
def test_a_trace_with_grammar_waits_replays_exactly(workload: Path, tmp_path: Path) -> None:
    """The trace keeps each request's grammar step, so a replay waits as the run did."""
    trace = record(workload, tmp_path / "t.duckdb").path
    assert replay_exact(trace).divergence is None


def test_a_grammar_key_loads_with_the_request() -> None:
    workload = load_workload(_workload("01"))
    ready = {spec.request_id: spec.grammar_ready_step for spec in workload.requests}
    assert ready == {"A": None, "B": 3, "C": None, "D": 2}


@pytest.fixture(scope="module", params=list(VERSIONS))
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Each vLLM version records every grammar workload, synchronous and async, in one call."""
    vllm = request.getfixturevalue(VERSIONS[request.param])
    out = tmp_path_factory.mktemp(f"grammar-{request.param}")
    folder = out / "workloads"
    folder.mkdir()
    workloads = {
        mode: [_copy(mode, path, knobs, folder, request.param) for path in WORKLOADS]
        for mode, knobs in MODES.items()
    }
    vllm.record(out, [path for paths in workloads.values() for path in paths], {})
    return Recorded(vllm, request.param, out, workloads)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_grammar_waits_record_as_vllm_decides_them(
    recorded: Recorded, tmp_path: Path, mode: str
) -> None:
    """vLLM's scheduler with grammars set at the scripted steps decides as the engine does."""
    _assert_same_as_engine(recorded, recorded.workloads[mode], tmp_path)
