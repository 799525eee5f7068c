"""Speculative decoding: stepscope's engine against vLLM 0.33.0's scheduler, and its trace rows.

The cases are the oracle's (conformance_spec/README.md): 53–63 synchronous, compared
line for line; 64–65 async, compared on every schedule, every verification and the
state after each `step_with_batch_queue` call. The trace's `_spec_decode` rows must
say what the oracle's lines say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS, read_jsonl
from oracle_compare import first_difference, run_lines
from stepscope.engine import TapeModelRunner, load_workload
from stepscope.engine.arrivals import WorkloadArrivals
from stepscope.engine.core import make_engine_core
from stepscope.engine.scheduler import Scheduler
from stepscope.engine.tape_runner import PAD_TOKEN_ID
from stepscope.engine.workload import parse_workload
from stepscope.replay.exact import replay_exact
from stepscope.replay.inputs import recorded_outputs
from stepscope.schema import open_trace
from stepscope.tracer.redact import Redactor
from traces import record

CASES = sorted((TESTS / "conformance_spec").glob("*.json"))
SYNC = [case for case in CASES if "async" not in case.stem]
ASYNC = [case for case in CASES if "async" in case.stem]


def _expected(case: Path) -> list[dict[str, Any]]:
    return read_jsonl(case.with_name(case.stem + ".expected.jsonl"))


@pytest.mark.parametrize("case", SYNC, ids=[case.stem for case in SYNC])
def test_sync_cases_match_the_oracle_line_for_line(case: Path) -> None:
    difference = first_difference(run_lines(case), _expected(case))
    assert difference is None, difference


_STATE = ("running", "waiting", "num_computed_tokens", "num_output_placeholders")


def _state(scheduler: Scheduler) -> dict[str, Any]:
    return {
        "running": [r.request_id for r in scheduler.running],
        "waiting": [r.request_id for r in scheduler.waiting],
        "num_computed_tokens": {i: r.num_computed_tokens for i, r in scheduler.requests.items()},
        "num_output_placeholders": {
            i: r.num_output_placeholders for i, r in scheduler.requests.items()
        },
        "num_free_blocks_after_update": scheduler.get_num_free_blocks(),
    }


@pytest.mark.parametrize("case", ASYNC, ids=[case.stem for case in ASYNC])
def test_async_state_after_each_batch_queue_step_is_the_oracles(case: Path) -> None:
    workload = load_workload(case)
    core = make_engine_core(workload.config, TapeModelRunner.for_workload(workload))
    arrivals = WorkloadArrivals(workload)
    for line in _expected(case)[:-1]:
        for spec in arrivals.due(line["step"]):
            core.add_request(core.preprocess_add_request(spec))
        if line.get("idle"):
            continue
        result = core.step_with_batch_queue()
        assert (result.scheduled is not None) == line["scheduled"], f"step {line['step']}"
        want = {key: line[key] for key in (*_STATE, "num_free_blocks_after_update")}
        assert _state(core.scheduler) == want, f"step {line['step']}"


def _no_rows() -> dict[str, Any]:
    keys = ("scheduled_spec_decode_tokens", "num_accepted_tokens", "num_rejected_tokens")
    return {key: {} for key in (*keys, "sampled", "draft_token_ids")}


def _spec_rows(trace_path: Path) -> dict[int, dict[str, Any]]:
    """The trace's per-step spec facts, keyed as the oracle's line fields."""
    steps: dict[int, dict[str, Any]] = {}
    with open_trace(trace_path) as trace:
        rows = trace.sql(
            "SELECT step, request_id, scheduled_draft_token_ids, num_accepted, "
            "sampled_token_ids, proposed_draft_token_ids FROM _spec_decode "
            "JOIN requests USING (request_index) ORDER BY step, request_index"
        ).fetchall()
    for step, request_id, scheduled, accepted, sampled, proposed in rows:
        fields = steps.setdefault(step, _no_rows())
        if scheduled:
            fields["scheduled_spec_decode_tokens"][request_id] = scheduled
        if accepted is not None:
            fields["num_accepted_tokens"][request_id] = accepted
            fields["num_rejected_tokens"][request_id] = len(scheduled) - accepted
        if sampled is not None:
            fields["sampled"][request_id] = sampled
        if proposed is not None:
            fields["draft_token_ids"][request_id] = proposed
    return steps


@pytest.mark.parametrize("case", CASES, ids=[case.stem for case in CASES])
def test_spec_decode_rows_say_what_the_oracle_lines_say(case: Path, tmp_path: Path) -> None:
    """A late output of a request that already finished appends nothing (NULL), while the
    oracle's line still shows what the model sampled for it."""
    rows = _spec_rows(record(case, tmp_path / "t.duckdb").path)
    finished: set[str] = set()
    for line in _expected(case)[:-1]:
        if line.get("idle"):
            continue
        is_async = "scheduled" in line
        if not is_async or line["scheduled"]:
            scheduled = rows.get(line["step"], _no_rows())["scheduled_spec_decode_tokens"]
            assert scheduled == line["scheduled_spec_decode_tokens"], f"step {line['step']}"
        update_step = line["update_step"] if is_async else line["step"]
        if update_step is None:
            continue
        update = rows.get(update_step, _no_rows())
        for key in ("num_accepted_tokens", "num_rejected_tokens"):
            assert update[key] == line[key], f"step {line['step']}: {key}"
        appended = {i: t for i, t in line["sampled"].items() if i not in finished}
        assert update["sampled"] == appended, f"step {line['step']}"
        if not is_async:
            assert update["draft_token_ids"] == line["draft_token_ids"], f"step {line['step']}"
        finished.update(line["finished_this_step"])


