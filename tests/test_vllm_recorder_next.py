"""vLLM's real scheduler with EAGLE-style drafters or a prefill cadence, recorded, against
the engine.

The scenarios of `../shared/conformance-next/` with one KV cache group (EAGLE, EAGLE-3 and
MTP drafters, parallel drafting, `prefill_schedule_interval`; made by real vLLM 0.33.0)
run through vLLM's scheduler with the oracle's scripted drafter, recorded by
`stepscope.tracer.vllm`, under both supported versions: 0.33.0 (`vllm`) and 0.32.0
(`vllm_live`, where lookahead block hashes and the local cadence do not exist). Such an
engine is no longer outside the subset: the trace must be row-for-row what stepscope's
engine records for the same workload under that version's rules, and replay exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import SHARED_CONFORMANCE
from stepscope.engine import EngineConfig
from stepscope.replay.exact import replay_exact
from stepscope.schema import open_trace
from stepscope.tracer.vllm.attach.subset import drafting_differences
from vllm_env import VllmPython, assert_records_as_the_engine_does

NEXT = SHARED_CONFORMANCE.parent / "conformance-next"
EAGLE_OR_CADENCE_KNOBS = ("speculative_method", "prefill_schedule_interval")


def _one_group_eagle_or_cadence(path: Path) -> bool:
    config = json.loads(path.read_text())["config"]
    return "kv_cache_groups" not in config and any(k in config for k in EAGLE_OR_CADENCE_KNOBS)


SCENARIOS = sorted(p for p in NEXT.glob("*.json") if _one_group_eagle_or_cadence(p))
VERSIONS = {"0.33.0": "vllm", "0.32.0": "vllm_live"}
"""Each supported vLLM version, and the fixture of the venv that has it."""
RECORDED_KNOBS = (
    "num_speculative_tokens",
    "speculative_method",
    "mtp_num_modules",
    "parallel_drafting",
    "disable_lookahead_block_hashes",
    "prefill_schedule_interval",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not NEXT.is_dir(), reason=f"no {NEXT}"),
]


@dataclass(frozen=True)
class Recorded:
    vllm: VllmPython
    version: str
    out: Path

    def trace(self, workload: Path) -> Path:
        return self.out / f"{workload.stem}.duckdb"


@pytest.fixture(scope="module", params=list(VERSIONS))
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Every scenario here recorded by one vLLM version, in one call (vLLM's import is slow)."""
    vllm: VllmPython = request.getfixturevalue(VERSIONS[request.param])
    out = tmp_path_factory.mktemp(f"vllm-next-{request.param}")
    vllm.record(out, SCENARIOS, {"vllm_version": request.param})
    return Recorded(vllm, request.param, out)


def test_the_scenarios_are_found() -> None:
    assert len(SCENARIOS) >= 5, SCENARIOS


@pytest.mark.parametrize("workload", SCENARIOS, ids=lambda p: p.stem)
def test_eagle_and_cadence_runs_record_as_the_engine_does(
    recorded: Recorded, tmp_path: Path, workload: Path
) -> None:
    assert_records_as_the_engine_does(
        recorded.trace(workload), workload, recorded.version, tmp_path / "engine.duckdb"
    )


def test_plain_block_hashes_record_as_the_engine_does(vllm: VllmPython, tmp_path: Path) -> None:
    """`disable_lookahead_block_hashes` (0.33): EAGLE-style runs with prefix caching drop the
    last matched block instead, in vLLM and in the engine alike."""
    workloads = []
    for path in SCENARIOS:
        raw = json.loads(path.read_text())
        config = raw["config"]
        if "speculative_method" in config and config.get("enable_prefix_caching", True):
            raw["config"] = {**config, "disable_lookahead_block_hashes": True}
            workloads.append(tmp_path / f"plain-{path.name}")
            workloads[-1].write_text(json.dumps(raw))
    assert workloads, "no EAGLE-style scenario with prefix caching"
    vllm.record(tmp_path, workloads, {})
    for workload in workloads:
        vllm_trace = tmp_path / f"{workload.stem}.duckdb"
        engine_trace = tmp_path / f"engine-{workload.stem}.duckdb"
        assert_records_as_the_engine_does(vllm_trace, workload, "0.33.0", engine_trace)
        assert replay_exact(vllm_trace).divergence is None


