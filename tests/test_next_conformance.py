"""The 2026-model scenarios from real vLLM 0.33.0 the engine models: line by line.

`../shared/conformance-next/` holds them (format in `../shared/oracle/README.md`,
"Hybrid KV cache groups", "EAGLE / MTP" and "prefill_schedule_interval"). Hybrid runs
compare every group's block ids (`new_block_ids_by_group`, `block_tables`) too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_CONFORMANCE, TESTS, read_jsonl
from oracle_compare import first_difference, run_lines
from stepscope.engine import EngineConfig, Workload, WorkloadError, load_workload
from stepscope.engine.errors import ConfigError
from stepscope.replay.exact import replay_exact
from stepscope.replay.inputs import recorded_config
from stepscope.schema import open_trace
from traces import record

SHARED_NEXT = SHARED_CONFORMANCE.parent / "conformance-next"
HYBRID = ("71_", "72_", "73_", "74_", "75_", "76_", "77_", "78_", "80_")
"""Hybrid KV cache groups (80 with EAGLE-3 and async scheduling)."""
DRAFTERS_AND_CADENCE = ("79_", "81_", "82_", "83_", "84_")
"""EAGLE / MTP drafters (79, 81, 82) and the prefill cadence (83, 84): the modelled
scenarios a checkpoint can hold (it holds one KV cache group)."""
MODELLED = (*HYBRID, *DRAFTERS_AND_CADENCE)


def _cases() -> list[pytest.param]:
    return [
        pytest.param(
            workload, workload.with_name(workload.stem + ".expected.jsonl"), id=workload.stem
        )
        for workload in sorted(SHARED_NEXT.glob("*.json"))
        if workload.name.startswith(MODELLED)
    ]


CASES = _cases()
BASE = {"block_size": 4, "num_blocks": 20, "max_num_batched_tokens": 32, "max_num_seqs": 4}
EAGLE = {"num_speculative_tokens": 2, "speculative_method": "eagle"}


@pytest.mark.skipif(not SHARED_NEXT.is_dir(), reason="no ../shared/conformance-next")
def test_the_modelled_scenarios_are_present() -> None:
    assert len(CASES) == len(MODELLED)


@pytest.mark.parametrize(("workload", "expected"), CASES)
def test_matches_vllm_with_2026_features(workload: Path, expected: Path) -> None:
    difference = first_difference(run_lines(workload), read_jsonl(expected))
    assert difference is None, f"{workload.name}: {difference}"


# ----- vLLM 0.32 decides otherwise on 79, 83 and 84 ------------------------------------

V032 = TESTS / "conformance_v032"
AS_UNDER_032 = {
    "79_": "07_eagle_trailing_block_drop",
    "83_": "08_interval2_not_applied",
    "84_": "09_interval4_not_applied",
}
"""Each scenario whose decisions differ under 0.32, and real vLLM 0.32.0's run of it."""


def _workload_under(workload: Path, version: str, **knobs: Any) -> Workload:
    loaded = load_workload(workload)
    return loaded.with_config(loaded.config.with_knobs({"vllm_version": version, **knobs}))


@pytest.mark.parametrize(("prefix", "v032"), sorted(AS_UNDER_032.items()))
def test_under_032_the_scenario_decides_as_vllm_032(prefix: str, v032: str) -> None:
    (workload,) = (case.values[0] for case in CASES if str(case.id).startswith(prefix))
    ours = run_lines(_workload_under(workload, "0.32.0"))
    assert first_difference(ours, read_jsonl(V032 / f"{v032}.expected.jsonl")) is None
    expected_033 = read_jsonl(workload.with_name(workload.stem + ".expected.jsonl"))
    assert first_difference(ours, expected_033) is not None


def test_032_keeps_no_cadence_and_no_lookahead_hashes() -> None:
    config = EngineConfig.from_dict(
        {**BASE, "prefill_schedule_interval": 4, "vllm_version": "0.32.0"}
    ).with_knobs({"num_speculative_tokens": 2, "speculative_method": "eagle"})
    assert config.local_prefill_interval == 1 and not config.keeps_prefill_cadence
    assert (config.num_hash_lookahead_tokens, config.use_eagle_block_drop) == (0, True)
    config_033 = config.with_knobs({"vllm_version": "0.33.0"})
    assert config_033.local_prefill_interval == 4 and config_033.keeps_prefill_cadence
    assert (config_033.num_hash_lookahead_tokens, config_033.use_eagle_block_drop) == (1, False)


