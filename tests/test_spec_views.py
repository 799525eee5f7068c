"""The speculative-decoding views on recorded spec scenarios, against the oracle's own lines.

Expected numbers are computed here from each case's expected lines (real vLLM 0.33.0):
`scheduled_spec_decode_tokens` of a step, and the `num_accepted_tokens` its update
reported, counted as vLLM's `SpecDecodingStats.observe_draft` counts them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS, read_jsonl
from traces import record

import stepscope

CASES = sorted((TESTS / "conformance_spec").glob("*.json"))

Verified = dict[tuple[int, str], tuple[list[int], int]]
"""(schedule step, request) -> (the drafts scheduled, how many the update accepted)."""


def _verified(case: Path) -> Verified:
    lines = [
        line
        for line in read_jsonl(case.with_name(case.stem + ".expected.jsonl"))
        if "step" in line and not line.get("idle")
    ]
    scheduled = {line["step"]: line.get("scheduled_spec_decode_tokens", {}) for line in lines}
    verified: Verified = {}
    for line in lines:
        update_step = line.get("update_step", line["step"]) if "scheduled" in line else line["step"]
        for request_id, num_accepted in (line.get("num_accepted_tokens") or {}).items():
            drafts = (scheduled.get(update_step) or {}).get(request_id, [])
            if drafts:
                verified[update_step, request_id] = (drafts, num_accepted)
    return verified


def _expected_rows(verified: Verified) -> set[tuple[Any, ...]]:
    """(per, step, request, position, drafts, draft tokens, accepted, -1 drafts) per group."""
    totals: dict[tuple[Any, ...], Counter[str]] = {}
    for (step, request_id), (drafts, num_accepted) in verified.items():
        for position, token in enumerate(drafts):
            for key in (
                ("request", None, request_id, None),
                ("step", step, None, None),
                ("position", None, None, position),
            ):
                counts = totals.setdefault(key, Counter())
                counts["tokens"] += 1
                counts["accepted"] += position < num_accepted
                counts["placeholders"] += token == -1
                counts[f"verification {step} {request_id}"] = 1
    return {
        (*key, _num_verifications(c), c["tokens"], c["accepted"], c["placeholders"])
        for key, c in totals.items()
    }


def _num_verifications(counts: Counter[str]) -> int:
    return sum(key.startswith("verification") for key in counts)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("spec_traces")
    return {case.stem: record(case, folder / f"{case.stem}.duckdb").path for case in CASES}


def rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    with stepscope.open(path) as trace:
        return trace.sql(query).fetchall()


@pytest.mark.parametrize("case", CASES, ids=[case.stem for case in CASES])
def test_spec_acceptance_counts_as_vllm_from_the_oracle_lines(
    case: Path, traces: dict[str, Path]
) -> None:
    expected = _expected_rows(_verified(case))
    got = rows(
        traces[case.stem],
        "SELECT per, step, request_id, position, num_drafts, num_draft_tokens, "
        "num_accepted_tokens, num_placeholder_tokens FROM spec_acceptance",
    )
    assert len(got) == len(expected) and set(got) == expected
    for per, _, _, _, _, tokens, accepted, _, rate, _ in rows(
        traces[case.stem], "SELECT * FROM spec_acceptance"
    ):
        assert rate == round(accepted / tokens, 4), per


def test_acceptance_rates_of_a_rollback_case(traces: dict[str, Path]) -> None:
    """54: A's every third draft is wrong; the rates follow from the oracle's counts."""
    verified = _verified(next(c for c in CASES if c.stem.startswith("54")))
    drafts = sum(len(d) for d, _ in verified.values())
    accepted = sum(n for _, n in verified.values())
    (total,) = rows(
        traces["54_spec_mismatch_rollback"],
        "SELECT sum(num_draft_tokens), sum(num_accepted_tokens) FROM spec_acceptance "
        "WHERE per = 'step'",
    )
    assert total == (drafts, accepted) and 0 < accepted < drafts
    by_position = rows(
        traces["54_spec_mismatch_rollback"],
        "SELECT acceptance_rate FROM spec_acceptance WHERE per = 'position' ORDER BY position",
    )
    assert [r for (r,) in by_position] == sorted((r for (r,) in by_position), reverse=True)


@pytest.mark.parametrize("case", CASES, ids=[case.stem for case in CASES])
def test_budget_split_counts_drafts_apart(case: Path, traces: dict[str, Path]) -> None:
    lines = {
        line["step"]: line
        for line in read_jsonl(case.with_name(case.stem + ".expected.jsonl"))
        if "step" in line and line.get("scheduled", True) and not line.get("idle")
    }
    got = rows(
        traces[case.stem],
        "SELECT step, num_scheduled_tokens, decode_tokens + prefill_tokens + recompute_tokens, "
        "draft_tokens FROM budget_spent",
    )
    assert got, case.stem
    for step, num_scheduled, non_draft, draft_tokens in got:
        line = lines[step]
        expected_drafts = sum(len(d) for d in line["scheduled_spec_decode_tokens"].values())
        assert draft_tokens == expected_drafts, f"step {step}"
        assert num_scheduled == line["total_num_scheduled_tokens"] == non_draft + draft_tokens


def test_draft_model_slots_fill_the_input_budget(traces: dict[str, Path]) -> None:
    """58: draft_model takes one input slot per scheduled request beyond its tokens."""
    got = rows(
        traces["58_spec_draft_slots_input_budget"],
        "SELECT b.num_scheduled_tokens, b.draft_slots, b.input_budget, s.num_scheduled_reqs, "
        "s.draft_slots, s.num_draft_tokens, b.draft_tokens "
        "FROM budget_spent b JOIN steps s USING (step)",
    )
    assert any(tokens + slots == budget for tokens, slots, budget, *_ in got)
    for tokens, slots, budget, num_reqs, step_slots, step_drafts, drafts in got:
        assert slots == step_slots == num_reqs and tokens + slots <= budget
        assert step_drafts == drafts
