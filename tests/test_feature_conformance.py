"""The optional-feature scenarios from real vLLM 0.33.0: the engine decides the same, line by line.

`../shared/conformance-features/` holds them (async scheduling, speculative decoding,
LoRA; format in `../shared/oracle/README.md`, "Optional features").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SHARED_CONFORMANCE, read_jsonl
from oracle_compare import first_difference, run_lines

SHARED_FEATURES = SHARED_CONFORMANCE.parent / "conformance-features"


def _cases() -> list[pytest.param]:
    cases = []
    for workload in sorted(SHARED_FEATURES.glob("*.json")):
        expected = workload.with_name(workload.stem + ".expected.jsonl")
        cases.append(pytest.param(workload, expected, id=workload.stem))
    return cases


CASES = _cases()


@pytest.mark.skipif(not SHARED_FEATURES.is_dir(), reason="no ../shared/conformance-features")
def test_the_feature_suite_is_present() -> None:
    assert len(CASES) >= 30
    assert sum(1 for case in CASES if "_async_" in str(case.id)) >= 12


@pytest.mark.parametrize(("workload", "expected"), CASES)
def test_matches_vllm_with_features(workload: Path, expected: Path) -> None:
    difference = first_difference(run_lines(workload), read_jsonl(expected))
    assert difference is None, f"{workload.name}: {difference}"


@pytest.mark.skipif(not SHARED_FEATURES.is_dir(), reason="no ../shared/conformance-features")
def test_async_jsonl_steps_are_the_oracle_lines_byte_for_byte() -> None:
    """`run --jsonl` writes the async lines in the oracle's key order (drain and idle steps)."""
    case = SHARED_FEATURES / "51_async_idle_and_drain.json"
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "run", str(case), "--jsonl"],
        capture_output=True,
        text=True,
        check=True,
    )
    expected = case.with_name(case.stem + ".expected.jsonl").read_text()
    assert result.stdout.splitlines()[:-1] == expected.splitlines()[:-1]
