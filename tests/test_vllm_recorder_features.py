"""vLLM's real scheduler with speculative decoding and LoRA, recorded, against the engine.

The speculative-decoding and LoRA scenarios of `../shared/conformance-features/` (made
by real vLLM 0.33.0) run through vLLM's scheduler with the oracle's scripted drafter
(`scripted_drafts`), recorded by `stepscope.tracer.vllm`. The trace must hold what the
scenario says vLLM did (drafts scheduled, tokens appended, drafts proposed), be
row-for-row what stepscope's engine records for the same workload, and replay exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_CONFORMANCE, read_jsonl
from stepscope.engine import load_workload
from stepscope.replay.diff import Classification, compare_steps
from stepscope.replay.exact import replay_exact
from stepscope.schema import open_trace
from traces import record
from vllm_env import VllmPython, hashing_knobs, table_differences

FEATURES = SHARED_CONFORMANCE.parent / "conformance-features"
SPEC = sorted(FEATURES.glob("*_spec_*.json"))
LORA = sorted(FEATURES.glob("*_lora_*.json"))
SPEC_DECODE_ROWS = """
    SELECT s.step, r.request_id, s.scheduled_draft_token_ids, s.num_accepted,
        s.sampled_token_ids, s.proposed_draft_token_ids
    FROM _spec_decode s JOIN _requests r USING (request_index)
    ORDER BY s.step, r.request_id
"""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not FEATURES.is_dir(), reason=f"no {FEATURES}"),
]


@pytest.fixture(scope="module")
def recorded(vllm: VllmPython, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every scenario here recorded through vLLM 0.33.0's scheduler, in one call."""
    out = tmp_path_factory.mktemp("vllm-features")
    vllm.record(out, SPEC + LORA, {})
    return out


def _spec_rows(trace: Path) -> list[tuple[Any, ...]]:
    with open_trace(trace) as opened:
        return opened.sql(SPEC_DECODE_ROWS).fetchall()


@pytest.mark.parametrize("workload", SPEC + LORA, ids=lambda p: p.stem)
def test_features_record_as_the_engine_does(recorded: Path, tmp_path: Path, workload: Path) -> None:
    vllm_trace = recorded / f"{workload.stem}.duckdb"
    engine_trace = tmp_path / "engine.duckdb"
    engine_workload = load_workload(workload)
    knobs = hashing_knobs(vllm_trace)
    record(engine_workload.with_config(engine_workload.config.with_knobs(knobs)), engine_trace)
    with open_trace(engine_trace) as ours, open_trace(vllm_trace) as theirs:
        steps = compare_steps(ours, theirs)
        assert theirs.meta["outside_subset"] == ""
    assert steps.classification is Classification.IDENTICAL, (
        steps.first_decision_step,
        steps.decision_fields,
    )
    assert table_differences(engine_trace, vllm_trace) == []
    assert _spec_rows(engine_trace) == _spec_rows(vllm_trace)


def _expected_spec(workload: Path) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(step, request, what the scenario says vLLM did) per request a sync step touched."""
    for line in read_jsonl(workload.with_name(workload.stem + ".expected.jsonl"))[:-1]:
        if line.get("idle"):
            continue
        accepted = line.get("num_accepted_tokens", {})
        proposed = line.get("draft_token_ids", {})
        scheduled = line.get("scheduled_spec_decode_tokens", {})
        for request_id in {*scheduled, *proposed}:
            yield (
                line["step"],
                request_id,
                {
                    "scheduled": scheduled.get(request_id, []),
                    "accepted": accepted.get(request_id),
                    "sampled": line["sampled"].get(request_id),
                    "proposed": proposed.get(request_id),
                },
            )


SYNC_SPEC = [p for p in SPEC if not json.loads(p.read_text())["config"].get("async_scheduling")]


@pytest.mark.parametrize("workload", SYNC_SPEC, ids=lambda p: p.stem)
def test_the_trace_holds_the_drafts_vllm_scheduled_accepted_and_proposed(
    recorded: Path, workload: Path
) -> None:
    rows = {
        (step, request_id): {
            "scheduled": list(scheduled),
            "accepted": accepted,
            "sampled": None if sampled is None else list(sampled),
            "proposed": list(proposed) if proposed else None,
        }
        for step, request_id, scheduled, accepted, sampled, proposed in _spec_rows(
            recorded / f"{workload.stem}.duckdb"
        )
    }
    expected = {(step, request_id): fields for step, request_id, fields in _expected_spec(workload)}
    assert expected, "the scenario verifies no drafts"
    for key, fields in expected.items():
        assert rows.get(key) == fields, key


@pytest.mark.parametrize("workload", LORA, ids=lambda p: p.stem)
def test_the_trace_names_each_requests_adapter_and_the_gate(recorded: Path, workload: Path) -> None:
    raw = json.loads(workload.read_text())
    with open_trace(recorded / f"{workload.stem}.duckdb") as trace:
        assert trace.config["max_loras"] == raw["config"]["max_loras"]
        adapters = dict(trace.sql("SELECT request_id, lora_id FROM _requests").fetchall())
    assert adapters == {str(r["id"]): r.get("lora_id") for r in raw["requests"]}


@pytest.mark.parametrize("workload", SPEC + LORA, ids=lambda p: p.stem)
def test_vllm_feature_traces_replay_exactly(recorded: Path, workload: Path) -> None:
    assert replay_exact(recorded / f"{workload.stem}.duckdb").divergence is None


def test_speculative_traces_replay_identically_through_vllm(
    vllm: VllmPython, recorded: Path
) -> None:
    """Async ones too: an async recording holds no proposed drafts, so the replay's worker
    verifies the scheduler's placeholders, accepting as many as the trace says."""
    traces = [str(recorded / f"{workload.stem}.duckdb") for workload in SPEC]
    outcomes = json.loads(vllm.harness("replay", *traces))
    assert outcomes == dict.fromkeys(traces, "identical")
