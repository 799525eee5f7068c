"""vLLM's real scheduler with hybrid KV cache groups, recorded, against the engine.

The scenarios of `../shared/conformance-next/` with `kv_cache_groups` (sliding window and
chunked local attention beside full attention, Gemma-style window groups, EAGLE-3 under
async scheduling; made by real vLLM 0.33.0) run through vLLM's scheduler built with one
KV cache group per entry, recorded by `stepscope.tracer.vllm`, under both supported
versions: 0.33.0 (`vllm`) and 0.32.0 (`vllm_live`), which decide them alike. Such an engine
is no longer outside the subset: the trace must be row for row what stepscope's engine
records for the same workload (every group's block ids, the groups in the config), and
replay exactly through either engine; its checkpoints (and a recording folder's segments)
hold every group's state as the engine reaches it, and replays start from them. Groups of a
spec the engine does not model stay flagged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from checkpoint_checks import assert_checkpoints_hold
from conftest import SHARED_CONFORMANCE
from stepscope.engine import EngineConfig
from stepscope.engine.kv_cache_groups import AttentionType, KVCacheGroupSpec
from stepscope.replay.checkpoints import checkpoint_steps
from stepscope.replay.exact import replay_exact
from stepscope.schema import open_trace
from stepscope.schema.recording_layout import scan
from stepscope.tracer.vllm.attach.convert import kv_cache_groups
from stepscope.tracer.vllm.attach.subset import kv_cache_groups_outside_subset
from vllm_env import VllmPython, assert_records_as_the_engine_does

NEXT = SHARED_CONFORMANCE.parent / "conformance-next"


def _hybrid(path: Path) -> bool:
    return "kv_cache_groups" in json.loads(path.read_text())["config"]


SCENARIOS = sorted(p for p in NEXT.glob("*.json") if _hybrid(p))
VERSIONS = {"0.33.0": "vllm", "0.32.0": "vllm_live"}
"""Each supported vLLM version, and the fixture of the venv that has it."""

pytestmark = pytest.mark.skipif(not NEXT.is_dir(), reason=f"no {NEXT}")


@dataclass(frozen=True)
class Recorded:
    vllm: VllmPython
    version: str
    out: Path

    def trace(self, workload: Path) -> Path:
        return self.out / f"{workload.stem}.duckdb"


@pytest.fixture(scope="module", params=list(VERSIONS))
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Every hybrid scenario recorded by one vLLM version, in one call (vLLM's import is slow)."""
    vllm: VllmPython = request.getfixturevalue(VERSIONS[request.param])
    out = tmp_path_factory.mktemp(f"vllm-hybrid-{request.param}")
    vllm.record(out, SCENARIOS, {"vllm_version": request.param})
    return Recorded(vllm, request.param, out)


def test_the_scenarios_are_found() -> None:
    assert len(SCENARIOS) >= 8, SCENARIOS


@pytest.mark.slow
@pytest.mark.parametrize("workload", SCENARIOS, ids=lambda p: p.stem)
def test_hybrid_runs_record_as_the_engine_does(
    recorded: Recorded, tmp_path: Path, workload: Path
) -> None:
    """Not outside the subset, and the same rows as the engine's: the groups and retention
    interval in `_config`, every group's block ids (null entries as 0) in `_block_ids`."""
    assert_records_as_the_engine_does(
        recorded.trace(workload), workload, recorded.version, tmp_path / "engine.duckdb"
    )


@pytest.mark.slow
@pytest.mark.parametrize("workload", SCENARIOS, ids=lambda p: p.stem)
def test_hybrid_traces_hold_every_group(recorded: Recorded, workload: Path) -> None:
    config = json.loads(workload.read_text())["config"]
    with open_trace(recorded.trace(workload)) as trace:
        groups = trace.config["kv_cache_groups"]
        retention = trace.config["prefix_cache_retention_interval"]
        in_use = trace.sql("SELECT DISTINCT kv_cache_group FROM _block_ids ORDER BY 1").fetchall()
    kept = [{k: v for k, v in group.items() if v is not None} for group in groups]
    assert kept == config["kv_cache_groups"]
    assert retention == config.get("prefix_cache_retention_interval", 0)
    assert in_use == [(group,) for group in range(len(groups))]


@pytest.mark.slow
@pytest.mark.parametrize("workload", SCENARIOS, ids=lambda p: p.stem)
def test_hybrid_traces_replay_exactly(recorded: Recorded, workload: Path) -> None:
    assert replay_exact(recorded.trace(workload)).divergence is None


@pytest.mark.slow
def test_hybrid_traces_replay_identically_through_vllm(recorded: Recorded) -> None:
    traces = [str(recorded.trace(workload)) for workload in SCENARIOS]
    outcomes = json.loads(recorded.vllm.harness("replay", *traces))
    assert outcomes == dict.fromkeys(traces, "identical")


CHECKPOINT_EVERY = 2


@pytest.fixture(scope="module", params=list(VERSIONS))
def checkpointed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Recorded:
    """Every hybrid scenario recorded by one vLLM version with a checkpoint every 2 steps."""
    vllm: VllmPython = request.getfixturevalue(VERSIONS[request.param])
    out = tmp_path_factory.mktemp(f"vllm-hybrid-checkpoints-{request.param}")
    env = {"STEPSCOPE_TRACE_CHECKPOINT": f"{CHECKPOINT_EVERY}steps"}
    vllm.record(out, SCENARIOS, {"vllm_version": request.param}, env=env)
    return Recorded(vllm, request.param, out)