def test_the_drafter_decides_slots_lookahead_and_hashes() -> None:
    spec = {**BASE, "enable_prefix_caching": True, "num_speculative_tokens": 3}
    eagle3 = EngineConfig.from_dict({**spec, "speculative_method": "eagle3"})
    assert (eagle3.max_num_new_slots_for_drafting, eagle3.num_lookahead_tokens) == (0, 3)
    assert eagle3.with_knobs({"parallel_drafting": True}).max_num_new_slots_for_drafting == 2
    pard = eagle3.with_knobs({"speculative_method": "draft_model", "parallel_drafting": True})
    assert pard.max_num_new_slots_for_drafting == 3
    mtp = eagle3.with_knobs({"speculative_method": "mtp", "mtp_num_modules": 3})
    assert (mtp.num_prefill_lookahead_tokens, mtp.num_hash_lookahead_tokens) == (3, 3)
    assert mtp.with_knobs({"mtp_num_modules": 1}).num_prefill_lookahead_tokens == 1
    plain = mtp.with_knobs({"disable_lookahead_block_hashes": True})
    assert (plain.num_hash_lookahead_tokens, plain.use_eagle_block_drop) == (0, True)


# ----- bad workload keys ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("knobs", "key", "words"),
    [
        ({"prefill_schedule_interval": 0}, "prefill_schedule_interval", "at least 1"),
        ({"prefill_schedule_interval": "2"}, "prefill_schedule_interval", "expected an integer"),
        ({"mtp_num_modules": 2}, "mtp_num_modules", "needs num_speculative_tokens"),
        ({**EAGLE, "mtp_num_modules": 2}, "mtp_num_modules", "needs speculative_method mtp"),
        (
            {**EAGLE, "speculative_method": "mtp", "mtp_num_modules": 0},
            "mtp_num_modules",
            "at least 1",
        ),
        ({"parallel_drafting": True}, "parallel_drafting", "needs num_speculative_tokens"),
        ({**EAGLE, "parallel_drafting": 1}, "parallel_drafting", "expected true or false"),
        (
            {"num_speculative_tokens": 3, "speculative_method": "mtp", "mtp_num_modules": 2},
            "num_speculative_tokens",
            "3 must be divisible by mtp_num_modules 2",
        ),
        (
            {**EAGLE, "disable_lookahead_block_hashes": True, "vllm_version": "0.32.0"},
            "disable_lookahead_block_hashes",
            "no lookahead block hashes",
        ),
        (
            {
                "num_speculative_tokens": 5,
                "speculative_method": "mtp",
                "mtp_num_modules": 5,
                "enable_prefix_caching": True,
            },
            "block_size",
            "block_size >= num_speculative_tokens (5)",
        ),
    ],
)
def test_bad_knobs_name_the_key(knobs: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as error:
        EngineConfig.from_dict({**BASE, **knobs})
    assert error.value.key == key and words in error.value.message


def test_a_bad_key_in_a_workload_file_names_it(tmp_path: Path) -> None:
    (eagle,) = (case.values[0] for case in CASES if str(case.id).startswith("79_"))
    raw = json.loads(eagle.read_text())
    raw["config"]["mtp_num_modules"] = 2
    path = tmp_path / "w.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(WorkloadError, match="mtp_num_modules: needs speculative_method mtp"):
        load_workload(path)


# ----- recorded and replayed --------------------------------------------------------------


@pytest.mark.parametrize(("workload", "expected"), CASES)
def test_a_recording_keeps_the_knobs_and_replays_exactly(
    workload: Path, expected: Path, tmp_path: Path
) -> None:
    loaded = load_workload(workload)
    trace = record(loaded, tmp_path / "t.duckdb").path
    with open_trace(trace) as opened:
        assert recorded_config(opened) == loaded.config
    result = replay_exact(trace)
    assert result.divergence is None
    assert result.num_compared_steps == result.num_recorded_steps > 0