def test_plain_block_hashes_on_vllm_032_are_refused_in_one_line(
    vllm_live: VllmPython, tmp_path: Path
) -> None:
    """vLLM 0.32 has no lookahead block hashes: a 0.33 workload that disables them is refused
    by name before vLLM's own config refuses the key."""
    raw = json.loads((NEXT / "79_eagle_lookahead_block_hashes.json").read_text())
    raw["config"] = {**raw["config"], "disable_lookahead_block_hashes": True}
    workload = tmp_path / "plain-hashes.json"
    workload.write_text(json.dumps(raw))
    output = tmp_path / "plain-hashes.duckdb"
    result = vllm_live.stepscope("record", str(workload), "--engine", "vllm", "-o", str(output))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    error = result.stderr.strip().splitlines()[-1]  # after vLLM's own import-time notices
    assert error.startswith("error: config.disable_lookahead_block_hashes: the installed vLLM")
    assert not output.exists()


@pytest.mark.parametrize("workload", SCENARIOS, ids=lambda p: p.stem)
def test_eagle_and_cadence_engines_are_not_outside_the_subset(
    recorded: Recorded, workload: Path
) -> None:
    raw = json.loads(workload.read_text())["config"]
    with open_trace(recorded.trace(workload)) as trace:
        assert trace.meta["outside_subset"] == ""
        kept = {knob: trace.config[knob] for knob in RECORDED_KNOBS if knob in raw}
    assert kept == {knob: raw[knob] for knob in RECORDED_KNOBS if knob in raw}


@pytest.mark.parametrize("workload", SCENARIOS, ids=lambda p: p.stem)
def test_eagle_and_cadence_traces_replay_exactly(recorded: Recorded, workload: Path) -> None:
    assert replay_exact(recorded.trace(workload)).divergence is None


def _scheduler(**drafting: object) -> SimpleNamespace:
    """What `drafting_differences` reads of a vLLM scheduler: EAGLE k=2, prefix caching."""
    values = {
        "num_lookahead_tokens": 2,
        "num_prefill_lookahead": 1,
        "num_hash_lookahead_tokens": 1,
        "use_eagle_block_drop": False,
        "max_num_new_slots_for_drafting": 0,
        **drafting,
    }
    speculative = SimpleNamespace(
        max_num_new_slots_for_drafting=values.pop("max_num_new_slots_for_drafting")
    )
    return SimpleNamespace(vllm_config=SimpleNamespace(speculative_config=speculative), **values)


EAGLE = EngineConfig.from_dict(
    {
        "block_size": 4,
        "num_blocks": 40,
        "max_num_batched_tokens": 32,
        "max_num_seqs": 4,
        "num_speculative_tokens": 2,
        "speculative_method": "eagle",
    }
)


def test_an_eagle_scheduler_reserving_as_the_engine_is_in_the_subset() -> None:
    assert drafting_differences(_scheduler(), EAGLE) == set()


def test_a_drafting_knob_the_engine_does_not_model_is_outside_the_subset() -> None:
    # disable_eagle_block_drop under 0.32's plain hashes: no trailing-block drop.
    as_032 = EAGLE.with_knobs({"vllm_version": "0.32.0"})
    reasons = drafting_differences(
        _scheduler(num_hash_lookahead_tokens=0, use_eagle_block_drop=False), as_032
    )
    assert reasons == {"speculative decoding with use_eagle_block_drop False (the engine's: True)"}


def test_eagle_and_cadence_traces_replay_identically_through_vllm(recorded: Recorded) -> None:
    traces = [str(recorded.trace(workload)) for workload in SCENARIOS]
    outcomes = json.loads(recorded.vllm.harness("replay", *traces))
    assert outcomes == dict.fromkeys(traces, "identical")
