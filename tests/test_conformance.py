"""Every conformance case: the engine makes real vLLM 0.33.0's decisions, field by field."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED_CONFORMANCE, TESTS, read_jsonl
from decisions import first_difference, run_lines


def _cases() -> list[pytest.param]:
    cases = []
    for folder, label in (
        (TESTS / "conformance", "suite"),
        (TESTS / "conformance_extra", "extra"),
        (SHARED_CONFORMANCE, "shared"),
    ):
        for workload in sorted(folder.glob("*.json")):
            expected = workload.with_name(workload.stem + ".expected.jsonl")
            if expected.exists():
                cases.append(pytest.param(workload, expected, id=f"{label}/{workload.stem}"))
    return cases


CASES = _cases()


def test_the_suite_is_present() -> None:
    assert sum(1 for case in CASES if case.id.startswith("suite/")) >= 40


@pytest.mark.parametrize(("workload", "expected"), CASES)
def test_matches_vllm(workload: Path, expected: Path) -> None:
    difference = first_difference(run_lines(workload), read_jsonl(expected))
    assert difference is None, f"{workload.name}: {difference}"
