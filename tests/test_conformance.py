"""Every conformance case: the engine makes real vLLM's decisions, field by field.

The suites are vLLM 0.33.0's; `conformance_v032/` holds vLLM 0.32.0's where the two
versions differ (its workloads name `vllm_version`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED_CONFORMANCE, TESTS, read_jsonl
from oracle_compare import first_difference, run_lines


def _cases() -> list[pytest.param]:
    cases = []
    for folder, label in (
        (TESTS / "conformance", "suite"),
        (TESTS / "conformance_extra", "extra"),
        (TESTS / "conformance_v032", "v032"),
        (SHARED_CONFORMANCE, "shared"),
    ):
        for workload in sorted(folder.glob("*.json")):
            expected = workload.with_name(workload.stem + ".expected.jsonl")
            if expected.exists() and not (label == "shared" and _in_suite(workload, expected)):
                cases.append(pytest.param(workload, expected, id=f"{label}/{workload.stem}"))
    return cases


def _in_suite(workload: Path, expected: Path) -> bool:
    """Whether a shared case is byte for byte one of `tests/conformance`, so runs there already.

    The shared folder is where new cases from vLLM arrive first; only those run from it.
    """
    copies = (TESTS / "conformance" / workload.name, TESTS / "conformance" / expected.name)
    return all(
        copy.exists() and copy.read_bytes() == original.read_bytes()
        for copy, original in zip(copies, (workload, expected), strict=True)
    )


CASES = _cases()


def test_the_suite_is_present() -> None:
    assert sum(1 for case in CASES if case.id.startswith("suite/")) >= 40
    assert sum(1 for case in CASES if case.id.startswith("v032/")) >= 6


@pytest.mark.parametrize(("workload", "expected"), CASES)
def test_matches_vllm(workload: Path, expected: Path) -> None:
    difference = first_difference(run_lines(workload), read_jsonl(expected))
    assert difference is None, f"{workload.name}: {difference}"
