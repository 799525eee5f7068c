"""The 2026-model scenarios from real vLLM 0.33.0 the engine models: line by line.

`../shared/conformance-next/` holds them (format in `../shared/oracle/README.md`,
"EAGLE / MTP" and "prefill_schedule_interval"); the hybrid KV cache group scenarios
there are not modelled yet and are left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED_CONFORMANCE, read_jsonl
from oracle_compare import first_difference, run_lines

SHARED_NEXT = SHARED_CONFORMANCE.parent / "conformance-next"
MODELLED = ("79_", "81_", "82_", "83_", "84_")
"""EAGLE / MTP drafters (79, 81, 82) and the prefill cadence (83, 84)."""


def _cases() -> list[pytest.param]:
    return [
        pytest.param(
            workload, workload.with_name(workload.stem + ".expected.jsonl"), id=workload.stem
        )
        for workload in sorted(SHARED_NEXT.glob("*.json"))
        if workload.name.startswith(MODELLED)
    ]


CASES = _cases()


@pytest.mark.skipif(not SHARED_NEXT.is_dir(), reason="no ../shared/conformance-next")
def test_the_modelled_scenarios_are_present() -> None:
    assert len(CASES) == len(MODELLED)


@pytest.mark.parametrize(("workload", "expected"), CASES)
def test_matches_vllm_with_2026_features(workload: Path, expected: Path) -> None:
    difference = first_difference(run_lines(workload), read_jsonl(expected))
    assert difference is None, f"{workload.name}: {difference}"
