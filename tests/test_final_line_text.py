"""`run --jsonl` writes the final line a request at a time, the same text `json.dumps` gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TESTS
from stepscope.engine import EngineLoop, TapeModelRunner, load_workload
from stepscope.engine.oracle_lines import final_line, final_line_text, step_lines

CASES = sorted(
    path
    for folder in (
        "conformance",
        "conformance_extra",
        "conformance_async",
        "conformance_spec",
        "conformance_lora",
    )
    for path in (TESTS / folder).glob("*.json")
)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_the_final_line_in_pieces_is_json_dumps_of_it(case: Path) -> None:
    workload = load_workload(case)
    loop = EngineLoop(workload, TapeModelRunner.for_workload(workload), keep_output_tokens=True)
    for _ in step_lines(loop):
        pass
    pieces = list(final_line_text(loop))
    assert "".join(pieces) == json.dumps(final_line(loop))
    assert len(pieces) == len(workload.requests) + 2  # a piece a request, between head and tail
