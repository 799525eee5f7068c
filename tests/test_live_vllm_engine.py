"""vLLM's offline `LLM` API on a real engine, recorded with either recording class.

`RecordingScheduler` runs synchronous (FCFS); `RecordingAsyncScheduler` runs with
async scheduling on (priority), which vLLM's CPU platform would turn off: a
test-only plugin (`live_plugin/`) keeps it on, and the CPU model runner handles
the async output path, so `EngineCore` drives the batch queue as on a GPU. Both take
a checkpoint every few steps (`STEPSCOPE_TRACE_CHECKPOINT`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from checkpoint_checks import assert_checkpoints_hold
from conftest import TESTS
from live_server import ASYNC_ON_CPU
from stepscope.replay.checkpoints import checkpoint_steps, read_checkpoint
from stepscope.schema import open_trace

pytestmark = pytest.mark.live

OFFLINE = TESTS / "live_offline.py"
CLASSES = {
    "sync": ("stepscope.tracer.vllm.RecordingScheduler", ()),
    "async": (
        "stepscope.tracer.vllm.RecordingAsyncScheduler",
        ("--priority", "--async-scheduling"),
    ),
}
CHECKPOINT_EVERY = 3


@pytest.fixture(scope="module", params=sorted(CLASSES))
def recorded(
    request: pytest.FixtureRequest,
    vllm_live: Any,
    tiny_model: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    scheduler_cls, flags = CLASSES[request.param]
    trace = tmp_path_factory.mktemp("live-offline") / f"{request.param}.duckdb"
    path = os.pathsep.join([str(ASYNC_ON_CPU), str(vllm_live.site)])
    result = vllm_live.run(
        [str(OFFLINE), str(tiny_model), str(trace), scheduler_cls, *flags],
        env={"PYTHONPATH": path, "STEPSCOPE_TRACE_CHECKPOINT": f"{CHECKPOINT_EVERY}steps"},
    )
    (line,) = [line for line in result.stdout.splitlines() if line.startswith('{"sampled"')]
    assert json.loads(line)["sampled"] > 0
    return trace


def test_the_trace_is_complete_and_names_the_engine(recorded: Path) -> None:
    with open_trace(recorded) as trace:
        assert trace.meta["complete"] == "true"
        assert trace.meta["vllm_version"] == "0.32.0"
        assert trace.meta["scheduler_class"].startswith("stepscope.tracer.vllm.")
        assert trace.meta["outside_subset"] == ""
        assert trace.config["async_scheduling"] is (recorded.stem == "async")
        ((num_requests,),) = trace.sql("SELECT count(*) FROM _requests").fetchall()
        ((chunks,),) = trace.sql(
            "SELECT count(*) FROM _scheduled WHERE sampled_token_id IS NULL"
        ).fetchall()
    assert num_requests == 40
    assert chunks > 0, "no prefill was chunked"


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
    result = replay(recorded)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("identical"), result.stdout[:3000]


def test_its_checkpoints_are_the_state_the_engine_reaches(recorded: Path) -> None:
    """Taken from the live scheduler (under async scheduling, with a batch in `EngineCore`'s
    queue): each holds the state a replay from step 0 reaches, and a replay from the step
    after the middle one is identical."""
    with open_trace(recorded) as trace:
        async_scheduling = trace.config["async_scheduling"]
        num_steps, steps = trace.num_steps, checkpoint_steps(trace)
        batches = [read_checkpoint(trace, step).pending_batch for step in steps]
    assert steps == list(range(CHECKPOINT_EVERY, num_steps, CHECKPOINT_EVERY))
    assert any(batch is not None for batch in batches) is async_scheduling
    assert assert_checkpoints_hold(recorded) == len(steps)
    result = replay(recorded, "--from-step", str(steps[len(steps) // 2] + 1))
    assert result.stdout.startswith("identical"), result.stdout[:3000] + result.stderr[-3000:]


def replay(trace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepscope", "replay", str(trace), *args],
        capture_output=True,
        text=True,
    )


def test_the_trace_replays_exactly_through_vllms_scheduler(recorded: Path, vllm_live: Any) -> None:
    result = vllm_live.run(
        ["-m", "stepscope", "replay", "--engine", "vllm", str(recorded)], check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "through vLLM 0.32.0's" in " ".join(result.stdout.split())
    assert "\nidentical: every step decided the same\n" in result.stdout, result.stdout[:3000]