@pytest.mark.slow
@pytest.mark.parametrize("workload", SCENARIOS, ids=lambda p: p.stem)
def test_each_hybrid_checkpoint_is_the_state_the_engine_reaches(
    checkpointed: Recorded, workload: Path
) -> None:
    """Every group's tables (null entries as 0), the group-keyed hashes and each request's
    junction, read from vLLM's live state, equal what stepscope's engine holds there."""
    trace_path = checkpointed.trace(workload)
    with open_trace(trace_path) as trace:
        assert trace.meta["outside_subset"] == ""
        expected = list(range(CHECKPOINT_EVERY, trace.num_steps, CHECKPOINT_EVERY))
        assert checkpoint_steps(trace) == expected
    assert_checkpoints_hold(trace_path)


@pytest.mark.slow
def test_a_replay_from_a_hybrid_vllm_checkpoint_is_identical(checkpointed: Recorded) -> None:
    for workload in SCENARIOS:
        trace_path = checkpointed.trace(workload)
        with open_trace(trace_path) as trace:
            steps = checkpoint_steps(trace)
        for step in {steps[len(steps) // 2], steps[-1]}:
            result = checkpointed.vllm.stepscope(
                "replay", str(trace_path), "--from-step", str(step)
            )
            assert result.stdout.startswith("identical"), (workload.stem, step, result.stdout)


@pytest.mark.slow
def test_a_segmented_hybrid_recording_replays_from_every_segment(
    vllm: VllmPython, tmp_path: Path
) -> None:
    """Each segment opens with a checkpoint of every group, taken from vLLM's live state."""
    vllm.record(tmp_path, SCENARIOS, {}, env={"STEPSCOPE_TRACE_SEGMENT": "3steps"})
    for workload in SCENARIOS:
        folder = tmp_path / workload.stem
        segments = scan(folder)
        with open_trace(folder) as trace:
            assert [s.first_step for s in segments] == list(range(0, trace.num_steps, 3))
        assert_checkpoints_hold(folder)
        last = str(segments[-1].first_step)
        result = vllm.stepscope("replay", str(folder), "--from-step", last)
        assert result.stdout.startswith("identical"), (workload.stem, result.stdout)


# ----- which groups are in the subset (no vLLM needed: specs are told by class name) -----


def _spec(name: str, **fields: Any) -> Any:
    """An object of a class named as vLLM's spec class, with the fields the recorder reads."""
    spec = type(name, (), {})()
    vars(spec).update(fields)
    return spec


def _scheduler(*specs: Any) -> SimpleNamespace:
    """What the recorder reads of a vLLM scheduler's KV cache groups (block size 4)."""
    groups = [SimpleNamespace(kv_cache_spec=spec) for spec in specs]
    return SimpleNamespace(
        block_size=4,
        kv_cache_config=SimpleNamespace(kv_cache_groups=groups, prefix_cache_retention_interval=0),
    )


FULL = _spec("FullAttentionSpec", block_size=4)
WINDOW = _spec("SlidingWindowSpec", block_size=4, sliding_window=8, extra_retained_tokens=0)
LOCAL = _spec("ChunkedLocalAttentionSpec", block_size=4, attention_chunk_size=8)
PLAIN = EngineConfig.from_dict(
    {"block_size": 4, "num_blocks": 40, "max_num_batched_tokens": 32, "max_num_seqs": 4}
)


def test_full_window_and_local_groups_are_in_the_subset() -> None:
    scheduler = _scheduler(WINDOW, LOCAL, FULL)
    groups = kv_cache_groups(scheduler.kv_cache_config)
    assert groups == (
        KVCacheGroupSpec(AttentionType.SLIDING_WINDOW, sliding_window=8),
        KVCacheGroupSpec(AttentionType.CHUNKED_LOCAL, attention_chunk_size=8),
        KVCacheGroupSpec(AttentionType.FULL),
    )
    config = PLAIN.with_knobs({"kv_cache_groups": [group.to_dict() for group in groups]})
    assert kv_cache_groups_outside_subset(scheduler, config) == set()


def test_one_full_group_is_the_engine_s_default() -> None:
    assert kv_cache_groups(_scheduler(FULL).kv_cache_config) is None


def test_mla_is_full_attention_to_the_scheduler() -> None:
    scheduler = _scheduler(_spec("MLAAttentionSpec", block_size=4))
    assert kv_cache_groups(scheduler.kv_cache_config) is None
    assert kv_cache_groups_outside_subset(scheduler, PLAIN) == set()


def test_a_spec_type_the_engine_does_not_model_is_named_outside_the_subset() -> None:
    scheduler = _scheduler(FULL, _spec("MambaSpec", block_size=4))
    assert kv_cache_groups(scheduler.kv_cache_config) is None
    reasons = kv_cache_groups_outside_subset(scheduler, PLAIN)
    assert reasons == {"KV cache spec MambaSpec"}


def test_a_group_with_a_block_size_of_its_own_is_outside_the_subset() -> None:
    wide = _spec("SlidingWindowSpec", block_size=8, sliding_window=8, extra_retained_tokens=0)
    scheduler = _scheduler(FULL, wide)
    config = PLAIN.with_knobs(
        {"kv_cache_groups": [{"type": "full"}, {"type": "sliding_window", "sliding_window": 8}]}
    )
    reasons = kv_cache_groups_outside_subset(scheduler, config)
    assert reasons == {"KV cache group block size 8 (the scheduler's: 4)"}
