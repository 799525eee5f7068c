"""Async scheduling: stepscope's engine against vLLM 0.33.0's AsyncScheduler, step by step.

The expected files were recorded from real vLLM (see conformance_async/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TESTS, read_jsonl
from traces import record, step_summaries

CASES = sorted((TESTS / "conformance_async").glob("*.json"))


@pytest.mark.parametrize("case", CASES, ids=[case.stem for case in CASES])
def test_engine_decides_as_vllm_async_scheduler(case: Path, tmp_path: Path) -> None:
    trace = record(case, tmp_path / "trace.duckdb").path
    expected = read_jsonl(case.with_name(case.stem + ".expected.jsonl"))
    for got, want in zip(step_summaries(trace), expected, strict=True):
        assert got == want, f"step {want['step']}"