def test_redaction_keeps_padding_and_equal_tokens_equal(tmp_path: Path) -> None:
    (case,) = [case for case in CASES if case.stem.startswith("63_")]
    plain = _spec_rows(record(case, tmp_path / "plain.duckdb").path)
    redacted = _spec_rows(record(case, tmp_path / "r.duckdb", redactor=Redactor(b"k")).path)
    assert plain.keys() == redacted.keys()
    pads = [
        tokens
        for step in redacted.values()
        for tokens in step["scheduled_spec_decode_tokens"].values()
        if -1 in tokens
    ]
    assert pads and all(set(tokens) == {-1} for tokens in pads)
    assert plain != redacted


@pytest.mark.parametrize("case", CASES, ids=[case.stem for case in CASES])
def test_a_spec_trace_replays_exactly(case: Path, tmp_path: Path) -> None:
    """The tape a replay plays holds every token a step appended (accepted drafts too)."""
    trace = record(case, tmp_path / "t.duckdb").path
    assert replay_exact(trace).divergence is None


STOP_AMONG_ASYNC_DRAFTS = {
    "description": "async EAGLE k=3: A's EOS is its second of four tokens sampled at step 1,"
    " and step 2, scheduled before that output stopped A, samples for it again",
    "config": {
        "block_size": 4,
        "num_blocks": 20,
        "max_num_batched_tokens": 32,
        "max_num_seqs": 4,
        "max_model_len": 64,
        "num_speculative_tokens": 3,
        "speculative_method": "eagle",
        "async_scheduling": True,
    },
    "requests": [
        {
            "id": "A",
            "arrival_step": 0,
            "prompt_token_ids": [163, 779, 999, 439],
            "output_token_ids": [11, 12, 2, 14, 3, 15, 16, 17],
            "max_tokens": 8,
            "eos_token_id": 2,
        },
        {
            "id": "B",
            "arrival_step": 0,
            "prompt_token_ids": [176, 317, 491, 112],
            "output_token_ids": [960, 171, 420, 638, 739, 543],
            "max_tokens": 6,
        },
    ],
    "max_steps": 100,
}


def test_tokens_sampled_but_not_appended_keep_their_place_in_the_tape(tmp_path: Path) -> None:
    """A stop among the accepted drafts appends fewer tokens than the model sampled, and a
    step run for a request already stopped appends none; the tape counts every sample, so
    the replayed model samples at step 2 what the recorded one did."""
    workload = parse_workload(json.dumps(STOP_AMONG_ASYNC_DRAFTS), source="stop-async")
    trace = record(workload, tmp_path / "t.duckdb").path
    rows = _sql(
        trace,
        "SELECT d.step, s.sampled_token_id, d.num_accepted, d.sampled_token_ids "
        "FROM _spec_decode d JOIN _scheduled s USING (step, request_index) "
        "JOIN _requests r USING (request_index) WHERE r.request_id = 'A' ORDER BY d.step",
    )
    assert rows == [(0, 11, None, [11]), (1, 12, 3, [12, 2]), (2, 15, 3, None)]
    pad = PAD_TOKEN_ID
    with open_trace(trace) as opened:
        assert recorded_outputs(opened)["A"] == (11, 12, 2, pad, pad, 15, pad, pad, pad)
    assert replay_exact(trace).divergence is None


def _sql(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with open_trace(path) as opened:
        return opened.sql(sql).fetchall()


def test_every_allocation_of_a_draft_model_run_asks_for_k_lookahead_slots(
    tmp_path: Path,
) -> None:
    (case,) = [case for case in CASES if case.stem.startswith("58_")]
    with open_trace(record(case, tmp_path / "t.duckdb").path) as trace:
        lookahead = trace.sql("SELECT DISTINCT num_lookahead_tokens FROM allocations").fetchall()
    assert lookahead == [(2,)]
