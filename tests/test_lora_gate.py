"""The LoRA admission gate (`max_loras`) and the adapter in the block hash, as vLLM decides them.

vLLM 0.33.0 counts the adapters of every running request before its waiting pass;
0.32 counts only those of the running requests scheduled this step. A waiting
request of one adapter too many is skipped and put back at the head in order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TESTS, read_jsonl
from oracle_compare import first_difference, run_lines
from stepscope.engine.block_hash import make_block_hasher
from stepscope.engine.lora import LoRARequest
from stepscope.engine.request import Request
from stepscope.engine.sampling_params import SamplingParams
from stepscope.tui.trace_source import TraceSource
from stepscope.tui.widgets.step_detail import summary_text
from traces import record

import stepscope

LORA_CASES = TESTS / "conformance_lora"
"""LoRA workloads with real vLLM's lines under each version (`<stem>.<version>.expected.jsonl`)."""
VERSION_CASE = LORA_CASES / "async_gate_unscheduled_running.json"
"""The case whose lines differ between the versions: only 0.33 counts an unscheduled request."""


def _request(request_id: str, lora_id: int | None) -> Request:
    return Request(
        request_id,
        list(range(10, 19)),
        SamplingParams(max_tokens=1),
        arrival_time=0.0,
        block_hasher=make_block_hasher(4),
        lora_request=None if lora_id is None else LoRARequest.for_adapter(lora_id),
    )


def test_the_adapter_is_part_of_every_block_hash() -> None:
    """The same prompt under another adapter, or none, shares no block; under the same, all."""
    base, first, again, other = (
        _request("base", None),
        _request("a", 1),
        _request("b", 1),
        _request("c", 2),
    )
    assert len(first.block_hashes) == 2
    assert first.block_hashes == again.block_hashes
    for request in (base, other):
        assert not set(request.block_hashes) & set(first.block_hashes)


@pytest.mark.parametrize("case", sorted(LORA_CASES.glob("*.json")), ids=lambda p: p.stem)
@pytest.mark.parametrize("version", ["0.33.0", "0.32.0"])
def test_each_version_gates_as_it_does(case: Path, version: str, tmp_path: Path) -> None:
    """Real vLLM's lines under both versions' rules."""
    raw = json.loads(case.read_text())
    raw["config"]["vllm_version"] = version
    path = tmp_path / case.name
    path.write_text(json.dumps(raw))
    expected = read_jsonl(case.with_name(f"{case.stem}.{version}.expected.jsonl"))
    assert first_difference(run_lines(path), expected) is None


def test_the_version_case_tells_the_rules_apart() -> None:
    """The versions' admissions differ on this case, so it tests which rule is used."""
    by_version = [
        [
            line.get("new_req_ids")
            for line in read_jsonl(
                VERSION_CASE.with_name(f"{VERSION_CASE.stem}.{v}.expected.jsonl")
            )
        ]
        for v in ("0.33.0", "0.32.0")
    ]
    assert by_version[0] != by_version[1]


def test_a_gated_request_is_a_skip_event_and_waits_at_the_gate(tmp_path: Path) -> None:
    """Scenario 66 (max_loras 1): B, of adapter 2, is skipped while adapter 1 runs."""
    trace = record(LORA_CASES / "gate_max1.json", tmp_path / "t.duckdb").path
    with stepscope.open(trace) as opened:
        skips = opened.sql(
            "SELECT step, request_id, detail FROM events WHERE kind = 'skip' ORDER BY step"
        ).fetchall()
        waiting = opened.sql(
            "SELECT step, reason, detail FROM why_waiting WHERE request_id = 'B' ORDER BY step"
        ).fetchall()
        ((admitted,),) = opened.sql(
            "SELECT step FROM events WHERE kind = 'admit' AND request_id = 'B'"
        ).fetchall()
    assert skips and {(r, d) for _, r, d in skips} == {("B", "max_loras")}
    assert [step for step, _, _ in skips] == list(range(admitted))
    assert [(s, reason) for s, reason, _ in waiting] == [(s, "lora_gate") for s in range(admitted)]
    assert waiting[0][2] == "max_loras 1 reached by running adapters; lora2 is not among them"


def test_the_step_detail_names_the_request_the_gate_held_back(tmp_path: Path) -> None:
    trace = record(LORA_CASES / "gate_max1.json", tmp_path / "t.duckdb").path
    source = TraceSource(trace)
    summary = summary_text(source.step_detail(0), (), "").plain
    assert "\nskipped: B (max_loras gate)" in summary
    assert "skipped" not in summary_text(source.step_detail(5), (), "").plain
